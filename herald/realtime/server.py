"""The Inbox's socket: the socket.io server @novu/js connects to when ``socketUrl`` points at Herald.

Served by the API's own ASGI app at ``/socket.io/`` (herald.app routes that
path here before anything else), websocket transport only: no long-polling,
so a balancer in front of several API processes needs no sticky sessions.
The client sends its session token in the query (``?token=``, or in the
socket.io ``auth`` object); a token that does not verify (bad signature,
expired, another audience) is refused at connect. python-socketio speaks the
protocol, over herald.realtime.eio's engine.io socket and
herald.realtime.websocket's uvicorn protocol, which hold about 16 KB an idle
socket where the libraries' own held 46 (docs/performance.md).

Each socket joins a room of its subscriber, named by environment and
subscriber id; changes reach it through herald.realtime.signals. This process
counts the sockets it holds per room, so a change of a subscriber with no
socket here costs one dict look-up and no statement.

Online state spans processes (herald.realtime.service): when a room's count
here goes 0 -> 1 or 1 -> 0 this process writes its presence in the store, one
short transaction; a heartbeat keeps its row alive and sweeps the processes
that died without closing. Nothing of it runs per change or per event.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Sequence
from contextlib import suppress
from typing import Any
from urllib.parse import parse_qs

import socketio
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.types import Receive, Scope, Send

from herald.kit.auth import verify_subscriber_token
from herald.kit.db import listen_until, session_scope
from herald.kit.errors import UnauthorizedError
from herald.kit.ids import short_id
from herald.kit.metrics import sockets_connected
from herald.realtime import service, websocket
from herald.realtime.eio import create_server
from herald.realtime.signals import CHANNEL, RECEIVED, Change

logger = logging.getLogger("herald.realtime")

PATH = "/socket.io/"
# A socket that has not joined the namespace (sent a token that verifies) this long after it opened is closed.
NAMESPACE_SECONDS = 10.0


def uvicorn_websocket_options() -> dict[str, Any]:
    """How uvicorn serves these sockets (``herald serve``, and the tests' server).

    uvicorn's wsproto websocket (herald.realtime.websocket), whose connection
    holds about 2.5 KB less than websockets' sans-I/O one (20.4 against 22.9 KB
    an idle socket, 2,000 sockets, 2026-11-25); no permessage-deflate (the
    events are small JSON, and a deflate context held about 40 KB a socket: a
    browser that offers it is answered without it); no websocket pings of
    uvicorn's own (engine.io pings every 25 s).
    """
    return {"ws": websocket.protocol(), "ws_per_message_deflate": False, "ws_ping_interval": None}


def room_of(environment_id: str, subscriber_id: str) -> str:
    return f"{environment_id}:{subscriber_id}"


def _release(waiting: dict[str, list[asyncio.Future[None]]]) -> None:
    for futures in waiting.values():
        for future in futures:
            if not future.done():
                future.set_result(None)


def reads_at_once(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    """How many reads of what to send run at a time: half the engine's pool (at least one), so the process's
    requests keep connections of their own while a burst of changes is sent."""
    size = getattr(getattr(sessionmaker.kw.get("bind"), "pool", None), "size", None)
    return max(1, size() // 2) if callable(size) else 1


def subscriber_of(room: str) -> tuple[str, str]:
    """The room's environment and subscriber (internal) ids: ObjectIds, which hold no colon."""
    environment_id, _, subscriber_id = room.partition(":")
    return environment_id, subscriber_id


