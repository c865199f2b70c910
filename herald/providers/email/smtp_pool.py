"""Connections to SMTP servers kept open between sends, per integration.

Opening an SMTP connection costs several round trips before the first
message (greeting, EHLO, often STARTTLS and AUTH), and a server that receives
a connection per message spends most of its time on them: one connection per
message held a worker to a few hundred emails a second against a local sink.
So each worker process keeps a few authenticated connections per integration
and sends the next message on one that is free, as Nodemailer's pooled
transport does (at most 5 connections, 100 messages each).

- A pool is keyed by the integration's id and a hash of its credentials: a
  change of host, port, user, password or TLS options never reuses a
  connection made with the old ones (and closes them).
- Each connection carries one send at a time; at most ``size`` per
  integration are open in a process, so a burst waits for a free one rather
  than opening dozens.
- A connection is dropped on any error, once it has carried ``max_sends``
  messages, or when it sat idle ``idle_seconds`` (checked whenever the pool is
  used; a server usually closes idle connections after a minute or more).
- New connections are opened by the caller's ``opener``, which connects
  through the outbound policy (kit/outbound.py) as a single send does.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiosmtplib

DEFAULT_SIZE = 5
DEFAULT_MAX_SENDS = 100
DEFAULT_IDLE_SECONDS = 30.0
# Idle connections are looked over at most this often (on a send, never by a timer of their own).
SWEEP_SECONDS = 1.0


def pool_key(integration_id: str | None, credentials: Mapping[str, Any]) -> tuple[str, str]:
    """The integration's id and a digest of its credentials (the digest only: the key holds no secret)."""
    text = json.dumps(credentials, sort_keys=True, default=str, separators=(",", ":"))
    return integration_id or "", hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Connection:
    """One open SMTP connection and how it has been used."""

    client: aiosmtplib.SMTP
    sends: int = 0
    idle_since: float = field(default_factory=time.monotonic)
    # True once it carried a send before this one: a failure may then be a server
    # that closed it while idle, and the send may go again on a fresh connection.
    reused: bool = False

    @property
    def connected(self) -> bool:
        return self.client.is_connected


@dataclass
class _Slot:
    """The connections of one key: the idle ones, and a bound on those open."""

    limit: asyncio.Semaphore
    idle: list[Connection] = field(default_factory=list)
    in_use: int = 0
    # Replaced by the integration's new credentials: its connections close when their send ends.
    retired: bool = False


class SmtpPool:
    """Open SMTP connections of one process, by integration (see the module's docstring)."""

    def __init__(
        self,
        size: int = DEFAULT_SIZE,
        max_sends: int = DEFAULT_MAX_SENDS,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
    ) -> None:
        self.size = size
        self.max_sends = max_sends
        self.idle_seconds = idle_seconds
        self._slots: dict[tuple[str, str], _Slot] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._swept = 0.0
        # Connections opened so far (for the benchmark and the tests).
        self.opened = 0

    @contextlib.asynccontextmanager
    async def connection(
        self, key: tuple[str, str], opener: Callable[[], Awaitable[aiosmtplib.SMTP]]
    ) -> AsyncIterator[Connection]:
        """A connection of ``key`` for one send, opened by ``opener`` when none is free.

        It goes back to the pool when the block ends normally, and is closed
        when the block raises.
        """
        slot = self._slot(key)
        async with slot.limit:
            slot.in_use += 1
            try:
                connection = await self._checkout(slot, opener)
                try:
                    yield connection
                except BaseException:
                    _close(connection)
                    raise
                connection.sends += 1
                if connection.connected and connection.sends < self.max_sends and not slot.retired:
                    connection.idle_since = time.monotonic()
                    slot.idle.append(connection)
                else:
                    await _quit(connection)
            finally:
                slot.in_use -= 1

    async def _checkout(self, slot: _Slot, opener: Callable[[], Awaitable[aiosmtplib.SMTP]]) -> Connection:
        connection = self._take_idle(slot)
        if connection is None:
            connection = Connection(await opener())
            self.opened += 1
        else:
            connection.reused = True
        return connection

    async def aclose(self) -> None:
        """Close every idle connection (the process is stopping)."""
        slots, self._slots = self._slots, {}
        for slot in slots.values():
            for connection in slot.idle:
                await _quit(connection)

    def idle_count(self, key: tuple[str, str] | None = None) -> int:
        slots = self._slots.values() if key is None else [self._slots[key]] if key in self._slots else []
        return sum(len(slot.idle) for slot in slots)

    def _slot(self, key: tuple[str, str]) -> _Slot:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # Connections belong to the loop that opened them; a new loop starts afresh.
            for slot in self._slots.values():
                for connection in slot.idle:
                    _close(connection)
            self._slots = {}
            self._loop = loop
        now = time.monotonic()
        if now - self._swept >= SWEEP_SECONDS:
            self._sweep(now)
        slot = self._slots.get(key)
        if slot is None:
            if key[0]:
                # The integration's credentials changed: what was opened with the old ones goes.
                for old_key in [other for other in self._slots if other[0] == key[0]]:
                    old = self._slots.pop(old_key)
                    old.retired = True
                    for connection in old.idle:
                        _close(connection)
                    old.idle = []
            slot = self._slots[key] = _Slot(asyncio.Semaphore(self.size))
        return slot

    def _sweep(self, now: float) -> None:
        """Close the connections idle too long or closed by the server; forget keys with nothing open."""
        self._swept = now
        for key, slot in list(self._slots.items()):
            kept = []
            for connection in slot.idle:
                if connection.connected and now - connection.idle_since <= self.idle_seconds:
                    kept.append(connection)
                else:
                    _close(connection)
            slot.idle = kept
            if not kept and slot.in_use == 0:
                del self._slots[key]

    def _take_idle(self, slot: _Slot) -> Connection | None:
        while slot.idle:
            # The most recently used first: the others may then go idle and be closed.
            connection = slot.idle.pop()
            if connection.connected:
                return connection
            _close(connection)
        return None


def _close(connection: Connection) -> None:
    with contextlib.suppress(Exception):
        connection.client.close()


async def _quit(connection: Connection) -> None:
    """QUIT politely, briefly; close whatever happens."""
    try:
        if connection.connected:
            async with asyncio.timeout(2.0):
                await connection.client.quit()
    except Exception:
        pass
    finally:
        _close(connection)
