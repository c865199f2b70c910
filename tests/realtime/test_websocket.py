"""herald.realtime.websocket: uvicorn's wsproto websocket with a lighter receive queue and writable flag.

The sockets themselves run over it in every socket test (tests/realtime,
tests/browser); here the two small classes against what uvicorn asks of
``asyncio.Queue`` and ``asyncio.Event``.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version

import pytest

from herald.kit import pinned
from herald.realtime import websocket
from herald.realtime.server import uvicorn_websocket_options


def test_serve_takes_the_lean_wsproto_protocol_with_the_pinned_uvicorn() -> None:
    """A new uvicorn or wsproto in the lock needs herald.realtime.websocket checked against it (then PINNED updated)."""
    from uvicorn.protocols.websockets.wsproto_impl import WSProtocol

    assert {name: version(name) for name in websocket.PINNED} == websocket.PINNED
    options = uvicorn_websocket_options()
    assert isinstance(options["ws"], type) and issubclass(options["ws"], WSProtocol)
    assert options["ws_per_message_deflate"] is False and options["ws_ping_interval"] is None


def test_another_uvicorn_gets_its_own_wsproto_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pinned, "version", lambda name: "0.99.0")
    assert websocket.protocol() == "wsproto"


async def test_the_queue_hands_items_over_in_order_to_a_waiting_reader() -> None:
    queue = websocket.ReceiveQueue()
    assert queue.empty()
    reader = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not reader.done()
    queue.put_nowait({"type": "websocket.connect"})
    queue.put_nowait({"type": "websocket.receive", "text": "40"})
    assert await reader == {"type": "websocket.connect"}
    assert queue.qsize() == 1 and not queue.empty()
    assert await queue.get() == {"type": "websocket.receive", "text": "40"}
    assert queue.empty()


async def test_a_cancelled_get_leaves_no_waiter_and_loses_no_item() -> None:
    queue = websocket.ReceiveQueue()
    reader = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    queue.put_nowait("kept")
    assert await asyncio.wait_for(queue.get(), 1) == "kept"


async def test_the_flag_holds_writers_while_cleared() -> None:
    flag = websocket.Flag()
    flag.set()
    assert flag.is_set() and await flag.wait()
    flag.clear()  # uvicorn's pause_writing
    writers = [asyncio.create_task(flag.wait()) for _ in range(3)]
    await asyncio.sleep(0.01)
    assert not any(writer.done() for writer in writers)
    flag.set()  # resume_writing
    assert await asyncio.wait_for(asyncio.gather(*writers), 1) == [True, True, True]
