"""uvicorn's wsproto websocket for the Inbox's sockets, holding less while a socket is open.

uvicorn 0.54.0's ``WSProtocol`` gives every connection an ``asyncio.Queue``
for the ASGI receive events and an ``asyncio.Event`` for its write flow
control. Each ``collections.deque`` inside them (the queue's items, getters
and putters, its ``Event``'s waiters, the flag's waiters) allocates a block
of 64 slots up front: 760 bytes each, 3.8 KB an idle socket of the 20 it holds
(tracemalloc, 1,000 idle sockets of Herald, 2026-11-25). :class:`ReceiveQueue`
and :class:`Flag` do what uvicorn asks of them (``put_nowait``, ``get``,
``empty``; ``set``, ``clear``, ``wait``) with a list each, empty until
something waits. And once the connection is accepted, wsproto's handshake
state (its h11 connection, the request with its headers, an event deque:
about 2.5 KB, none of it read again; the scope keeps the headers) is let go.
Everything else is uvicorn's own.

Pinned to the uvicorn and wsproto in requirements.lock (``PINNED``): with
other versions installed :func:`protocol` logs a warning and answers
uvicorn's own ``"wsproto"``, which works the same with more memory, until
this is checked against them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from herald.kit.pinned import is_pinned

PINNED = {"uvicorn": "0.54.0", "wsproto": "1.3.2"}


class _Waiters:
    """The futures of the tasks waiting on a :class:`ReceiveQueue` or a :class:`Flag`: a list made by the first."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] | None = None

    def _wake_all(self) -> None:
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_for_wake(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)


class ReceiveQueue(_Waiters):
    """``asyncio.Queue``'s ``put_nowait``, ``get`` and ``empty``, unbounded, as uvicorn's protocol uses them."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        super().__init__()
        self._items: list[Any] = []

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        self._wake_all()

    async def get(self) -> Any:
        while not self._items:
            await self._wait_for_wake()
        return self._items.pop(0)

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)


class Flag(_Waiters):
    """``asyncio.Event``'s ``set``, ``clear``, ``is_set`` and ``wait``."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        super().__init__()
        self._value = False

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        self._value = True
        self._wake_all()

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> bool:
        if not self._value:
            await self._wait_for_wake()
        return True


class OpenedHandshake:
    """A ``wsproto.WSConnection``'s handshake once its connection is open (wsproto 1.3.2).

    ``WSConnection`` reads its handshake again only in ``events()``, which
    yields the handshake's events first: none are left once it has accepted.
    """

    __slots__ = ()

    def events(self) -> Iterator[Any]:
        return iter(())


OPENED = OpenedHandshake()


def _lean_protocol() -> type[asyncio.Protocol]:
    from uvicorn.protocols.websockets.wsproto_impl import WSProtocol

    class LeanWSProtocol(WSProtocol):
        """uvicorn 0.54.0's ``WSProtocol`` with :class:`ReceiveQueue` and :class:`Flag`, its handshake let go once open."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.queue = ReceiveQueue()  # type: ignore[assignment]
            self.writable = Flag()  # type: ignore[assignment]
            self.writable.set()

        async def send(self, message: Any) -> None:
            await super().send(message)
            if message["type"] == "websocket.accept" and self.conn.connection is not None:
                self.conn.handshake = OPENED  # type: ignore[assignment]

    return LeanWSProtocol


def protocol() -> type[asyncio.Protocol] | str:
    """What ``herald serve`` gives uvicorn as ``ws``: the lean protocol if uvicorn is the pinned version, else ``"wsproto"``."""
    if not is_pinned(
        PINNED,
        "herald.realtime.websocket",
        "serving the Inbox socket with uvicorn's own wsproto protocol (more memory a socket)",
    ):
        return "wsproto"
    return _lean_protocol()
