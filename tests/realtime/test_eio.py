"""herald.realtime.eio: the engine.io layer that holds less a socket speaks the protocol as python-engineio's own.

Each protocol test runs against both servers, python-socketio's own and the
lean one, over uvicorn with ``herald serve``'s websocket options and a raw
websocket client (the frames @novu/js's client exchanges): the handshake's
ping settings, pings and pongs, events in order, and a socket whose ping is
not answered closed ``pingTimeout`` after it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import socketio
import uvicorn
import websockets
from engineio.async_drivers import asgi

from herald.realtime import eio, websocket
from herald.realtime.server import uvicorn_websocket_options
from tests.fixtures.server import free_port

PING_INTERVAL = 1.0
PING_TIMEOUT = 0.5


class Served:
    def __init__(self, server: socketio.AsyncServer, url: str) -> None:
        self.server = server
        self.url = url
        self.loop: asyncio.AbstractEventLoop | None = None
        self.disconnects: list[tuple[str, str]] = []
        self.uvicorn: uvicorn.Server | None = None


@contextmanager
def serving(lean: bool) -> Iterator[Served]:
    """A socket.io server (lean or python-socketio's own) under uvicorn in a thread, pinging every second."""
    options: dict[str, Any] = {
        "async_mode": "asgi",
        "transports": ["websocket"],
        "cors_allowed_origins": "*",
        "ping_interval": PING_INTERVAL,
        "ping_timeout": PING_TIMEOUT,
    }
    server = eio.create_server(**options) if lean else socketio.AsyncServer(**options)
    port = free_port()
    served = Served(server, f"ws://127.0.0.1:{port}/socket.io/?EIO=4&transport=websocket")

    async def connect(sid: str, environ: Any, auth: Any = None) -> None:
        await server.enter_room(sid, "room")

    async def disconnect(sid: str, reason: str) -> None:
        served.disconnects.append((sid, reason))

    server.on("connect", connect)
    server.on("disconnect", disconnect)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        served.loop = asyncio.get_running_loop()
        await server.eio.handle_request(scope, receive, send)

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **uvicorn_websocket_options())
    uvicorn_server = served.uvicorn = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(uvicorn_server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not uvicorn_server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    try:
        yield served
    finally:
        uvicorn_server.should_exit = True
        thread.join(10)


async def open_socket(url: str) -> tuple[Any, dict[str, Any]]:
    """Connect as @novu/js does: the OPEN packet, then socket.io's CONNECT to the default namespace."""
    connection = await websockets.connect(url, ping_interval=None)
    opening = await connection.recv()
    assert opening.startswith("0"), opening
    await connection.send("40")
    answer = await connection.recv()
    assert answer.startswith("40"), answer
    return connection, json.loads(opening[1:])


def run_on(served: Served, coroutine: Any) -> None:
    assert served.loop is not None
    asyncio.run_coroutine_threadsafe(coroutine, served.loop).result(5)


@pytest.mark.parametrize("lean", [False, True], ids=["python-socketio", "lean"])
async def test_the_handshake_pings_and_pongs(lean: bool) -> None:
    with serving(lean) as served:
        connection, opening = await open_socket(served.url)
        try:
            assert opening["pingInterval"] == PING_INTERVAL * 1000
            assert opening["pingTimeout"] == int(PING_TIMEOUT * 1000)
            assert opening["upgrades"] == [] and opening["maxPayload"] == 1_000_000
            started = time.monotonic()
            for _ in range(3):
                # A ping an interval after the connect or the last pong; answered, the socket stays.
                assert await asyncio.wait_for(connection.recv(), 2) == "2"
                await connection.send("3")
            assert 3 * PING_INTERVAL * 0.9 <= time.monotonic() - started < 3 * PING_INTERVAL + 1.5
            assert served.disconnects == []
        finally:
            await connection.close()


@pytest.mark.parametrize("lean", [False, True], ids=["python-socketio", "lean"])
async def test_a_socket_that_does_not_answer_its_ping_is_closed_after_the_ping_timeout(lean: bool) -> None:
    with serving(lean) as served:
        connection, _ = await open_socket(served.url)
        assert await asyncio.wait_for(connection.recv(), 2) == "2"
        pinged = time.monotonic()
        # No pong: the server gives up on the socket (a CLOSE packet, then the websocket closes).
        frames = []
        with pytest.raises(websockets.ConnectionClosed):
            while True:
                frames.append(await asyncio.wait_for(connection.recv(), 5))
        waited = time.monotonic() - pinged
        assert PING_TIMEOUT * 0.9 <= waited < PING_TIMEOUT + PING_INTERVAL + 1.5, waited
        reasons = [reason for _, reason in served.disconnects]
        if lean:
            assert (reasons, frames) == (["ping timeout"], ["1"])
        else:
            # python-socketio's own: its reader's timeout or its service task, whichever comes first (whose
            # CLOSE packet its own send drops, the ping having timed out).
            assert reasons in (["ping timeout"], ["transport close"]) and frames in ([], ["1"])
        deadline = time.monotonic() + 2
        while served.server.eio.sockets and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert served.server.eio.sockets == {}


@pytest.mark.parametrize("lean", [False, True], ids=["python-socketio", "lean"])
async def test_events_arrive_in_the_order_they_were_emitted_and_a_client_close_disconnects(lean: bool) -> None:
    with serving(lean) as served:
        connection, _ = await open_socket(served.url)

        async def emit_many() -> None:
            await asyncio.gather(*(served.server.emit("seq", {"n": n}, room="room") for n in range(50)))

        run_on(served, emit_many())
        received = []
        while len(received) < 50:
            frame = await asyncio.wait_for(connection.recv(), 5)
            if frame == "2":
                await connection.send("3")
                continue
            assert frame.startswith("42"), frame
            name, data = json.loads(frame[2:])
            assert name == "seq"
            received.append(data["n"])
        assert received == list(range(50))
        await connection.close()
        deadline = time.monotonic() + 5
        while not served.disconnects and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert [reason for _, reason in served.disconnects] == ["transport close"]


@pytest.mark.parametrize("lean", [False, True], ids=["python-socketio", "lean"])
async def test_a_server_disconnect_sends_socketios_disconnect_and_engineios_close(lean: bool) -> None:
    with serving(lean) as served:
        connection, _ = await open_socket(served.url)
        sid = next(iter(served.server.manager.rooms["/"]["room"]))
        run_on(served, served.server.disconnect(sid))  # Realtime.close's: the namespace's DISCONNECT
        assert await asyncio.wait_for(connection.recv(), 5) == "41"
        assert [reason for _, reason in served.disconnects] == ["server disconnect"]
        other, _ = await open_socket(served.url)
        eio_sid = next(iter(served.server.manager.rooms["/"]["room"].values()))
        run_on(served, served.server.eio.disconnect(eio_sid))  # the whole connection: engine.io's CLOSE
        assert await asyncio.wait_for(other.recv(), 5) == "1"
        if lean:  # and the websocket closes with it
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(other.recv(), 5)
        await connection.close()
        await other.close()


@pytest.mark.parametrize("lean", [False, True], ids=["python-socketio", "lean"])
async def test_a_socket_without_the_protocol_version_is_refused(lean: bool) -> None:
    with serving(lean) as served:
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(served.url.replace("EIO=4", "EIO=3"), ping_interval=None)
        assert refused.value.response.status_code == 403  # uvicorn's answer to a websocket.close before accept


@pytest.mark.parametrize("lean", [False, True], ids=["python-socketio", "lean"])
async def test_long_polling_is_refused(lean: bool) -> None:
    with serving(lean) as served:
        url = served.url.replace("ws://", "http://").replace("transport=websocket", "transport=polling")
        async with httpx.AsyncClient() as client:
            response = await client.get(url)
        assert (response.status_code, response.json()) == (400, "Invalid transport")


def test_the_lean_server_is_used_with_the_pinned_versions() -> None:
    """A new python-engineio or python-socketio in the lock needs herald.realtime.eio checked against it (then PINNED updated)."""
    assert eio.installed_versions() == eio.PINNED
    server = eio.create_server(async_mode="asgi", transports=["websocket"])
    assert isinstance(server, eio.LeanServer) and isinstance(server.eio, eio.LeanEngineServer)


def test_the_lean_server_takes_the_websocket_transport_only() -> None:
    with pytest.raises(ValueError, match="websocket transport only"):
        eio.create_server(async_mode="asgi")


async def test_the_environ_reads_as_the_asgi_drivers() -> None:
    scope = {
        "type": "websocket",
        "path": "/socket.io/",
        "query_string": b"EIO=4&transport=websocket&token=abc",
        "headers": [
            (b"host", b"herald.example"),
            (b"origin", b"https://app.example"),
            (b"x-forwarded-proto", b"https"),
            (b"accept-language", b"en"),
            (b"accept-language", b"fr"),
            (b"content-type", b"text/plain"),
            (b"upgrade", b"websocket"),
            (b"connection", b"Upgrade"),
        ],
    }

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: Any) -> None:
        pass

    theirs = await asgi.translate_request(scope, receive, send)
    ours = await eio.translate_request(scope, receive, send)
    assert isinstance(ours, eio.ScopeEnviron)
    for key in ("wsgi.input", "wsgi.errors"):
        theirs.pop(key)
    assert {key: value for key, value in ours.items() if key not in ("wsgi.input", "wsgi.errors")} == theirs
    assert ours["HTTP_ACCEPT_LANGUAGE"] == "en,fr" and ours["wsgi.url_scheme"] == "https"
    assert ours.get("HTTP_COOKIE") is None and "HTTP_COOKIE" not in ours
    assert await ours["wsgi.input"].read() == b""


async def test_an_open_websocket_holds_no_handshake_state() -> None:
    """herald.realtime.websocket lets wsproto's handshake go once accepted; the socket still pings and receives."""
    with serving(lean=True) as served:
        connection, _ = await open_socket(served.url)
        try:
            assert served.uvicorn is not None
            protocols = [c for c in served.uvicorn.server_state.connections if hasattr(c, "conn")]
            assert len(protocols) == 1 and protocols[0].conn.handshake is websocket.OPENED
            assert await asyncio.wait_for(connection.recv(), 3) == "2"
            await connection.send("3")
            run_on(served, served.server.emit("seq", {"n": 1}, room="room"))
            assert await asyncio.wait_for(connection.recv(), 3) == '42["seq",{"n":1}]'
        finally:
            await connection.close()
