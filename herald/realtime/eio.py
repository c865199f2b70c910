"""The Inbox socket's engine.io layer, holding less per idle socket than python-engineio's own.

python-engineio and python-socketio stay the protocol implementation: the
handshake, the packets, socket.io's namespaces, rooms and events are theirs.
What this module replaces is how an engine.io socket waits, which is where an
idle socket's memory went (tracemalloc and RSS of 2,000 idle sockets under
uvicorn, 2026-11-25; python-engineio 4.15.1 holds about 42 KB a socket, 20 of
them its own):

- **No writer task and queue a socket.** engine.io's websocket handler runs a
  writer task reading an ``asyncio.Queue`` (with its three deques and an
  ``Event``), and a reader that wraps every wait in ``ensure_future`` and
  ``wait_for``: three tasks and a queue while idle. Here a send writes the
  frame straight to the websocket (the ASGI send writes without yielding
  unless the transport is paused, so sends leave in the order they were
  made), and the reader is the ASGI connection's own task.
- **One timer for every socket's ping.** engine.io sleeps a task per socket
  through each ping interval. Here :class:`PingTimer` keeps two FIFO queues
  (every socket of a server has the same interval and timeout, so each queue
  is in due order) and one event-loop timer for the earliest entry. An
  unanswered ping closes the socket ``pingTimeout`` after it was sent
  (reason ``PING_TIMEOUT``, a CLOSE packet, then the websocket), as engine.io's
  reader timeout and service task do.
- **No environ copy.** engine.io's ASGI driver builds a WSGI-style environ dict
  per request (every header decoded again, and a class object defined per
  call for ``wsgi.input``, 2.5 KB alone) which socket.io keeps for the
  socket's life. :class:`ScopeEnviron` answers the same keys from the ASGI
  scope uvicorn already holds.
- **Fewer frames held.** The reader runs right under ``_handle_connect``,
  and ``handle_request`` for a websocket that opens a socket does engine.io's
  checks without keeping the parsed query (the token again) in its frame.

The first three took an idle socket of Herald from 46.1 to 29.0 KB of the API
process (``python -m bench.realtime --quick``); with the frames, Herald's own
trimming and uvicorn's wsproto websocket, 22.7 KB (2,000 sockets;
herald.realtime.websocket takes it further, docs/performance.md). In a bare
server under the same uvicorn, sending an event costs less CPU too (34.5
against 47.8 µs, no writer task to wake).

They subclass internals of python-engineio 4.15.1 and python-socketio 5.18.1
(``AsyncSocket``, ``AsyncServer.handle_request`` and ``_handle_connect``, the
ASGI driver's ``translate_request`` and ``WebSocket``,
``socketio.AsyncServer._engineio_server_class``),
the versions in requirements.lock. With other versions installed
:func:`create_server` logs a warning and serves with the library's own
classes, which work the same, only heavier, until this module is checked
against them and ``PINNED`` updated.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import deque
from collections.abc import Iterator, Mapping
from importlib.metadata import version
from typing import Any
from urllib.parse import parse_qs

import engineio
import socketio
from engineio import async_server, async_socket, exceptions, packet
from engineio.async_drivers import asgi

logger = logging.getLogger("herald.realtime")

# The versions this module's subclasses were written against and measured with.
PINNED = {"python-engineio": "4.15.1", "python-socketio": "5.18.1"}


def installed_versions() -> dict[str, str]:
    return {name: version(name) for name in PINNED}


class ScopeEnviron(Mapping[str, Any]):
    """The WSGI-style environ engine.io and socket.io read, answered from the ASGI scope.

    The same keys and values as ``engineio.async_drivers.asgi.translate_request``
    builds, computed when asked. socket.io keeps a socket's environ for its
    whole life (``get_environ``); this holds the scope (which the server keeps
    anyway), ``receive`` and ``send``.
    """

    __slots__ = ("scope", "receive", "send")

    _FIXED = (
        "wsgi.input",
        "wsgi.errors",
        "wsgi.version",
        "wsgi.async",
        "wsgi.multithread",
        "wsgi.multiprocess",
        "wsgi.run_once",
        "SERVER_SOFTWARE",
        "REQUEST_METHOD",
        "PATH_INFO",
        "QUERY_STRING",
        "RAW_URI",
        "SCRIPT_NAME",
        "SERVER_PROTOCOL",
        "REMOTE_ADDR",
        "REMOTE_PORT",
        "SERVER_NAME",
        "SERVER_PORT",
        "asgi.receive",
        "asgi.send",
        "asgi.scope",
        "wsgi.url_scheme",
    )

    def __init__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send

    def _query_string(self) -> str:
        raw = self.scope.get("query_string")
        if not raw:
            return ""
        try:
            return str(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return ""

    def _header(self, key: str) -> str | None:
        """``CONTENT_TYPE``, ``CONTENT_LENGTH`` or ``HTTP_*``: the header's values joined by commas, as the driver does."""
        found: str | None = None
        for name, value in self.scope["headers"]:
            try:
                upper = name.upper().decode("utf-8")
                text = value.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if upper in ("CONTENT-TYPE", "CONTENT-LENGTH"):
                # The driver keeps the last of these, under their own keys.
                if key == upper.replace("-", "_"):
                    found = text
                continue
            if key == "HTTP_" + upper.replace("-", "_"):
                found = text if found is None else f"{found},{text}"
        return found

    def __getitem__(self, key: str) -> Any:
        if key.startswith("HTTP_") or key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            value = self._header(key)
            if value is None:
                raise KeyError(key)
            return value
        if key == "QUERY_STRING":
            return self._query_string()
        if key == "REQUEST_METHOD":
            return self.scope.get("method", "GET")
        if key == "PATH_INFO":
            return self.scope["path"]
        if key == "RAW_URI":
            query = self._query_string()
            return self.scope["path"] + ("?" + query if query else "")
        if key == "asgi.scope":
            return self.scope
        if key == "asgi.receive":
            return self.receive
        if key == "asgi.send":
            return self.send
        if key == "wsgi.url_scheme":
            return self._header("HTTP_X_FORWARDED_PROTO") or "http"
        if key == "wsgi.input":
            return _EmptyInput()
        if key == "wsgi.errors":
            return sys.stderr
        constant = _CONSTANTS.get(key, _MISSING)
        if constant is _MISSING:
            raise KeyError(key)
        return constant

    def _keys(self) -> list[str]:
        keys = list(self._FIXED)
        for name, _ in self.scope["headers"]:
            try:
                upper = name.upper().decode("utf-8")
            except UnicodeDecodeError:
                continue
            key = upper.replace("-", "_") if upper in ("CONTENT-TYPE", "CONTENT-LENGTH") else "HTTP_" + upper.replace("-", "_")
            if key not in keys and self._header(key) is not None:
                keys.append(key)
        return keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __repr__(self) -> str:
        return f"ScopeEnviron({dict(self)!r})"


