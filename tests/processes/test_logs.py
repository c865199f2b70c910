"""What ``herald serve`` writes to its log carries no credential."""

from __future__ import annotations

import asyncio

import websockets

from tests.fixtures.processes import HeraldProcesses
from tests.processes.conftest import ProcessStore

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWJzY3JpYmVySWQiOiJsb2dzIn0.c2lnbmF0dXJlLW5vdC1pbi10aGUtbG9n"


async def test_the_inbox_sockets_session_token_is_masked_in_the_servers_log(store: ProcessStore, herald: HeraldProcesses) -> None:
    """@novu/js sends the session token in the socket's query; the server logs each websocket's path and query."""
    api = await herald.serve()
    url = api.url.replace("http://", "ws://") + f"/socket.io/?EIO=4&transport=websocket&token={TOKEN}"
    async with websockets.connect(url) as socket:
        assert str(await socket.recv()).startswith("0")  # engine.io's open packet: the websocket was accepted
    for _ in range(50):
        if "WebSocket /socket.io/" in api.log():
            break
        await asyncio.sleep(0.1)
    log = api.log()
    assert "transport=websocket&token=***" in log  # the line is written, with the value masked
    assert TOKEN not in log and TOKEN.split(".")[2] not in log
