"""A burst of changes larger than the pool: every event reaches the socket.

A worker taking up a backlog commits thousands of messages at once; the
process holding the sockets reads each change's message and counts through
its pool. Here the realtime server's engine has one connection (two on
PostgreSQL) and a pool timeout of 10 ms, far shorter than the burst takes to
read on PostgreSQL: before the reads were bounded and a pool timeout waited
again, the changes past the timeout were logged and dropped there. (SQLite's
reads of one local file are quick enough that its burst got through either way.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from herald.kit.auth import SubscriberPrincipal, issue_subscriber_token
from herald.kit.db import create_engine, create_sessionmaker
from herald.realtime.server import Realtime, uvicorn_websocket_options
from herald.realtime.signals import COUNTS, RECEIVED, Change
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, insert_in_app_message
from tests.fixtures.server import free_port
from tests.realtime.helpers import InboxSocket

BURST = 200


@pytest.fixture
async def tiny_pool_realtime(app: FastAPI) -> AsyncIterator[tuple[Realtime, str]]:
    """A realtime server, in the test's event loop, whose engine has a tiny pool with a short timeout."""
    settings = app.state.settings
    engine = create_engine(settings.database_url, pool_size=1, pool_timeout=0.01)
    realtime = Realtime(create_sessionmaker(engine), settings.secret_key, settings.database_url)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(realtime, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **uvicorn_websocket_options())
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        assert not serving.done(), "the realtime server did not start"
        await asyncio.sleep(0.01)
    try:
        yield realtime, f"http://127.0.0.1:{port}"
    finally:
        await realtime.close()
        server.should_exit = True
        await serving
        await engine.dispose()


async def test_a_burst_larger_than_the_pool_reaches_the_socket_whole(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient, tiny_pool_realtime: tuple[Realtime, str]
) -> None:
    realtime, url = tiny_pool_realtime
    subscriber = await create_subscriber(api)
    principal = SubscriberPrincipal(tenancy.environment_id, tenancy.organization_id, subscriber["_id"], subscriber["subscriberId"])
    socket = InboxSocket()
    try:
        await socket.connect(url, issue_subscriber_token(principal, app.state.settings.secret_key, 600))
        messages = [await insert_in_app_message(app, subscriber, content=f"number {n}") for n in range(BURST)]
        # As a worker's commit hands them over: one new message each, and a read (counts only) among them.
        changes = [Change(tenancy.environment_id, subscriber["_id"], RECEIVED, message.id) for message in messages]
        changes.insert(BURST // 2, Change(tenancy.environment_id, subscriber["_id"], COUNTS))
        realtime.deliver(changes)

        received = [(await socket.next("notification_received"))["message"]["_id"] for _ in messages]
        assert received == [message.id for message in messages]
        # Every count read after the messages were written: all of them unseen and unread.
        body = await socket.next("unread_count_changed")
        assert body["counts"]["total"] == BURST
    finally:
        await socket.close()