class Realtime:
    """This process's sockets: who holds which, and what each is sent."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        secret_key: str,
        database_url: str,
        heartbeat_seconds: float = 10.0,
        cors_origins: Sequence[str] = ("*",),
        namespace_seconds: float = NAMESPACE_SECONDS,
        read_limit: int | None = None,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.secret_key = secret_key
        self.database_url = database_url
        # This process in realtime_processes and realtime_presence.
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{short_id(6)}"
        self.heartbeat_seconds = heartbeat_seconds
        self.ttl = service.process_ttl(heartbeat_seconds)
        self.namespace_seconds = namespace_seconds
        self.server = create_server(
            async_mode="asgi",
            transports=["websocket"],
            # The origins HERALD_CORS_ORIGINS names, as the inbox routes: a browser page of another
            # origin is refused at the handshake. The token says who connects, never a cookie.
            cors_allowed_origins="*" if "*" in cors_origins else list(cors_origins),
            cors_credentials=False,
            logger=False,
            engineio_logger=False,
        )
        # What herald.app calls for /socket.io/: engine.io's entry point (socket.io's only passes the
        # call on to it, one coroutine frame more that every open socket would hold).
        self.handle_request = self.server.eio.handle_request
        self.server.on("connect", self._connect)
        self.server.on("disconnect", self._disconnect)
        # engine.io's connect, which socket.io handles first: a socket that joins no namespace is closed.
        self.server.eio.on("connect", self._engine_connect)
        # Sockets held here, per room; and each socket's room (the room names the subscriber: no
        # principal is kept a socket).
        self.sockets: dict[str, int] = {}
        self._rooms: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Changes waiting for their room's sender (deliver); the reads they make, at most this many at a time.
        self._pending: dict[str, list[Change]] = {}
        self._reads = asyncio.Semaphore(read_limit or reads_at_once(sessionmaker))
        # Rooms this process has written as held in the store; rooms whose sockets changed since, waiting
        # for the presence writer (one write at a time, so a room's writes go in the order they happened).
        self._recorded: set[str] = set()
        self._changed: dict[str, list[asyncio.Future[None]]] = {}
        self._presence_writer: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        # On SQLite this process is the only one serving the file (one ``herald serve`` a file), so while it
        # holds no socket its heartbeat has nobody to tell that it is alive and nothing of its own to keep: it
        # skips the write (an idle server's largest wake-up, docs/performance.md#idle) and is "dormant"; the
        # first subscriber it holds again writes its row back, announced, in the same transaction.
        self._beats_only_while_holding = database_url.startswith("sqlite")
        self._dormant = False
        self._stop_heartbeat = asyncio.Event()
        self._failing = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handle_request(scope, receive, send)

    # -- sockets --------------------------------------------------------------------------------

    async def _connect(self, sid: str, environ: dict[str, Any], auth: Any = None) -> None:
        token = auth.get("token") if isinstance(auth, dict) else None
        if not isinstance(token, str) or not token:
            token = (parse_qs(environ.get("QUERY_STRING", "")).get("token") or [""])[0]
        try:
            principal = verify_subscriber_token(token, self.secret_key)
        except UnauthorizedError as exc:
            raise socketio.exceptions.ConnectionRefusedError(exc.message) from None
        room = room_of(principal.environment_id, principal.subscriber_id)
        self._rooms[sid] = room
        sockets_connected.inc()
        self.sockets[room] = self.sockets.get(room, 0) + 1
        await self.server.enter_room(sid, room)
        await self._record(room)

    async def _engine_connect(self, eio_sid: str, environ: Any) -> None:
        await self.server._handle_eio_connect(eio_sid, environ)
        asyncio.get_running_loop().call_later(self.namespace_seconds, self._close_without_namespace, eio_sid)

    def _close_without_namespace(self, eio_sid: str) -> None:
        """Close an engine.io socket that has not joined the namespace (no token, a refused one, or silence).

        socket.io keeps such a socket open, pinged, for as long as its client
        answers the pings: it would hold a connection and its memory for nothing.
        """
        if eio_sid not in self.server.eio.sockets or self.server.manager.sid_from_eio_sid(eio_sid, "/") is not None:
            return
        task = asyncio.get_running_loop().create_task(self.server.eio.disconnect(eio_sid))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _disconnect(self, sid: str, *_reason: Any) -> None:
        room = self._rooms.pop(sid, None)
        if room is None:
            return
        sockets_connected.dec()
        left = self.sockets.get(room, 0) - 1
        if left > 0:
            self.sockets[room] = left
            return
        self.sockets.pop(room, None)
        await self._record(room)

    async def _record(self, room: str) -> None:
        """Write whether this process holds the room's subscriber, if that differs from what the store has.

        Only a room's 0 -> 1 and 1 -> 0 get here. The rooms that changed while
        a write was under way are written together by the next one, one
        transaction for all of them: written one by one, 4,000 sockets closing
        at once (a balancer draining, clients on a flaky network) took the API
        process 12 s of work, 3 ms a subscriber, while its requests waited
        (``python -m bench.realtime``). Each write reads the rooms' counts when
        it starts, and one write runs at a time, so the store ends as the
        sockets are whatever the order of connects and disconnects. The caller
        waits for the write that includes its room; one that fails is logged
        and written again by the heartbeat (``_record_differences``).
        """
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._changed.setdefault(room, []).append(written)
        if self._presence_writer is None or self._presence_writer.done():
            self._presence_writer = asyncio.create_task(self._write_presence())
        await written

    async def _write_presence(self) -> None:
        rooms: dict[str, list[asyncio.Future[None]]] = {}
        try:
            while self._changed:
                await asyncio.sleep(0)  # the rooms changing in this turn of the loop join the write
                rooms, self._changed = self._changed, {}
                await self._write_rooms(rooms)
                _release(rooms)
        finally:
            # Cancelled (the process stopping): no caller waits for ever; the heartbeat writes what is left.
            _release(rooms)
            if self._presence_writer is asyncio.current_task():
                _release(self._changed)

    async def _write_rooms(self, rooms: dict[str, list[asyncio.Future[None]]]) -> None:
        held: dict[str, list[str]] = {}
        released: dict[str, list[str]] = {}
        for room in rooms:
            holds = self.sockets.get(room, 0) > 0
            if holds != (room in self._recorded):
                environment_id, subscriber_id = subscriber_of(room)
                (held if holds else released).setdefault(environment_id, []).append(subscriber_id)
        try:
            if held or released:
                async for session in session_scope(self.sessionmaker):
                    if held and self._dormant:
                        # Its row may have expired (or been swept) while it skipped its heartbeats.
                        await service.register_process(session, self.process_id, self.ttl)
                    for environment_id, subscriber_ids in sorted(held.items()):
                        await service.hold_many(session, self.process_id, self.ttl, environment_id, subscriber_ids)
                    for environment_id, subscriber_ids in sorted(released.items()):
                        await service.release_many(session, self.process_id, environment_id, subscriber_ids)
        except Exception:
            logger.warning(
                "could not record %d subscribers online and %d offline",
                sum(map(len, held.values())),
                sum(map(len, released.values())),
                exc_info=True,
            )
        else:
            if held:
                self._dormant = False
            for environment_id, subscriber_ids in held.items():
                self._recorded.update(room_of(environment_id, subscriber_id) for subscriber_id in subscriber_ids)
            for environment_id, subscriber_ids in released.items():
                self._recorded.difference_update(room_of(environment_id, subscriber_id) for subscriber_id in subscriber_ids)

    # -- presence across processes --------------------------------------------------------------

    async def start(self) -> None:
        """Write this process's row and start its heartbeat (the lifespan's start)."""
        try:
            async for session in session_scope(self.sessionmaker):
                await service.register_process(session, self.process_id, self.ttl)
        except Exception:
            logger.warning("could not register realtime process %s", self.process_id, exc_info=True)
        self._stop_heartbeat.clear()
        self._heartbeat = asyncio.create_task(self._keep_alive())

    async def _keep_alive(self) -> None:
        """Every heartbeat: refresh this process's row, then sweep the processes that stopped beating."""
        while not self._stop_heartbeat.is_set():
            with suppress(TimeoutError):
                await asyncio.wait_for(self._stop_heartbeat.wait(), self.heartbeat_seconds)
            if self._stop_heartbeat.is_set():
                return
            await self.beat()

    async def beat(self) -> None:
        if self._beats_only_while_holding and not self._recorded and not any(self.sockets.values()):
            self._dormant = True
            return
        try:
            async for session in session_scope(self.sessionmaker):
                alive = await service.heartbeat(session, self.process_id, self.ttl)
            if not alive:
                logger.warning("realtime process %s was swept while alive; writing its presence again", self.process_id)
                async for session in session_scope(self.sessionmaker):
                    await service.register_process(session, self.process_id, self.ttl)
                self._recorded.clear()
            await self._record_differences()
            await service.sweep_dead_processes(self.sessionmaker)
        except Exception:
            # Once with its traceback, then a line a heartbeat until it works again (a store down, not migrated).
            logger.warning("realtime heartbeat of %s failed", self.process_id, exc_info=not self._failing)
            self._failing = True
        else:
            self._failing = False

    async def _record_differences(self) -> None:
        """Write the rooms whose presence in the store differs from the sockets held here: after a sweep took
        this process while it was alive, or a connect's or disconnect's write that failed."""
        held = {room for room, count in self.sockets.items() if count > 0}
        await asyncio.gather(*(self._record(room) for room in held.symmetric_difference(self._recorded)))

    # -- changes --------------------------------------------------------------------------------

    def deliver(self, changes: Sequence[Change]) -> None:
        """Send what ``changes`` mean to the sockets held here (from a commit hook or a NOTIFY: never blocks).

        One sender a room: a change of a room whose sender is already at work
        joins what it sends next, so a burst of a subscriber's changes is one
        read of the counts, not one each (every new message still gets its own
        ``notification_received``).
        """
        for change in changes:
            room = room_of(change.environment_id, change.subscriber_id)
            if not self.sockets.get(room):
                continue
            pending = self._pending.get(room)
            if pending is not None:
                pending.append(change)
                continue
            self._pending[room] = [change]
            task = asyncio.get_running_loop().create_task(self._send(room))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, room: str) -> None:
        """Send the room's pending changes until none are left (the room stays in ``_pending`` until then)."""
        try:
            while changes := self._pending.get(room):
                self._pending[room] = []
                await self._send_changes(room, changes)
        finally:
            self._pending.pop(room, None)

    async def _send_changes(self, room: str, changes: Sequence[Change]) -> None:
        environment_id, subscriber_id = subscriber_of(room)
        message_ids = list(dict.fromkeys(c.message_id for c in changes if c.kind == RECEIVED and c.message_id))
        while True:
            if not self.sockets.get(room):
                return  # its sockets closed while it waited: nobody here to tell
            try:
                # At most ``read_limit`` reads at a time: a burst of thousands of rooms (a worker taking up a
                # backlog) waits here, without a timeout, instead of past the pool's and losing its events.
                async with self._reads, self.sessionmaker() as session:
                    received, unseen, unread = await service.payloads(session, environment_id, subscriber_id, message_ids)
                    await session.rollback()
            except PoolTimeoutError:
                # The pool stayed busy past its timeout (the process's requests hold it): wait again.
                logger.info("the pool was busy reading what to send subscriber %s; waiting again", subscriber_id)
                continue
            except Exception:
                logger.warning("could not read what to send subscriber %s", subscriber_id, exc_info=True)
                return
            break
        for body in received:
            await self.server.emit("notification_received", body, room=room)
        await self.server.emit("unseen_count_changed", unseen, room=room)
        await self.server.emit("unread_count_changed", unread, room=room)

    def heard(self, payload: str) -> None:
        change = Change.decode(payload)
        if change is not None:
            self.deliver([change])

    async def listen(self, stop: asyncio.Event) -> None:
        """LISTEN for changes on a connection of its own (PostgreSQL); reconnect when it drops."""
        await listen_until(self.database_url, CHANNEL, self.heard, stop, what="realtime")

    async def close(self) -> None:
        """Close this process's sockets and remove its presence (a clean shutdown leaves nobody online here)."""
        self._stop_heartbeat.set()
        if self._heartbeat is not None:
            with suppress(Exception):
                await self._heartbeat
            self._heartbeat = None
        for sid in list(self._rooms):
            with suppress(Exception):
                await self.server.disconnect(sid)
        for task in list(self._tasks):
            task.cancel()
        try:
            async for session in session_scope(self.sessionmaker):
                await service.sweep_process(session, self.process_id, expired_before=None)
        except Exception:
            logger.warning("could not remove the presence of realtime process %s", self.process_id, exc_info=True)
        self._recorded.clear()
