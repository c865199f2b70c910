"""Online state across API processes, through the store (herald/realtime/service.py), on SQLite and PostgreSQL.

Each "process" here is a process id with its row in realtime_processes, as
an API process writes it; the rules are the store's, so one test process can
play several API processes.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from herald.config import SettingsError, load_settings
from herald.kit.db import session_scope
from herald.kit.ids import short_id
from herald.kit.time import utcnow
from herald.models import RealtimePresence, RealtimeProcess, Subscriber
from herald.realtime import service
from herald.realtime.server import Realtime
from tests.fixtures.builders import create_subscriber

TTL = timedelta(seconds=30)


def process_name(label: str) -> str:
    return f"test-{label}:{short_id(8)}"


async def run(app: FastAPI, action: Any, *args: Any, **kwargs: Any) -> Any:
    """One transaction, as the socket server makes each write."""
    result = None
    async for session in session_scope(app.state.sessionmaker):
        result = await action(session, *args, **kwargs)
    return result


async def started(app: FastAPI, label: str) -> str:
    process_id = process_name(label)
    await run(app, service.register_process, process_id, TTL)
    return process_id


async def subscriber_row(app: FastAPI, internal_id: str) -> Subscriber:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Subscriber).where(Subscriber.id == internal_id))).scalar_one()


async def presence_of(app: FastAPI, process_id: str) -> set[str]:
    async with app.state.sessionmaker() as session:
        rows = await session.execute(
            select(RealtimePresence.subscriber_id).where(RealtimePresence.process_id == process_id)
        )
        return set(rows.scalars())


async def process_row(app: FastAPI, process_id: str) -> RealtimeProcess | None:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(RealtimeProcess).where(RealtimeProcess.id == process_id))).scalar_one_or_none()


async def expire(app: FastAPI, process_id: str, seconds_ago: float = 60.0) -> None:
    """The process stopped beating a while ago (killed without closing)."""
    then = utcnow() - timedelta(seconds=seconds_ago)
    async for session in session_scope(app.state.sessionmaker):
        await session.execute(
            update(RealtimeProcess)
            .where(RealtimeProcess.id == process_id)
            .values(seen_at=then - TTL, expires_at=then)
        )


@pytest.fixture
async def subscriber(api: httpx.AsyncClient) -> dict[str, Any]:
    return await create_subscriber(api)


async def test_a_subscriber_held_by_two_processes_goes_offline_with_the_last_release(
    app: FastAPI, subscriber: dict[str, Any]
) -> None:
    environment_id, internal_id = subscriber["_environmentId"], subscriber["_id"]
    first, second = await started(app, "a"), await started(app, "b")
    await run(app, service.hold, first, TTL, environment_id, internal_id)
    await run(app, service.hold, second, TTL, environment_id, internal_id)
    assert (await subscriber_row(app, internal_id)).is_online is True
    assert await presence_of(app, first) == {internal_id}

    assert await run(app, service.release, first, environment_id, internal_id) is False
    row = await subscriber_row(app, internal_id)
    assert row.is_online is True
    assert row.last_online_at is None
    assert await presence_of(app, first) == set()

    before = utcnow()
    assert await run(app, service.release, second, environment_id, internal_id) is True
    row = await subscriber_row(app, internal_id)
    assert row.is_online is False
    assert row.last_online_at is not None and row.last_online_at >= before - timedelta(seconds=1)


async def test_a_release_does_not_count_a_process_that_stopped_beating(
    app: FastAPI, subscriber: dict[str, Any]
) -> None:
    environment_id, internal_id = subscriber["_environmentId"], subscriber["_id"]
    live, dead = await started(app, "live"), await started(app, "dead")
    await run(app, service.hold, live, TTL, environment_id, internal_id)
    await run(app, service.hold, dead, TTL, environment_id, internal_id)
    await expire(app, dead)

    assert await run(app, service.release, live, environment_id, internal_id) is True
    assert (await subscriber_row(app, internal_id)).is_online is False


async def test_the_sweep_takes_a_dead_process_and_its_subscribers_no_live_process_holds(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    only_dead = await create_subscriber(api)
    both = await create_subscriber(api)
    environment_id = only_dead["_environmentId"]
    live, dead = await started(app, "live"), await started(app, "dead")
    await run(app, service.hold, dead, TTL, environment_id, only_dead["_id"])
    await run(app, service.hold, dead, TTL, environment_id, both["_id"])
    await run(app, service.hold, live, TTL, environment_id, both["_id"])

    # Not expired yet: the sweep leaves it alone.
    await service.sweep_dead_processes(app.state.sessionmaker)
    assert await presence_of(app, dead) == {only_dead["_id"], both["_id"]}

    await expire(app, dead)
    seen_at = (await process_row(app, dead)).seen_at  # type: ignore[union-attr]
    assert await service.sweep_dead_processes(app.state.sessionmaker) >= 1
    assert await process_row(app, dead) is None
    assert await presence_of(app, dead) == set()
    gone = await subscriber_row(app, only_dead["_id"])
    assert gone.is_online is False
    # Offline since the dead process was last seen alive.
    assert gone.last_online_at == seen_at
    kept = await subscriber_row(app, both["_id"])
    assert kept.is_online is True
    assert await presence_of(app, live) == {both["_id"]}
    # Swept once: a second sweep finds nothing of it.
    await service.sweep_dead_processes(app.state.sessionmaker)
    assert (await subscriber_row(app, only_dead["_id"])).last_online_at == seen_at


async def test_a_sweep_does_not_take_a_process_that_beat_again(app: FastAPI, subscriber: dict[str, Any]) -> None:
    environment_id, internal_id = subscriber["_environmentId"], subscriber["_id"]
    process_id = await started(app, "slow")
    await run(app, service.hold, process_id, TTL, environment_id, internal_id)
    await expire(app, process_id)
    assert await run(app, service.heartbeat, process_id, TTL) is True
    await service.sweep_dead_processes(app.state.sessionmaker)
    assert await process_row(app, process_id) is not None
    assert (await subscriber_row(app, internal_id)).is_online is True


async def test_a_process_swept_while_alive_learns_it_at_its_heartbeat(app: FastAPI, subscriber: dict[str, Any]) -> None:
    environment_id, internal_id = subscriber["_environmentId"], subscriber["_id"]
    process_id = await started(app, "paused")
    await expire(app, process_id)
    await service.sweep_dead_processes(app.state.sessionmaker)
    # A connect after the sweep puts the row back (so its presence is swept if it dies), unannounced.
    await run(app, service.hold, process_id, TTL, environment_id, internal_id)
    row = await process_row(app, process_id)
    assert row is not None and row.announced is False
    assert await run(app, service.heartbeat, process_id, TTL) is False


async def test_a_clean_shutdown_removes_the_process_and_its_presence(app: FastAPI, api: httpx.AsyncClient) -> None:
    alone, shared = await create_subscriber(api), await create_subscriber(api)
    environment_id = alone["_environmentId"]
    leaving, staying = await started(app, "leaving"), await started(app, "staying")
    await run(app, service.hold, leaving, TTL, environment_id, alone["_id"])
    await run(app, service.hold, leaving, TTL, environment_id, shared["_id"])
    await run(app, service.hold, staying, TTL, environment_id, shared["_id"])

    assert await run(app, service.sweep_process, leaving, expired_before=None) == 1
    assert await process_row(app, leaving) is None
    assert await presence_of(app, leaving) == set()
    assert (await subscriber_row(app, alone["_id"])).is_online is False
    assert (await subscriber_row(app, shared["_id"])).is_online is True


async def test_two_processes_releasing_at_once_leave_the_subscriber_offline(
    app: FastAPI, subscriber: dict[str, Any]
) -> None:
    """The check-and-set is atomic: neither release may read the other's row as still there after it went."""
    environment_id, internal_id = subscriber["_environmentId"], subscriber["_id"]
    first, second = await started(app, "a"), await started(app, "b")
    for _ in range(5):
        await run(app, service.hold, first, TTL, environment_id, internal_id)
        await run(app, service.hold, second, TTL, environment_id, internal_id)
        outcomes = await asyncio.gather(
            run(app, service.release, first, environment_id, internal_id),
            run(app, service.release, second, environment_id, internal_id),
        )
        assert sorted(outcomes) == [False, True]
        assert (await subscriber_row(app, internal_id)).is_online is False


