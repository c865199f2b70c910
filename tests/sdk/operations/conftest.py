"""novu-py 3.19, unmodified, against a running Herald: one test per SDK operation.

Every module here names its tests ``test_<sdk path>`` (``novu.topics.subscriptions.create`` is
``test_topics_subscriptions_create``), so the suite's count of them is the count of operations
Herald serves. The SDK validates every answer with its own pydantic models: a call that returns
is an answer of the right shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from fastapi import FastAPI
from novu_py import Novu

from tests.conftest import Tenancy
from tests.fixtures.server import running_server

T = TypeVar("T")


@pytest.fixture(scope="session")
def server_url(app: FastAPI) -> Iterator[str]:
    """One real server per database for the whole session; each test works in its own organization."""
    with running_server(app.state.settings) as url:
        yield url


@pytest.fixture
def novu(server_url: str, tenancy: Tenancy) -> Novu:
    """The SDK as a backend uses it: the Development environment's secret key."""
    return Novu(secret_key=tenancy.api_key, server_url=server_url)


@pytest.fixture
def production_novu(server_url: str, tenancy: Tenancy) -> Novu:
    """The SDK with Production's key: Production is protected, so changes to it are made with its own key."""
    return Novu(secret_key=tenancy.production_api_key, server_url=server_url)


async def call(operation: Callable[[], T]) -> T:
    """Run a blocking SDK call off the event loop the in-process server shares nothing with."""
    return await asyncio.to_thread(operation)
