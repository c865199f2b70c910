"""``/docs`` and ``/redoc`` work without internet: every script, style and icon they load is Herald's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi import FastAPI

from herald.app import create_app
from herald.config import load_settings
from tests.conftest import make_client

# Every URL an HTML page loads or links to: src, href, and Swagger UI's own url/spec settings.
LOADED = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|\burl:\s*["']([^"']+)["']|spec-url\s*=\s*["']([^"']+)["']""")


@pytest.fixture
async def docs_app(tmp_path: Path) -> FastAPI:
    # The pages touch no store.
    app = create_app(load_settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'herald.db'}", secret_key="k"))
    yield app
    await app.state.engine.dispose()


@pytest.mark.parametrize(("page", "assets"), [("/docs", 3), ("/redoc", 2)])
async def test_documentation_pages_load_only_what_herald_serves(docs_app: FastAPI, page: str, assets: int) -> None:
    async with make_client(docs_app) as client:
        response = await client.get(page)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        urls = [next(group for group in match.groups() if group) for match in LOADED.finditer(response.text)]
        assert "/openapi.json" in urls
        loaded = [url for url in urls if url != "/openapi.json"]
        assert len(loaded) == assets, urls
        for url in urls:
            # Same origin: a path on this server, not another host (nor a protocol-relative //host).
            assert url.startswith("/") and not url.startswith("//"), url
            answer = await client.get(url)
            assert answer.status_code == 200, url
            assert len(answer.content) > 1000, url
        assert "cdn" not in response.text.lower()
        assert "fonts.googleapis" not in response.text


@pytest.mark.parametrize(("console", "front"), [("on", "/console/"), ("off", "/docs")])
async def test_the_front_page_leads_to_the_console_or_the_docs(tmp_path: Path, console: str, front: str) -> None:
    app = create_app(
        load_settings(
            data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'herald.db'}", secret_key="k", console=console == "on"
        )
    )
    try:
        async with make_client(app) as client:
            response = await client.get("/")
        assert (response.status_code, response.headers["location"]) == (302, front)
    finally:
        await app.state.engine.dispose()
