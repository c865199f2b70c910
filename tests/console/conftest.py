"""The console's fixtures (tests/fixtures/console.py): ``console_as(role)``, ``anonymous_console``;
``oidc_provider`` (tests/fixtures/oidc.py); ``smtp``, an SMTP server."""

from collections.abc import Iterator

import pytest

from tests.fixtures.console import anonymous_console, console_as  # noqa: F401
from tests.fixtures.oidc import oidc_provider  # noqa: F401
from tests.fixtures.peers import SmtpPeer


@pytest.fixture
def smtp() -> Iterator[SmtpPeer]:
    """An SMTP server on loopback that records what it accepts (email integrations send to it)."""
    server = SmtpPeer().start()
    try:
        yield server
    finally:
        server.stop()
