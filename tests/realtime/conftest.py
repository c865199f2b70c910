"""The realtime tests' running server (with its in-process worker), an API client of it, and the sockets a test opens."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import Tenancy
from tests.fixtures.server import running_server
from tests.realtime.helpers import InboxSocket


@pytest.fixture
def served(app: FastAPI) -> Iterator[str]:
    """A running server with its in-process worker, on the test's store."""
    with running_server(replace(app.state.settings, run_worker=True, worker_poll_seconds=0.2)) as url:
        yield url


@pytest.fixture
async def herald(served: str, tenancy: Tenancy) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=served, headers={"Authorization": f"ApiKey {tenancy.api_key}"}) as client:
        yield client


@pytest.fixture
async def sockets() -> AsyncIterator[list[InboxSocket]]:
    opened: list[InboxSocket] = []
    yield opened
    for socket in opened:
        await socket.close()
