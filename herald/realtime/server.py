"""The Inbox's socket: the socket.io server @novu/js connects to when ``socketUrl`` points at Herald.

Served by the API's own ASGI app at ``/socket.io/`` (herald.app routes that
path here before anything else), websocket transport only: no long-polling,
so a balancer in front of several API processes needs no sticky sessions.
The client sends its session token in the query (``?token=``, or in the
socket.io ``auth`` object); a token that does not verify (bad signature,
expired, another audience) is refused at connect.

Each socket joins a room of its subscriber, named by environment and
subscriber id; changes reach it through herald.realtime.signals. This process
counts the sockets it holds per room, so a change of a subscriber with no
socket here costs one dict look-up and no statement.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from contextlib import suppress
from typing import Any
from urllib.parse import parse_qs

import socketio
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.types import Receive, Scope, Send

from herald.kit.auth import SubscriberPrincipal, verify_subscriber_token
from herald.kit.db import listen_until, session_scope
from herald.kit.errors import UnauthorizedError
from herald.realtime import service
from herald.realtime.signals import CHANNEL, RECEIVED, Change

logger = logging.getLogger("herald.realtime")

PATH = "/socket.io/"


def room_of(environment_id: str, subscriber_id: str) -> str:
    return f"{environment_id}:{subscriber_id}"


class Realtime:
    """This process's sockets: who holds which, and what each is sent."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], secret_key: str, database_url: str) -> None:
        self.sessionmaker = sessionmaker
        self.secret_key = secret_key
        self.database_url = database_url
        self.server = socketio.AsyncServer(
            async_mode="asgi",
            transports=["websocket"],
            # The token, not the origin, says who may connect (as the inbox routes' CORS).
            cors_allowed_origins="*",
            logger=False,
            engineio_logger=False,
        )
        self.server.on("connect", self._connect)
        self.server.on("disconnect", self._disconnect)
        # Sockets held here, per room; and each socket's principal.
        self.sockets: dict[str, int] = {}
        self._principals: dict[str, SubscriberPrincipal] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.server.handle_request(scope, receive, send)

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
        self._principals[sid] = principal
        self.sockets[room] = self.sockets.get(room, 0) + 1
        await self.server.enter_room(sid, room)
        await self._mark(principal, online=True)

    async def _disconnect(self, sid: str, *_reason: Any) -> None:
        principal = self._principals.pop(sid, None)
        if principal is None:
            return
        room = room_of(principal.environment_id, principal.subscriber_id)
        left = self.sockets.get(room, 0) - 1
        if left > 0:
            self.sockets[room] = left
            return
        self.sockets.pop(room, None)
        await self._mark(principal, online=False)

    async def _mark(self, principal: SubscriberPrincipal, *, online: bool) -> None:
        try:
            async for session in session_scope(self.sessionmaker):
                await service.set_online(session, principal, online)
        except Exception:
            logger.warning("could not record subscriber %s %s", principal.subscriber_id, "online" if online else "offline", exc_info=True)

    # -- changes --------------------------------------------------------------------------------

    def deliver(self, changes: Sequence[Change]) -> None:
        """Send what ``changes`` mean to the sockets held here (from a commit hook or a NOTIFY: never blocks)."""
        for change in changes:
            if not self.sockets.get(room_of(change.environment_id, change.subscriber_id)):
                continue
            task = asyncio.get_running_loop().create_task(self._send(change))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, change: Change) -> None:
        room = room_of(change.environment_id, change.subscriber_id)
        message_id = change.message_id if change.kind == RECEIVED else None
        try:
            async with self.sessionmaker() as session:
                received, unseen, unread = await service.payloads(session, change.environment_id, change.subscriber_id, message_id)
                await session.rollback()
        except Exception:
            logger.warning("could not read what to send subscriber %s", change.subscriber_id, exc_info=True)
            return
        if received is not None:
            await self.server.emit("notification_received", received, room=room)
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
        for sid in list(self._principals):
            with suppress(Exception):
                await self.server.disconnect(sid)
        for task in list(self._tasks):
            task.cancel()