async def test_a_connect_on_one_process_while_another_releases_ends_online(
    app: FastAPI, subscriber: dict[str, Any]
) -> None:
    environment_id, internal_id = subscriber["_environmentId"], subscriber["_id"]
    first, second = await started(app, "a"), await started(app, "b")
    for _ in range(5):
        await run(app, service.hold, first, TTL, environment_id, internal_id)
        await asyncio.gather(
            run(app, service.release, first, environment_id, internal_id),
            run(app, service.hold, second, TTL, environment_id, internal_id),
        )
        assert (await subscriber_row(app, internal_id)).is_online is True
        assert await presence_of(app, second) == {internal_id}
        assert await run(app, service.release, second, environment_id, internal_id) is True
        assert (await subscriber_row(app, internal_id)).is_online is False


async def test_the_socket_server_writes_only_a_rooms_first_and_last_socket(
    app: FastAPI, subscriber: dict[str, Any]
) -> None:
    """Realtime's own bookkeeping: two sockets of one subscriber are one presence row, gone with the second."""
    realtime = Realtime(app.state.sessionmaker, "unused", app.state.settings.database_url, heartbeat_seconds=30)
    await realtime.start()
    try:
        room = f"{subscriber['_environmentId']}:{subscriber['_id']}"

        realtime.sockets[room] = 1
        await realtime._record(room)
        realtime.sockets[room] = 2  # a second tab: no write
        assert await presence_of(app, realtime.process_id) == {subscriber["_id"]}
        realtime.sockets[room] = 0
        await realtime._record(room)
        assert await presence_of(app, realtime.process_id) == set()
        assert (await subscriber_row(app, subscriber["_id"])).is_online is False

        realtime.sockets[room] = 1
        await realtime._record(room)
        assert (await subscriber_row(app, subscriber["_id"])).is_online is True
    finally:
        await realtime.close()
    assert await process_row(app, realtime.process_id) is None
    assert (await subscriber_row(app, subscriber["_id"])).is_online is False