_MISSING = object()
_CONSTANTS: dict[str, Any] = {
    "wsgi.version": (1, 0),
    "wsgi.async": True,
    "wsgi.multithread": False,
    "wsgi.multiprocess": False,
    "wsgi.run_once": False,
    "SERVER_SOFTWARE": "asgi",
    "SCRIPT_NAME": "",
    "SERVER_PROTOCOL": "HTTP/1.1",
    "REMOTE_ADDR": "127.0.0.1",
    "REMOTE_PORT": "0",
    "SERVER_NAME": "asgi",
    "SERVER_PORT": "0",
}


class _EmptyInput:
    """A websocket request's body: nothing (the driver's reader would return ``b''`` too)."""

    async def read(self, length: int | None = None) -> bytes:
        return b""


async def translate_request(scope: dict[str, Any], receive: Any, send: Any) -> Mapping[str, Any]:
    """The driver's ``translate_request``: a websocket's environ is a :class:`ScopeEnviron`; HTTP requests as before."""
    if scope["type"] != "websocket":
        return await asgi.translate_request(scope, receive, send)  # type: ignore[no-any-return]
    event = await receive()
    if event["type"] != "websocket.connect":
        return {}
    return ScopeEnviron(scope, receive, send)


class WebSocket:
    """The driver's websocket wrapper (``engineio.async_drivers.asgi.WebSocket``) with slots."""

    __slots__ = ("handler", "asgi_receive", "asgi_send")

    def __init__(self, handler: Any, server: Any) -> None:
        self.handler = handler
        self.asgi_receive: Any = None
        self.asgi_send: Any = None

    async def __call__(self, environ: Mapping[str, Any]) -> str:
        self.asgi_receive = environ["asgi.receive"]
        self.asgi_send = environ["asgi.send"]
        await self.asgi_send({"type": "websocket.accept"})
        await self.handler(self)
        return ""  # nothing more to answer

    async def close(self) -> None:
        try:
            await self.asgi_send({"type": "websocket.close"})
        except Exception:  # noqa: S110 - closing a socket that is already closed
            pass

    async def send(self, message: str | bytes) -> None:
        if isinstance(message, bytes):
            await self.asgi_send({"type": "websocket.send", "bytes": message, "text": None})
        else:
            await self.asgi_send({"type": "websocket.send", "bytes": None, "text": message})

    async def wait(self) -> str | bytes:
        event = await self.asgi_receive()
        if event["type"] != "websocket.receive":
            raise OSError()
        if event.get("bytes") is not None:
            return event["bytes"]  # type: ignore[no-any-return]
        if event.get("text") is not None:
            return event["text"]  # type: ignore[no-any-return]
        raise OSError()


