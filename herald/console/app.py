"""The console: a FastAPI app of its own, mounted at /console on the API's app (herald.app).

Its own app, so that it has its own answers for errors (pages, not JSON,
except for JSON requests), its own headers (herald.console.security) and
its own dependency on every route (the CSRF check), and so that none of it is
in the API's OpenAPI document. It shares the API's state (the store's
sessionmaker, the settings, the activity hub): the same service layer, two
front doors.

A new page is a module in ``herald/console/routes/`` with a ``router``
(handlers taking herald.console.deps.ConsoleDep), named in :data:`ROUTERS`,
and a template extending ``base.html``.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from herald.console import security
from herald.console.deps import SignInRequired, csrf_guard, sign_in_location
from herald.console.rendering import STATIC, render_html
from herald.kit.errors import HeraldError, error_body
from herald.kit.responses import JSONResponse


def _routers() -> list[Any]:
    from herald.console.routes import (
        account,
        activity,
        analytics,
        api_keys,
        audit,
        editor,
        environments,
        home,
        integrations,
        layouts,
        live,
        members,
        publish,
        sso,
        subscribers,
        topics,
        translations,
        variables,
        webhooks,
        workflows,
    )

    return [
        home.router,
        account.router,
        activity.router,
        analytics.router,
        api_keys.router,
        audit.router,
        editor.router,
        environments.router,
        integrations.router,
        layouts.router,
        live.router,
        members.router,
        publish.router,
        sso.router,
        subscribers.router,
        topics.router,
        translations.router,
        variables.router,
        webhooks.router,
        workflows.router,
    ]


def wants_json(request: Request) -> bool:
    """A script's request (fetch with JSON) gets Novu's error body; a browser's form or page gets a page."""
    accept = request.headers.get("accept", "")
    return "application/json" in accept or request.headers.get("content-type", "").startswith("application/json")


def error_page(request: Request, status_code: int, message: str) -> Response:
    full_path = request.url.path
    if wants_json(request):
        return JSONResponse(error_body(status_code, full_path, message), status_code=status_code)
    titles = {403: "You cannot do that", 404: "Page not found", 422: "There is a problem", 429: "Too many attempts"}
    found = (request.scope.get("state") or {}).get("console_signed_in")
    token = found.session.csrf_token if found else request.cookies.get(security.PRE_SESSION_COOKIE, "")
    return render_html(
        "error.html",
        {
            "title": titles.get(status_code, "Something went wrong"),
            "message": message,
            "status_code": status_code,
            "path": full_path,
            "csrf_token": token[:100],
            "flash": None,
        },
        status_code=status_code,
    )


async def _herald_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HeraldError)
    if isinstance(exc, SignInRequired):
        if request.method in ("GET", "HEAD") and not wants_json(request):
            return RedirectResponse(sign_in_location(request), status_code=303)
        return error_page(request, 401, exc.message)
    response = error_page(request, exc.status_code, exc.message)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    message = "This page does not exist (yet)" if exc.status_code == 404 else str(exc.detail)
    return error_page(request, exc.status_code, message)


async def _validation_error(request: Request, exc: Exception) -> Response:
    return error_page(request, 422, "The request is not one this page understands")


def create_console(state: Any) -> FastAPI:
    """The console app, sharing ``state`` (the API app's ``app.state``)."""
    console = FastAPI(
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(csrf_guard)],
    )
    console.state = state
    console.add_exception_handler(HeraldError, _herald_error)
    console.add_exception_handler(StarletteHTTPException, _http_error)
    console.add_exception_handler(RequestValidationError, _validation_error)
    routers = _routers()
    for router in routers:
        console.include_router(router)
    # The console's paths, for the landing to find the pages that exist (herald.console.routes.home).
    console.state_page_paths = frozenset(getattr(route, "path", "") for router in routers for route in router.routes)
    console.mount("/static", StaticFiles(directory=STATIC), name="static")
    console.add_middleware(security.SecurityHeadersMiddleware)
    return console
