"""What the Inbox's socket refuses: origins HERALD_CORS_ORIGINS does not name, sockets that never join its namespace."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
import websockets
from fastapi import FastAPI

from tests.fixtures.server import running_server

# A bound on each wait: a server that keeps the socket open fails the test instead of hanging it.
WAIT = 10.0


def socket_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + "/socket.io/?EIO=4&transport=websocket"


async def closed_by_the_server(connection: websockets.ClientConnection) -> list[str | bytes]:
    """Everything the server sends until it closes the socket."""
    received: list[str | bytes] = []
    async with asyncio.timeout(WAIT):
        try:
            while True:
                received.append(await connection.recv())
        except websockets.ConnectionClosed:
            return received


async def test_an_origin_the_cors_origins_do_not_name_is_refused(app: FastAPI) -> None:
    settings = replace(app.state.settings, cors_origins=("https://app.example",))
    with running_server(settings) as served:
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(socket_url(served), origin="https://elsewhere.example", ping_interval=None)
        assert refused.value.response.status_code == 403  # a websocket closed before it is accepted
        # The named origin opens its socket (engine.io's OPEN packet), and it is not reflected with credentials.
        async with websockets.connect(socket_url(served), origin="https://app.example", ping_interval=None) as socket:
            opened = await asyncio.wait_for(socket.recv(), WAIT)
            assert str(opened).startswith("0{")
            assert "access-control-allow-credentials" not in socket.response.headers


@pytest.mark.parametrize("joins", ["nothing", "a refused token"])
async def test_a_socket_that_joins_no_namespace_is_closed(app: FastAPI, joins: str) -> None:
    # Ten seconds in production (realtime_namespace_seconds): a quarter of one here.
    with running_server(replace(app.state.settings, realtime_namespace_seconds=0.25)) as served:
        async with websockets.connect(socket_url(served), ping_interval=None) as socket:
            assert str(await asyncio.wait_for(socket.recv(), WAIT)).startswith("0{")
            if joins == "a refused token":
                await socket.send('40{"token":"not-a-token"}')
            received = await closed_by_the_server(socket)
        if joins == "a refused token":
            assert str(received[0]).startswith("44")  # socket.io's CONNECT_ERROR, then the close
