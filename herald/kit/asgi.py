"""Small ASGI helpers shared by the middlewares."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.kit.errors import error_body, internal_error_response, is_store_unavailable, store_unavailable_response
from herald.kit.metrics import NamedRoute
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
    (herald.engine.worker.Worker.pressure), through :meth:`take_peak`: the
    count at the end of a round said little, as a group commit answers its
    whole batch at once and the clients' next requests arrive a moment later.
    """

    def __init__(self) -> None:
        self.count = 0
        self.peak = 0

    def take_peak(self) -> int:
        """The most requests in flight at once since the last call."""
        peak, self.peak = max(self.peak, self.count), self.count
        return peak


class CountRequestsMiddleware:
    """Keeps a :class:`RequestsInFlight` up to date."""

    def __init__(self, app: ASGIApp, *, counter: RequestsInFlight) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        counter = self.counter
        counter.count += 1
        if counter.count > counter.peak:
            counter.peak = counter.count
        try:
            await self.app(scope, receive, send)
        finally:
            self.counter.count -= 1


Endpoint = Callable[[Request], Awaitable[Response]]


class DirectRoutes:
    """Answers a few exact (method, path) pairs past the framework's own layers.

    FastAPI sends every request through its middlewares (its error page,
    telemetry, a body limit Herald does not set), an exception middleware, an
    exit stack and a router that tries each route in turn, then wraps the
    endpoint in a Request-building adapter. For ``POST /v1/events/trigger``,
    whose endpoint takes the Request and returns its Response itself
    (:class:`herald.kit.schemas.RequestRoute`), those layers cost more CPU
    than Herald's own route code did. Here the same endpoint runs inside the
    app's own middlewares (counted, guarded, idempotent, the last resort) and
    its exceptions get the app's handlers, as they would through the router:
    the caller sees the same answers.

    ``app.user_middleware`` is read when the first request comes, as
    Starlette builds its own stack, so middlewares added after this was made
    are included.
    """

    def __init__(self, app: Starlette, endpoints: Mapping[tuple[str, str], Endpoint]) -> None:
        self.app = app
        self.endpoints = dict(endpoints)
        # Each one's template for the metrics (kit.metrics.route_template): the path itself.
        self.routes = {key: NamedRoute(key[1]) for key in self.endpoints}
        self._stack: ASGIApp | None = None

    def endpoint_for(self, scope: Scope) -> Endpoint | None:
        """The endpoint that answers this request directly, or None for the framework to route it."""
        if scope["type"] != "http" or scope.get("root_path"):
            return None
        return self.endpoints.get((scope["method"], scope["path"]))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._stack is None:
            stack: ASGIApp = self._answer
            for middleware in reversed(self.app.user_middleware):
                stack = middleware.cls(stack, *middleware.args, **middleware.kwargs)
            self._stack = stack
        scope["app"] = self.app
        await self._stack(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.endpoints[(scope["method"], scope["path"])]
        request = Request(scope, receive, send)
        try:
            response = await endpoint(request)
        except Exception as exc:
            handler = self._handler_for(exc)
            if handler is None:  # the last resort answers it
                raise
            response = handler(request, exc)
            if inspect.isawaitable(response):
                response = await response
        await response(scope, receive, send)

    def _handler_for(self, exc: Exception) -> Callable[..., Any] | None:
        # As Starlette's ExceptionMiddleware looks them up; FastAPI gives the
        # handlers of 500 and Exception to its outermost error middleware.
        handlers = self.app.exception_handlers
        if isinstance(exc, HTTPException) and exc.status_code in handlers and exc.status_code != 500:
            return handlers[exc.status_code]
        for cls in type(exc).__mro__:
            if cls is Exception:
                break
            if cls in handlers:
                return handlers[cls]
        return None
