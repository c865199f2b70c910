"""SQLite runs on the event loop's thread: waiting for another process's write lock must not hold the loop.

Another connection (as another process would, the CLI say) takes the write
lock; a request that needs it waits with asyncio sleeps, so the service keeps
answering meanwhile, and goes through once the lock is released. A lock held
for longer than the wait allows answers 503, as any unreachable store does.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from herald.kit import db
from herald.kit.errors import STORE_UNAVAILABLE_MESSAGE
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.builders import unique


@pytest.fixture
def other_writer(app: FastAPI) -> Iterator[sqlite3.Connection]:
    """A second connection to the test's SQLite file, outside the service."""
    url = make_url(app.state.settings.database_url)
    if not url.drivername.startswith("sqlite"):
        pytest.skip("SQLite's write lock only")
    connection = sqlite3.connect(url.database, isolation_level=None, timeout=5)
    yield connection
    if connection.in_transaction:
        connection.rollback()
    connection.close()


async def test_a_request_waits_for_the_lock_without_holding_the_loop(
    app: FastAPI, tenancy: Tenancy, other_writer: sqlite3.Connection
) -> None:
    other_writer.execute("BEGIN IMMEDIATE")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    subscriber_id = unique("waiting")
    # A full pass of the cyclic collector over the suite's heap (hundreds of
    # milliseconds after tests/kit/test_heap.py unfreezes it) would stop the
    # loop too, and is not what this test is about.
    gc.collect()
    gc.disable()
    try:
        async with make_client(app, tenancy.api_key) as client:
            ticking = asyncio.create_task(ticker())
            request = asyncio.create_task(client.post("/v1/subscribers", json={"subscriberId": subscriber_id}))
            await asyncio.sleep(0.3)
            assert not request.done(), "the request did not wait for the lock"
            # The loop ran all along: about 30 ticks of 10 ms while the request waited.
            assert ticks >= 10, ticks
            other_writer.execute("COMMIT")
            response = await asyncio.wait_for(request, timeout=10)
            ticking.cancel()
            assert response.status_code == 201, response.text
            assert (await client.get(f"/v1/subscribers/{subscriber_id}")).status_code == 200
    finally:
        gc.enable()


async def test_a_lock_held_past_the_wait_answers_503(
    app: FastAPI, tenancy: Tenancy, other_writer: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "SQLITE_LOCK_WAIT_SECONDS", 0.3)
    other_writer.execute("BEGIN IMMEDIATE")
    try:
        async with make_client(app, tenancy.api_key) as client:
            response = await client.post("/v1/subscribers", json={"subscriberId": unique("late")})
    finally:
        other_writer.execute("ROLLBACK")
    assert_error(response, 503, STORE_UNAVAILABLE_MESSAGE)
    assert response.headers["retry-after"] == "1"
    # Once the lock is free the service writes again.
    async with make_client(app, tenancy.api_key) as client:
        again = await client.post("/v1/subscribers", json={"subscriberId": unique("after")})
    assert again.status_code == 201, again.text


def test_the_driver_is_the_inline_one() -> None:
    assert make_url(db.async_url("sqlite:///x.db")).drivername == "sqlite+heraldinline"
    assert db.sync_url("sqlite:///x.db") == "sqlite:///x.db"

