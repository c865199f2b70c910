"""Browser tests: Novu's own ``<Inbox />`` (@novu/js, unmodified) in headless Chromium against Herald.

The set-up installs the npm packages of ``package.json`` (``npm ci``, when
``node_modules`` is missing or older than the lock) and bundles @novu/js with
esbuild into ``build/``. A real ``herald serve`` (SQLite, in-process worker)
answers the API; the page comes from a tiny server on another port, so every
call the Inbox makes to Herald is cross-origin. Every request to a host other
than these two is refused and recorded, and each test asserts there was none.

Without Chromium (``apt-get install chromium``) or Node.js (``apt-get install
nodejs npm``) the tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from tests.fixtures.processes import HeraldProcesses
from tests.fixtures.server import free_port

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
EXAMPLE_PAGE = HERE.parents[1] / "examples" / "inbox" / "index.html"
BUNDLE = BUILD / "novu.js"
CHROMIUM = Path(os.environ.get("HERALD_TEST_CHROMIUM", "/usr/bin/chromium"))


def missing(what: str) -> None:
    """Skip on a developer machine; fail under CI, where the set-up must have installed it."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"browser tests need {what} (CI=true: not skipping)")
    pytest.skip(f"browser tests need {what}")


def npm_packages_current() -> bool:
    installed = HERE / "node_modules" / ".package-lock.json"
    lock = HERE / "package-lock.json"
    return installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime


@pytest.fixture(scope="session")
def novu_bundle() -> Path:
    """@novu/js and @novu/js/ui, bundled for the browser from the packages the lock pins."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        missing("Node.js and npm (apt-get install nodejs npm)")
    if not npm_packages_current():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True, timeout=300)
    BUILD.mkdir(exist_ok=True)
    subprocess.run(
        [
            str(HERE / "node_modules" / ".bin" / "esbuild"),
            "entry.mjs",
            "--bundle",
            "--format=esm",
            "--platform=browser",
            "--target=es2020",
            f"--outfile={BUNDLE}",
            "--log-level=warning",
        ],
        cwd=HERE,
        check=True,
        timeout=120,
    )
    return BUNDLE


class PageServer:
    """Serves the test page and the bundle on a loopback port of its own (another origin than Herald)."""

    def __init__(self, files: dict[str, tuple[Path, str]]) -> None:
        self.port = free_port()
        routes = files

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                entry = routes.get(urlsplit(self.path).path)
                if entry is None:
                    self.send_error(404)
                    return
                body = entry[0].read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", entry[1])
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> PageServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def page_server(novu_bundle: Path) -> Iterator[PageServer]:
    files = {
        # The example page docs/inbox.md starts with: the tests load it as a reader would.
        "/": (EXAMPLE_PAGE, "text/html; charset=utf-8"),
        "/novu.js": (novu_bundle, "text/javascript; charset=utf-8"),
    }
    with PageServer(files) as server:
        yield server


@dataclass
class HeraldServer:
    url: str
    api_key: str
    application_identifier: str
    launcher: HeraldProcesses

    def api(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers={"Authorization": f"ApiKey {self.api_key}"}, timeout=30.0)


@pytest.fixture(scope="session")
async def herald_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HeraldServer]:
    """``herald serve`` with its worker, on a SQLite file, with a bootstrapped organization."""
    root = tmp_path_factory.mktemp("herald-browser")
    launcher = HeraldProcesses(
        database_url=f"sqlite+aiosqlite:///{root / 'herald.db'}", data_dir=root / "data", log_dir=root / "logs"
    )
    try:
        launcher.migrate()
        boot = launcher.bootstrap()
        development = next(env for env in boot["environments"] if env["name"] == "Development")
        process = await launcher.serve(worker=True)
        assert process.url is not None
        yield HeraldServer(
            url=process.url,
            api_key=development["apiKey"],
            application_identifier=development["applicationIdentifier"],
            launcher=launcher,
        )
    finally:
        launcher.stop_all()


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    if not CHROMIUM.exists():
        missing(f"Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield chromium
        finally:
            await chromium.close()


def without_query(url: str) -> str:
    """A URL to report, without its query (where a socket's subscriber token travels)."""
    return urlsplit(url)._replace(query="").geturl()


@dataclass
class InboxPage:
    """A browser page on the test page, with what it tried to reach outside loopback."""

    page: Any
    herald: HeraldServer
    subscriber_id: str
    outside: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)

    def url(self, page_server: PageServer) -> str:
        query = {
            "applicationIdentifier": self.herald.application_identifier,
            "subscriberId": self.subscriber_id,
            "apiUrl": self.herald.url,
            "socketUrl": self.herald.url,
        }
        return f"{page_server.origin}/?{urlencode(query)}"


@pytest.fixture
async def open_page(browser: Any, page_server: PageServer) -> AsyncIterator[Any]:
    """Opens the page for a subscriber of a Herald; after the test, checks nothing outside loopback was requested.

    The page may reach its own server and that Herald's address (``apiUrl`` and ``socketUrl``), nothing else.
    """
    contexts: list[Any] = []
    pages: list[InboxPage] = []

    async def opener(herald: HeraldServer, subscriber_id: str) -> InboxPage:
        allowed = {urlsplit(page_server.origin).netloc, urlsplit(herald.url).netloc}
        context = await browser.new_context(viewport={"width": 520, "height": 640}, device_scale_factor=1)
        contexts.append(context)
        page = await context.new_page()
        inbox = InboxPage(page=page, herald=herald, subscriber_id=subscriber_id)
        pages.append(inbox)

        async def guard(route: Any) -> None:
            if urlsplit(route.request.url).netloc in allowed or route.request.url.startswith("data:"):
                await route.continue_()
            else:
                inbox.outside.append(without_query(route.request.url))
                await route.abort()

        async def guard_socket(socket: Any) -> None:
            if urlsplit(socket.url).netloc in allowed:
                socket.connect_to_server()
            else:
                inbox.outside.append(without_query(socket.url))
                await socket.close()

        await context.route("**/*", guard)
        await context.route_web_socket("**/*", guard_socket)
        page.on("console", lambda message: inbox.console.append(f"{message.type}: {message.text}"))
        await page.goto(inbox.url(page_server))
        return inbox

    yield opener
    for context in contexts:
        await context.close()
    for inbox in pages:
        assert inbox.outside == [], f"the page tried to reach hosts outside loopback: {inbox.outside}"


@pytest.fixture
def open_inbox(open_page: Any, herald_server: HeraldServer) -> Any:
    """Opens the page for a subscriber of ``herald_server`` (SQLite, in-process worker)."""

    async def opener(subscriber_id: str) -> InboxPage:
        return await open_page(herald_server, subscriber_id)

    return opener
