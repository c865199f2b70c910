"""Routes answered past FastAPI's own layers (kit.asgi.DirectRoutes, app.HeraldApp)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from herald.kit.asgi import DirectRoutes
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.builders import create_workflow


class Refusing(Exception):
    pass


class Unexpected(Exception):
    pass


class TagMiddleware:
    """Adds a header, to show the app's own middlewares run around a direct route."""

    def __init__(self, app: ASGIApp, *, tag: str) -> None:
        self.app = app
        self.tag = tag

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def tagged(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-tag", self.tag.encode())]
            await send(message)

        await self.app(scope, receive, tagged)


def _toy_app() -> tuple[Starlette, DirectRoutes]:
    async def refusing_handler(request: Request, exc: Exception) -> Response:
        return JSONResponse({"handled": type(exc).__name__, "path": request.url.path}, status_code=409)

    def http_handler(request: Request, exc: Exception) -> Response:  # a plain function, as Starlette allows
        assert isinstance(exc, HTTPException)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)

    app = Starlette(exception_handlers={Refusing: refusing_handler, HTTPException: http_handler})

    async def echo(request: Request) -> Response:
        return JSONResponse({"body": (await request.body()).decode(), "app": request.app is app}, status_code=201)

    async def refuse(request: Request) -> Response:
        raise Refusing()

    async def forbid(request: Request) -> Response:
        raise HTTPException(403, "no")

    async def crash(request: Request) -> Response:
        raise Unexpected()

    direct = DirectRoutes(app, {("POST", "/echo"): echo, ("POST", "/refuse"): refuse, ("POST", "/forbid"): forbid, ("POST", "/crash"): crash})
    # Added after the direct routes were made: still runs around them.
    app.add_middleware(TagMiddleware, tag="outer")
    return app, direct


def _client(direct: DirectRoutes) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=direct, raise_app_exceptions=True), base_url="http://t")


async def test_a_direct_route_runs_inside_the_apps_middlewares() -> None:
    _app, direct = _toy_app()
    async with _client(direct) as client:
        response = await client.post("/echo", content=b"hello")
    assert response.status_code == 201
    assert response.json() == {"body": "hello", "app": True}
    assert response.headers["x-tag"] == "outer"


async def test_a_direct_routes_exceptions_get_the_apps_handlers() -> None:
    _app, direct = _toy_app()
    async with _client(direct) as client:
        refused = await client.post("/refuse")
        forbidden = await client.post("/forbid")
    assert (refused.status_code, refused.json()) == (409, {"handled": "Refusing", "path": "/refuse"})
    assert (forbidden.status_code, forbidden.json()) == (403, {"detail": "no"})
    assert refused.headers["x-tag"] == forbidden.headers["x-tag"] == "outer"


async def test_an_exception_without_a_handler_is_left_to_the_middlewares() -> None:
    _app, direct = _toy_app()
    async with _client(direct) as client:
        with pytest.raises(Unexpected):
            await client.post("/crash")


def test_only_the_exact_method_and_path_are_direct() -> None:
    _app, direct = _toy_app()
    http = {"type": "http", "method": "POST", "path": "/echo", "root_path": ""}
    assert direct.endpoint_for(http) is not None
    assert direct.endpoint_for({**http, "method": "GET"}) is None
    assert direct.endpoint_for({**http, "path": "/echo/"}) is None
    assert direct.endpoint_for({**http, "root_path": "/api"}) is None
    assert direct.endpoint_for({"type": "lifespan"}) is None


async def test_the_trigger_route_is_answered_without_fastapis_stack(
    app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trigger route never enters FastAPI's middleware stack; every other route does."""
    workflow = await create_workflow(api)
    identifier = workflow["triggers"][0]["identifier"]

    async def not_here(scope: Scope, receive: Receive, send: Send) -> None:
        await JSONResponse({"routed": True}, status_code=599)(scope, receive, send)

    monkeypatch.setattr(app, "middleware_stack", not_here)
    accepted = await api.post("/v1/events/trigger", json={"name": identifier, "to": "ada"})
    assert accepted.status_code == 201, accepted.text
    assert accepted.json()["data"]["status"] == "processed"
    # Its errors are the same as through the router: Novu's body, from the same handlers.
    unknown = await api.post("/v1/events/trigger", json={"name": "no-such-workflow", "to": "ada"})
    assert_error(unknown, 422)
    invalid = await api.post("/v1/events/trigger", json={"to": "ada"})
    assert_error(invalid, 422, "Validation Error")
    async with make_client(app) as anonymous:
        assert_error(await anonymous.post("/v1/events/trigger", json={"name": identifier, "to": "ada"}), 401)
    routed = await api.get("/v1/workflows")
    assert routed.status_code == 599
