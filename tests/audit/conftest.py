"""The console's fixtures (tests/fixtures/console.py): ``console_as(role)``, ``anonymous_console``."""

from tests.fixtures.console import anonymous_console, console_as  # noqa: F401