class PingTimer:
    """Every socket's next ping and pong deadline of one engine.io server, on one event-loop timer.

    All sockets of a server ping at the same interval and wait the same
    timeout, so entries join each queue in due order: the heads are the
    earliest, and the timer is armed for the earlier of the two. An entry
    whose socket has moved on (answered, closed) is skipped when it comes due.
    """

    def __init__(self, server: LeanEngineServer) -> None:
        self.server = server
        self.pings: deque[tuple[float, LeanSocket]] = deque()
        self.deadlines: deque[tuple[float, LeanSocket, float]] = deque()
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._armed_at = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()

    def ping_later(self, socket: LeanSocket) -> None:
        loop = asyncio.get_running_loop()
        self.pings.append((loop.time() + self.server.ping_interval, socket))
        self._arm(loop)

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        due = min(
            self.pings[0][0] if self.pings else float("inf"),
            self.deadlines[0][0] if self.deadlines else float("inf"),
        )
        if due == float("inf"):
            return
        if self._handle is not None and self._loop is loop:
            if self._armed_at <= due:
                return
            self._handle.cancel()
        # (A timer of another event loop, one that served this server before, is not waited for.)
        self._armed_at = due
        self._loop = loop
        self._handle = loop.call_at(due, self._fire)

    def _fire(self) -> None:
        self._handle = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self.pings and self.pings[0][0] <= now:
            _, socket = self.pings.popleft()
            sent_at = socket.ping_due()
            if sent_at is not None:
                self._spawn(loop, socket.send(packet.Packet(packet.PING)))
                self.deadlines.append((now + self.server.ping_timeout, socket, sent_at))
        while self.deadlines and self.deadlines[0][0] <= now:
            _, socket, sent_at = self.deadlines.popleft()
            if socket.last_ping == sent_at and not socket.closing and not socket.closed:
                self._spawn(loop, socket.ping_timed_out())
        self._arm(loop)

    def _spawn(self, loop: asyncio.AbstractEventLoop, coroutine: Any) -> None:
        task = loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class LeanSocket(async_socket.AsyncSocket):
    """An engine.io socket over a websocket only: sends written directly, pings on the server's :class:`PingTimer`.

    ``engineio.async_socket.AsyncSocket`` of python-engineio 4.15.1 (see the
    module's docstring for what each override saves). Long-polling is not
    served (Herald's server takes the websocket transport only).
    """

    server: LeanEngineServer

    def __init__(self, server: LeanEngineServer, sid: str) -> None:
        # BaseSocket.__init__ without its queue.
        self.server = server
        self.sid = sid
        self.queue = None
        self.last_ping: float | None = time.time()
        self.connected = False
        self.upgrading = False
        self.upgraded = False
        self.closing = False
        self.closed = False
        self.session: dict[str, Any] = {}
        self.websocket: WebSocket | None = None
        # Packets sent before the websocket is accepted (the OPEN packet).
        self.early: list[packet.Packet] | None = []

    async def poll(self) -> list[packet.Packet]:
        raise exceptions.QueueEmpty()  # long-polling is not served

    async def send(self, pkt: packet.Packet) -> None:
        if not await self.check_ping_timeout():
            return
        await self._write(pkt)

    async def _write(self, pkt: packet.Packet) -> None:
        websocket = self.websocket
        if websocket is None:
            if self.early is not None:
                self.early.append(pkt)
            return
        try:
            await websocket.send(pkt.encode())
        except Exception:
            # As engine.io's writer: a send that fails ends the websocket (its reader then closes the socket).
            await websocket.close()

    async def close(self, wait: bool = True, abort: bool = False, reason: Any = None) -> None:
        if self.closed or self.closing:
            return
        self.closing = True
        await self.server._trigger_event(
            "disconnect", self.sid, reason or self.server.reason.SERVER_DISCONNECT, run_async=False
        )
        if not abort:
            await self._write(packet.Packet(packet.CLOSE))
            # engine.io leaves the websocket to the client (or to its reader's timeout);
            # the client closes it on the CLOSE packet, and one that does not is gone.
            if self.websocket is not None:
                await self.websocket.close()
        self.closed = True

    def schedule_ping(self) -> None:
        # As engine.io: a new ping only once the previous one was answered.
        if self.last_ping:
            self.last_ping = None
            self.server.ping_timer.ping_later(self)

    def ping_due(self) -> float | None:
        """The ping interval passed: the time the ping is sent, or None if the socket is closing."""
        if self.closing or self.closed or self.last_ping is not None:
            return None
        self.last_ping = time.time()
        return self.last_ping

    async def ping_timed_out(self) -> None:
        self.server.logger.info("%s: Client is gone, closing socket", self.sid)
        await self.close(wait=False, abort=False, reason=self.server.reason.PING_TIMEOUT)

    async def _websocket_handler(self, ws: WebSocket) -> None:  # type: ignore[override]
        """Read the client's packets on the connection's own task; sends do not go through here."""
        if self.connected:  # an upgrade from long-polling, which is not served
            return
        self.connected = True
        self.upgraded = True
        self.websocket = ws
        early, self.early = self.early or [], None
        while early:  # emptied: this frame holds no packet while the socket is open
            await self._write(early.pop(0))
        self.server.logger.info("%s: Upgrade to websocket successful", self.sid)
        while True:
            try:
                data = await ws.wait()
            except Exception:
                break
            if data and len(data) > self.server.max_http_buffer_size:
                break  # engine.io's reader: 'packet is too large'
            try:
                await self.receive(packet.Packet(encoded_packet=data))
            except exceptions.UnknownPacketError:
                pass
            except exceptions.SocketIsClosedError:
                self.server.logger.info("Receive error -- socket is closed")
                break
            except Exception:
                self.server.logger.exception("Unknown receive error")
        await ws.close()
        await self.close(wait=False, abort=True, reason=self.server.reason.TRANSPORT_CLOSE)


