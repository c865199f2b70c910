"""Small ASGI helpers shared by the middlewares."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.kit.errors import error_body, internal_error_response, is_store_unavailable, store_unavailable_response
from herald.kit.responses import dumps


def replay_receive(body: bytes, receive: Receive) -> Receive:
    """A receive callable that hands out an already-read body, then defers to the real one."""
    sent = False

    async def _receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return _receive


async def read_body(receive: Receive, limit: int | None = None) -> bytes | None:
    """The whole request body, or None when it grows past ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def send_json(
    send: Send, status: int, content: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = dumps(content)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_error(scope: Scope, send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send_json(send, status, error_body(status, scope.get("path", ""), message), headers)


async def send_response(send: Send, response: Response, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Send a complete (non-streaming) response from a middleware, with extra headers."""
    await send({"type": "http.response.start", "status": response.status_code, "headers": [*response.raw_headers, *(headers or [])]})
    await send({"type": "http.response.body", "body": response.body})


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


class LastResortMiddleware:
    """Answers the failures no route handler caught: 503 when the store is unreachable, else 500.

    It runs outside every other middleware and answers instead of re-raising
    (Starlette's own last resort answers and then re-raises, so the server
    logged each failure a second time, as a traceback without the errorId):
    each unexpected failure is one log line, with its errorId and traceback.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_tracked)
        except Exception as exc:
            if started:  # too late to answer: the server reports it
                raise
            path = scope.get("path", "")
            if is_store_unavailable(exc):
                response = store_unavailable_response(path, exc)
            else:
                response = internal_error_response(path, scope.get("method", ""), exc)
            await response(scope, receive, send)



class RequestsInFlight:
    """How many HTTP requests this process is answering right now.

    The in-process worker reads it to give way to the API under load
    (herald.engine.worker.Worker.pressure).
    """

    def __init__(self) -> None:
        self.count = 0


class CountRequestsMiddleware:
    """Keeps a :class:`RequestsInFlight` up to date."""

    def __init__(self, app: ASGIApp, *, counter: RequestsInFlight) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.counter.count += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.counter.count -= 1
