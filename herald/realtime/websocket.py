"""uvicorn's wsproto websocket for the Inbox's sockets, with a receive queue and a writable flag that hold less.

uvicorn 0.54.0's ``WSProtocol`` gives every connection an ``asyncio.Queue``
for the ASGI receive events and an ``asyncio.Event`` for its write flow
control. Each ``collections.deque`` inside them (the queue's items, getters
and putters, its ``Event``'s waiters, the flag's waiters) allocates a block
of 64 slots up front: 760 bytes each, 3.8 KB an idle socket of the 20 it holds
(tracemalloc, 1,000 idle sockets of Herald, 2026-11-25). :class:`ReceiveQueue`
and :class:`Flag` do what uvicorn asks of them (``put_nowait``, ``get``,
``empty``; ``set``, ``clear``, ``wait``) with a list each, empty until
something waits; everything else is uvicorn's own. An idle socket went from
22.7 to about 19 KB of the API process (``python -m bench.realtime``, 2,000
sockets).

Pinned to the uvicorn in requirements.lock (``PINNED``): with another version
installed :func:`protocol` logs a warning and answers uvicorn's own
``"wsproto"``, which works the same with more memory, until this is checked
against it.
"""

from __future__ import annotations

import asyncio
import logging
from importlib.metadata import version
from typing import Any

logger = logging.getLogger("herald.realtime")

PINNED = "0.54.0"


class ReceiveQueue:
    """``asyncio.Queue``'s ``put_nowait``, ``get`` and ``empty``, unbounded, as uvicorn's protocol uses them."""

    __slots__ = ("_items", "_waiters")

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._waiters: list[asyncio.Future[None]] | None = None

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    async def get(self) -> Any:
        while not self._items:
            waiter = asyncio.get_running_loop().create_future()
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if self._waiters is not None and waiter in self._waiters:
                    self._waiters.remove(waiter)
        return self._items.pop(0)

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)


class Flag:
    """``asyncio.Event``'s ``set``, ``clear``, ``is_set`` and ``wait``."""

    __slots__ = ("_value", "_waiters")

    def __init__(self) -> None:
        self._value = False
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        self._value = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> bool:
        if self._value:
            return True
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)
        return True


def _lean_protocol() -> type[asyncio.Protocol]:
    from uvicorn.protocols.websockets.wsproto_impl import WSProtocol

    class LeanWSProtocol(WSProtocol):
        """uvicorn 0.54.0's ``WSProtocol`` with :class:`ReceiveQueue` and :class:`Flag`."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.queue = ReceiveQueue()  # type: ignore[assignment]
            self.writable = Flag()  # type: ignore[assignment]
            self.writable.set()

    return LeanWSProtocol


def protocol() -> type[asyncio.Protocol] | str:
    """What ``herald serve`` gives uvicorn as ``ws``: the lean protocol if uvicorn is the pinned version, else ``"wsproto"``."""
    installed = version("uvicorn")
    if installed != PINNED:
        logger.warning(
            "herald.realtime.websocket was written for uvicorn %s but %s is installed: serving the Inbox socket "
            "with uvicorn's own wsproto protocol (more memory a socket) until it is checked",
            PINNED,
            installed,
        )
        return "wsproto"
    return _lean_protocol()