class LeanEngineServer(engineio.AsyncServer):
    """``engineio.AsyncServer`` (4.15.1) making :class:`LeanSocket` sockets, with the leaner ASGI driver pieces."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.transports != ["websocket"]:
            raise ValueError("LeanEngineServer serves the websocket transport only")
        self._async = {**self._async, "translate_request": translate_request, "websocket": WebSocket}
        self.ping_timer = PingTimer(self)

    async def handle_request(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:  # type: ignore[override]
        """``AsyncServer.handle_request`` of 4.15.1 for a websocket that opens a socket; any other request as before.

        The same checks in the same order (origin, transport, protocol version,
        the upgrade), but the parsed query (which holds the session token) is
        not kept in a frame for the socket's life.
        """
        if scope.get("type") != "websocket" or "sid" in parse_qs((scope.get("query_string") or b"").decode("latin-1")):
            return await super().handle_request(scope, receive, send)
        environ = await self._async["translate_request"](scope, receive, send)
        refusal = self._refusal(environ)
        if refusal is not None:
            return await self._make_response(refusal, environ)
        response = await self._handle_connect(environ, "websocket")
        if isinstance(response, dict):
            return await self._make_response(response, environ)
        return response

    def _refusal(self, environ: Any) -> dict[str, Any] | None:
        """What ``handle_request`` answers a websocket without ``sid`` it does not connect, or None."""
        if self.cors_allowed_origins != []:
            origin = environ.get("HTTP_ORIGIN")
            if origin:
                allowed_origins = self._cors_allowed_origins(environ)
                if allowed_origins is not None and origin not in allowed_origins:
                    self._log_error_once(origin + " is not an accepted origin.", "bad-origin")
                    return self._bad_request(origin + " is not an accepted origin.")  # type: ignore[no-any-return]
        query = parse_qs(environ.get("QUERY_STRING", ""))
        transport = query.get("transport", ["polling"])[0]
        if transport not in self.transports:
            self._log_error_once("Invalid transport", "bad-transport")
            return self._bad_request("Invalid transport")  # type: ignore[no-any-return]
        if query.get("EIO") != ["4"]:
            message = "The client is using an unsupported version of the Socket.IO or Engine.IO protocols"
            self._log_error_once(message, "bad-version")
            return self._bad_request(message)  # type: ignore[no-any-return]
        if "j" in query:
            try:
                int(query["j"][0])
            except (ValueError, KeyError, IndexError):
                self._log_error_once("Invalid JSONP index number", "bad-jsonp-index")
                return self._bad_request("Invalid JSONP index number")  # type: ignore[no-any-return]
        if environ["REQUEST_METHOD"] != "GET":
            self.logger.warning("Method %s not supported", environ["REQUEST_METHOD"])
            return self._method_not_found()  # type: ignore[no-any-return]
        upgrade = environ.get("HTTP_UPGRADE")
        if upgrade is None or transport != upgrade.lower():
            self._log_error_once("Invalid websocket upgrade", "bad-upgrade")
            return self._bad_request("Invalid websocket upgrade")  # type: ignore[no-any-return]
        return None

    async def _handle_connect(self, environ: Any, transport: str, jsonp_index: int | None = None) -> Any:
        """``AsyncServer._handle_connect`` of 4.15.1 for a websocket, making a :class:`LeanSocket`.

        The socket's reader runs right under this call (engine.io's goes through
        ``handle_get_request``, ``_upgrade_websocket`` and the wrapper's
        ``__call__``, three coroutine frames more held by every idle socket), and
        the handshake's locals (the OPEN packet and its encoding) are gone before it.
        """
        opened = await self._open(environ, transport)
        if not isinstance(opened, LeanSocket):
            return opened
        connection = [token.strip() for token in environ.get("HTTP_CONNECTION", "").lower().split(",")]
        if "upgrade" not in connection or environ.get("HTTP_UPGRADE", "").lower() != "websocket":
            ret = await opened.handle_get_request(environ)  # engine.io's own answer to a request that is no upgrade
        else:
            ws = WebSocket(opened._websocket_handler, self)
            ws.asgi_receive = environ["asgi.receive"]
            ws.asgi_send = environ["asgi.send"]
            await ws.asgi_send({"type": "websocket.accept"})
            await opened._websocket_handler(ws)
            ret = ""  # nothing more to answer
        if opened.closed and opened.sid in self.sockets:
            del self.sockets[opened.sid]
        return ret

    async def _open(self, environ: Any, transport: str) -> Any:
        """The handshake: a socket that the connect handler accepted, or the answer that refuses it."""
        if transport != "websocket":  # not reached: the transports are checked before
            return self._bad_request("Invalid transport")
        if self.start_service_task:
            # engine.io's task that closes sockets whose ping went unanswered (one for the server).
            self.start_service_task = False
            self.service_task_handle = self.start_background_task(self._service_task)
        sid = self.generate_id()
        s = LeanSocket(self, sid)
        self.sockets[sid] = s
        pkt = packet.Packet(
            packet.OPEN,
            {
                "sid": sid,
                "upgrades": self._upgrades(sid, transport),
                "pingTimeout": int(self.ping_timeout * 1000),
                "pingInterval": int(self.ping_interval + self.ping_interval_grace_period) * 1000,
                "maxPayload": self.max_http_buffer_size,
            },
        )
        await s.send(pkt)
        ret = await self._trigger_event("connect", sid, environ, run_async=False)
        if ret is not None and ret is not True:
            del self.sockets[sid]
            self.logger.warning("Application rejected connection")
            return self._unauthorized(ret or None)
        s.schedule_ping()
        return s


class LeanServer(socketio.AsyncServer):
    """``socketio.AsyncServer`` (5.18.1) over :class:`LeanEngineServer`."""

    def _engineio_server_class(self) -> type[async_server.AsyncServer]:
        return LeanEngineServer


def create_server(**kwargs: Any) -> socketio.AsyncServer:
    """A socket.io server for the ASGI app: the lean one when the installed versions are the pinned ones."""
    installed = installed_versions()
    if installed != PINNED:
        logger.warning(
            "herald.realtime.eio was written for %s but %s is installed: serving the Inbox socket with "
            "python-socketio's own classes (the same protocol, more memory a socket) until it is checked",
            PINNED,
            installed,
        )
        return socketio.AsyncServer(**kwargs)
    return LeanServer(**kwargs)
