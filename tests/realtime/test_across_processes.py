"""Across processes on PostgreSQL: a message a `herald worker` process makes reaches the socket an API process holds;
a subscriber's online state spans the API processes that hold their sockets.

The API runs as ``herald serve --no-worker`` and the worker as ``herald
worker``, each its own process: the only way between them is the database
(NOTIFY herald_realtime in the worker's transaction, LISTEN in the API;
realtime_presence and realtime_processes for who is online).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from sqlalchemy import select

from herald.models import Environment, RealtimePresence, RealtimeProcess, Subscriber
from tests.fixtures.processes import HeraldProcesses, wait_until
from tests.processes.conftest import IN_APP, ProcessStore, api_client, create, herald, store, trigger  # noqa: F401
from tests.realtime.helpers import InboxSocket, session_token


async def test_a_worker_process_reaches_the_socket_an_api_process_holds(store: ProcessStore, herald: HeraldProcesses) -> None:  # noqa: F811
    api = await herald.serve(worker=False)
    url = api.url or ""
    async with store.sessionmaker() as session:
        identifier = (
            await session.execute(select(Environment.identifier).where(Environment.id == store.environment_id))
        ).scalar_one()
    async with api_client(url, store.api_key) as client:
        workflow = await create(client, "/v1/workflows", {"name": "realtime across processes", "active": True, "steps": [IN_APP]})
        ada = await create(client, "/v1/subscribers", {"subscriberId": "ada-across"})
        bob = await create(client, "/v1/subscribers", {"subscriberId": "bob-across"})
        ada_socket, bob_socket = InboxSocket(), InboxSocket()
        try:
            await ada_socket.connect(url, (await session_token(url, identifier, ada["subscriberId"]))["token"])
            await bob_socket.connect(url, (await session_token(url, identifier, bob["subscriberId"]))["token"])
            # No worker yet: the API process makes no message itself.
            await trigger(client, workflow, ada["subscriberId"])
            assert await ada_socket.nothing_within(1.0) == []

            await herald.worker()
            received = await ada_socket.next("notification_received", timeout=30)
            assert received["message"]["content"] == "Hello ada-across"
            assert received["message"]["subscriber"]["subscriberId"] == "ada-across"
            assert (await ada_socket.next("unread_count_changed"))["unreadCount"] == 1
            assert await bob_socket.nothing_within(0.5) == []
        finally:
            await ada_socket.close()
            await bob_socket.close()


# Heartbeats every half second, so a killed process's row expires after 1.5 s
# and the next sweep of a live one takes it (the default is 10 s and 30 s).
FAST_HEARTBEAT = {"HERALD_REALTIME_HEARTBEAT_SECONDS": "0.5"}


async def environment_identifier(store: ProcessStore) -> str:  # noqa: F811
    async with store.sessionmaker() as session:
        return (
            await session.execute(select(Environment.identifier).where(Environment.id == store.environment_id))
        ).scalar_one()


async def subscriber_row(store: ProcessStore, internal_id: str) -> Subscriber:  # noqa: F811
    async with store.sessionmaker() as session:
        return (await session.execute(select(Subscriber).where(Subscriber.id == internal_id))).scalar_one()


async def rows_of_pid(store: ProcessStore, pid: int) -> tuple[list[str], list[str]]:  # noqa: F811
    """realtime_processes and realtime_presence rows of the API process with this pid (ids start hostname:pid:)."""
    prefix = f"{socket.gethostname()}:{pid}:"
    async with store.sessionmaker() as session:
        processes = (
            await session.execute(select(RealtimeProcess.id).where(RealtimeProcess.id.startswith(prefix)))
        ).scalars()
        presence = (
            await session.execute(
                select(RealtimePresence.subscriber_id).where(RealtimePresence.process_id.startswith(prefix))
            )
        ).scalars()
        return list(processes), list(presence)


async def connected(url: str, identifier: str, subscriber_id: str) -> InboxSocket:
    inbox = InboxSocket()
    await inbox.connect(url, (await session_token(url, identifier, subscriber_id))["token"])
    return inbox


async def test_a_subscriber_on_two_api_processes_is_online_until_the_last_socket_closes(
    store: ProcessStore,  # noqa: F811
    herald: HeraldProcesses,  # noqa: F811
) -> None:
    first, second = await asyncio.gather(herald.serve(**FAST_HEARTBEAT), herald.serve(**FAST_HEARTBEAT))
    identifier = await environment_identifier(store)
    async with api_client(first.url or "", store.api_key) as client:
        ada = await create(client, "/v1/subscribers", {"subscriberId": "ada-two-processes"})
    sockets: list[InboxSocket] = []
    try:
        on_first = await connected(first.url or "", identifier, ada["subscriberId"])
        sockets.append(on_first)
        on_second = await connected(second.url or "", identifier, ada["subscriberId"])
        sockets.append(on_second)
        assert (await rows_of_pid(store, first.pid))[1] == [ada["_id"]]
        assert (await rows_of_pid(store, second.pid))[1] == [ada["_id"]]
        assert (await subscriber_row(store, ada["_id"])).is_online is True

        await on_first.close()

        async def first_let_go() -> bool:
            return (await rows_of_pid(store, first.pid))[1] == []

        await wait_until(first_let_go, timeout=10, what="the first process to write that it let go", describe=herald.describe)
        # Several heartbeats and sweeps later, the second process still holds ada: online.
        await asyncio.sleep(1.5)
        row = await subscriber_row(store, ada["_id"])
        assert row.is_online is True
        assert row.last_online_at is None

        await on_second.close()

        async def offline() -> Subscriber | None:
            found = await subscriber_row(store, ada["_id"])
            return found if found.is_online is False else None

        row = await wait_until(offline, timeout=10, what="ada to be offline", describe=herald.describe)
        assert row.last_online_at is not None
        herald.check_alive()
    finally:
        for inbox in sockets:
            await inbox.close()


async def test_a_killed_api_processs_subscribers_go_offline_after_the_sweep(
    store: ProcessStore,  # noqa: F811
    herald: HeraldProcesses,  # noqa: F811
) -> None:
    doomed, survivor = await asyncio.gather(herald.serve(**FAST_HEARTBEAT), herald.serve(**FAST_HEARTBEAT))
    identifier = await environment_identifier(store)
    async with api_client(survivor.url or "", store.api_key) as client:
        only_doomed = await create(client, "/v1/subscribers", {"subscriberId": "bob-killed-process"})
        on_both = await create(client, "/v1/subscribers", {"subscriberId": "cy-killed-process"})
    sockets: list[InboxSocket] = []
    try:
        sockets.append(await connected(doomed.url or "", identifier, only_doomed["subscriberId"]))
        sockets.append(await connected(doomed.url or "", identifier, on_both["subscriberId"]))
        sockets.append(await connected(survivor.url or "", identifier, on_both["subscriberId"]))
        processes, presence = await rows_of_pid(store, doomed.pid)
        assert len(processes) == 1
        assert sorted(presence) == sorted([only_doomed["_id"], on_both["_id"]])

        doomed.kill()

        async def swept() -> bool:
            return await rows_of_pid(store, doomed.pid) == ([], [])

        await wait_until(swept, timeout=15, what="the killed process to be swept", describe=herald.describe)
        gone = await subscriber_row(store, only_doomed["_id"])
        assert gone.is_online is False
        assert gone.last_online_at is not None
        # The survivor still holds a socket of cy.
        assert (await subscriber_row(store, on_both["_id"])).is_online is True
        assert (await rows_of_pid(store, survivor.pid))[1] == [on_both["_id"]]
        herald.check_alive()
    finally:
        for inbox in sockets:
            await inbox.close()


async def test_a_stopped_api_process_leaves_no_presence(
    store: ProcessStore,  # noqa: F811
    herald: HeraldProcesses,  # noqa: F811
) -> None:
    api = await herald.serve(**FAST_HEARTBEAT)
    identifier = await environment_identifier(store)
    async with api_client(api.url or "", store.api_key) as client:
        dee: dict[str, Any] = await create(client, "/v1/subscribers", {"subscriberId": "dee-stopped-process"})
    inbox = await connected(api.url or "", identifier, dee["subscriberId"])
    try:
        assert (await rows_of_pid(store, api.pid))[1] == [dee["_id"]]
        # uvicorn shuts down cleanly on SIGTERM, then exits by the signal.
        api.stop()
        # Gone at once with the clean shutdown, not after a sweep.
        assert await rows_of_pid(store, api.pid) == ([], [])
        row = await subscriber_row(store, dee["_id"])
        assert row.is_online is False
        assert row.last_online_at is not None
    finally:
        await inbox.close()