async def test_many_rooms_changing_at_once_are_written_together_and_in_order(app: FastAPI, api: httpx.AsyncClient) -> None:
    """Sockets opening or closing together are written in a few transactions, each room ending as its sockets are."""
    from tests.engine.conftest import statements_while

    subscribers = [await create_subscriber(api) for _ in range(30)]
    rooms = [f"{s['_environmentId']}:{s['_id']}" for s in subscribers]
    realtime = Realtime(app.state.sessionmaker, "unused", app.state.settings.database_url, heartbeat_seconds=30)
    await realtime.start()
    try:
        for room in rooms:
            realtime.sockets[room] = 1

        def writes(statement: str) -> bool:
            return "realtime_presence" in statement and statement.lstrip().upper().startswith(("INSERT", "DELETE"))

        opened = await statements_while(app, asyncio.gather(*(realtime._record(room) for room in rooms)), writes)
        assert len(opened) < len(rooms), opened  # one statement for the rooms of a write, not one a room
        assert await presence_of(app, realtime.process_id) == {s["_id"] for s in subscribers}
        assert all([(await subscriber_row(app, s["_id"])).is_online for s in subscribers])

        # Closing, and one subscriber's socket coming back while the writes are queued: it stays online.
        for room in rooms:
            realtime.sockets[room] = 0
        closing = [asyncio.ensure_future(realtime._record(room)) for room in rooms]
        realtime.sockets[rooms[0]] = 1
        back = asyncio.ensure_future(realtime._record(rooms[0]))
        closed = await statements_while(app, asyncio.gather(*closing, back), writes)
        assert len(closed) < len(rooms), closed
        assert await presence_of(app, realtime.process_id) == {subscribers[0]["_id"]}
        states = [await subscriber_row(app, s["_id"]) for s in subscribers]
        assert states[0].is_online is True
        assert all(state.is_online is False and state.last_online_at is not None for state in states[1:])
    finally:
        await realtime.close()


