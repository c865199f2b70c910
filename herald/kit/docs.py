"""``/docs`` (Swagger UI) and ``/redoc``, served with their scripts and styles from Herald itself.

FastAPI's own pages load them from a CDN: on a machine without internet, or
behind a proxy that blocks it, the docs were a blank page. The files come
from the ``fastapi-offline`` package (Swagger UI 5, ReDoc 2, a favicon).
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse, RedirectResponse

ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs/assets"


def install_docs(app: FastAPI, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Serve the two documentation pages on ``app``, made with ``docs_url=None, redoc_url=None``."""
    assert app.openapi_url is not None
    openapi_url = app.openapi_url
    oauth2_redirect_url = app.swagger_ui_oauth2_redirect_url
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{oauth2_redirect_url}" if oauth2_redirect_url else None,
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    if oauth2_redirect_url:

        @app.get(oauth2_redirect_url, include_in_schema=False)
        async def swagger_ui_redirect() -> HTMLResponse:
            return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )


def install_front_page(app: FastAPI, to: str) -> None:
    """``GET /`` redirects to ``to`` (the console, or these docs when it is off), rather than a 404."""

    @app.get("/", include_in_schema=False)
    async def front_page(request: Request) -> RedirectResponse:
        return RedirectResponse(f"{request.scope.get('root_path', '')}{to}", status_code=302)