async def test_a_presence_write_cut_short_leaves_no_connect_waiting(
    app: FastAPI, subscriber: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer cancelled mid-write (the process stopping): the connects waiting on it go on; the heartbeat writes later."""
    realtime = Realtime(app.state.sessionmaker, "unused", app.state.settings.database_url, heartbeat_seconds=30)
    stuck = asyncio.Event()

    async def hang(*args: Any, **kwargs: Any) -> None:
        stuck.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(service, "hold_many", hang)
    room = f"{subscriber['_environmentId']}:{subscriber['_id']}"
    realtime.sockets[room] = 1
    first = asyncio.ensure_future(realtime._record(room))
    await asyncio.wait_for(stuck.wait(), 5)
    second_room = f"{subscriber['_environmentId']}:other"
    realtime.sockets[second_room] = 1
    second = asyncio.ensure_future(realtime._record(second_room))  # queued behind the stuck write
    assert realtime._presence_writer is not None
    realtime._presence_writer.cancel()
    await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert room not in realtime._recorded


async def test_a_workers_sweep_takes_dead_processes_when_no_api_process_is_left(
    app: FastAPI, subscriber: dict[str, Any]
) -> None:
    from herald.app import build_worker

    environment_id, internal_id = subscriber["_environmentId"], subscriber["_id"]
    dead = await started(app, "dead")
    await run(app, service.hold, dead, TTL, environment_id, internal_id)
    await expire(app, dead)
    worker = build_worker(app.state.settings, app.state.sessionmaker)
    try:
        assert await worker.sweep_dead_socket_holders() >= 1
    finally:
        assert worker.http is not None
        await worker.http.aclose()
    assert await process_row(app, dead) is None
    assert (await subscriber_row(app, internal_id)).is_online is False


def test_the_heartbeat_is_a_setting_above_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings(data_dir=tmp_path, secret_key="k").realtime_heartbeat_seconds == 10.0
    monkeypatch.setenv("HERALD_REALTIME_HEARTBEAT_SECONDS", "0.5")
    settings = load_settings(data_dir=tmp_path, secret_key="k")
    assert settings.realtime_heartbeat_seconds == 0.5
    assert service.process_ttl(settings.realtime_heartbeat_seconds) == timedelta(seconds=1.5)
    monkeypatch.setenv("HERALD_REALTIME_HEARTBEAT_SECONDS", "0")
    with pytest.raises(SettingsError, match="HERALD_REALTIME_HEARTBEAT_SECONDS"):
        load_settings(data_dir=tmp_path, secret_key="k")


async def test_a_process_swept_while_alive_writes_its_presence_again_at_its_next_heartbeat(
    app: FastAPI, subscriber: dict[str, Any]
) -> None:
    realtime = Realtime(app.state.sessionmaker, "unused", app.state.settings.database_url, heartbeat_seconds=30)
    await realtime.start()
    try:
        room = f"{subscriber['_environmentId']}:{subscriber['_id']}"

        realtime.sockets[room] = 1
        await realtime._record(room)
        # Frozen past its row's life: another process sweeps it.
        await expire(app, realtime.process_id)
        await service.sweep_dead_processes(app.state.sessionmaker)
        assert await process_row(app, realtime.process_id) is None
        assert (await subscriber_row(app, subscriber["_id"])).is_online is False

        await realtime.beat()
        row = await process_row(app, realtime.process_id)
        assert row is not None and row.announced is True and row.expires_at > utcnow()
        assert await presence_of(app, realtime.process_id) == {subscriber["_id"]}
        assert (await subscriber_row(app, subscriber["_id"])).is_online is True
    finally:
        await realtime.close()


async def test_an_idle_server_on_sqlite_skips_its_heartbeat_until_it_holds_a_subscriber_again(
    app: FastAPI, subscriber: dict[str, Any]
) -> None:
    """On SQLite (one server a file) a heartbeat with no socket held writes nothing; on PostgreSQL it still
    beats, for the other processes. The first subscriber held again writes the row back, announced."""
    realtime = Realtime(app.state.sessionmaker, "unused", app.state.settings.database_url, heartbeat_seconds=30)
    await realtime.start()
    try:
        await expire(app, realtime.process_id)
        await realtime.beat()
        row = await process_row(app, realtime.process_id)
        assert row is not None
        if app.state.settings.database_url.startswith("sqlite"):
            assert row.expires_at < utcnow()  # not beaten: nothing was written

            # The worker's sweep takes the expired row meanwhile; the next connect writes it back, announced.
            await service.sweep_dead_processes(app.state.sessionmaker)
            assert await process_row(app, realtime.process_id) is None
            room = f"{subscriber['_environmentId']}:{subscriber['_id']}"
            realtime.sockets[room] = 1
            await realtime._record(room)
            row = await process_row(app, realtime.process_id)
            assert row is not None and row.announced is True and row.expires_at > utcnow()
            assert await presence_of(app, realtime.process_id) == {subscriber["_id"]}
            # Holding a subscriber, it beats again.
            await expire(app, realtime.process_id)
            await realtime.beat()
            assert (await process_row(app, realtime.process_id)).expires_at > utcnow()  # type: ignore[union-attr]
        else:
            assert row.expires_at > utcnow()
    finally:
        await realtime.close()
