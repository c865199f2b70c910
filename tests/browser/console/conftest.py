"""Browser tests of the console: Playwright driving Debian's Chromium against a real ``herald serve``.

For the page engineers, the pieces to reuse:

- ``console_server`` (session): ``herald serve`` on SQLite and on PostgreSQL
  (each test runs on both), bootstrapped; ``.url``, ``.api_key`` (Development),
  ``.organization_id``, ``.environments``; ``await console_server.add_member(role)``.
- ``console``: ``page = await console("admin")`` signs a new member of that
  role in through the sign-in page and returns the Playwright page, on the
  landing page (Activity). Every request to another host fails the test.
- ``new_page``: ``page = await new_page()``: a fresh browser page (no one signed in).
  A script error or a CSP violation in the browser's console fails the test, but
  for the texts a test adds to ``page.expected_errors`` (what it provokes on purpose).
- :func:`assert_accessible`: ``await assert_accessible(page)`` runs axe-core
  (tests/browser/package.json) on the page and fails on any serious or
  critical violation, naming each.
- :func:`assert_keyboard_reachable`: every link, button, input and select of
  the page gets the focus by Tab alone.
- ``api``: an httpx client of the server's API, as its Development environment;
  ``smtp``: an SMTP server on loopback (tests/fixtures/peers.SmtpPeer) for a module's tests.
- :func:`screenshot`: ``await screenshot(page, "members")`` writes
  docs/images/console-members.png, only when ``HERALD_SCREENSHOTS=1``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from herald.kit.db import create_engine, create_sessionmaker
from herald.members.policy import CliActor
from herald.members.service import add_member
from herald.models import Member
from tests.browser.conftest import HERE as BROWSER_DIR
from tests.browser.conftest import missing, npm_packages_current
from tests.fixtures import stores
from tests.fixtures.console import PASSWORD, unique_email
from tests.fixtures.peers import SmtpPeer
from tests.fixtures.processes import REPO_ROOT, HeraldProcesses

AXE = BROWSER_DIR / "node_modules" / "axe-core" / "axe.min.js"
# Where pages load axe-core from in the tests (answered by the browser context, see new_page).
AXE_PATH = "/console/static/__tests__/axe.min.js"
SCREENSHOTS = REPO_ROOT / "docs" / "images"
LANDING = re.compile(r"/console/(activity|members)$")
# What axe-core must not find on any page (its "moderate" and "minor" findings are reported, not failed).
FAILING_IMPACTS = ("serious", "critical")


@dataclass
class ConsoleServer:
    url: str
    database_url: str
    api_key: str
    organization_id: str
    environments: dict[str, str]
    launcher: HeraldProcesses
    kind: str

    async def add_member(self, role: str, *, email: str | None = None, password: str = PASSWORD) -> Member:
        """A member of the server's organization, written to its store."""
        engine = create_engine(self.database_url, pool_size=1)
        try:
            async with create_sessionmaker(engine)() as session:
                member = await add_member(
                    session,
                    CliActor(self.organization_id),
                    self.organization_id,
                    email=email or unique_email(role),
                    role=role,
                    password=password,
                )
                await session.commit()
                return member
        finally:
            await engine.dispose()


@pytest.fixture(scope="session")
def axe_script() -> Path:
    """axe-core from the npm registry, as the lock pins it."""
    npm = shutil.which("npm")
    if npm is None:
        missing("npm (apt-get install nodejs npm)")
    if not npm_packages_current() or not AXE.exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=BROWSER_DIR, check=True, timeout=300)
    return AXE


@asynccontextmanager
async def running_console_server(kind: str, root: Path, **env: str) -> AsyncIterator[ConsoleServer]:
    """``herald serve`` (with its worker) on a fresh store of ``kind`` (sqlite or postgres), bootstrapped; ``env`` its settings."""
    database: stores.TestDatabase | None = None
    if kind == "postgres":
        if not await stores.postgres_reachable():
            pytest.skip("PostgreSQL is not reachable (set HERALD_TEST_POSTGRES_URL)")
        database = await stores.create_postgres_database()
        url = database.url
    else:
        url = f"sqlite:///{root / 'herald.db'}"
    launcher = HeraldProcesses(database_url=url, data_dir=root / "data", log_dir=root / "logs")
    try:
        launcher.migrate()
        boot = launcher.bootstrap()
        # A loaded machine (two cores shared) can take long to import and start a server.
        process = await launcher.serve(worker=True, timeout=120, **env)
        assert process.url is not None
        development = next(env for env in boot["environments"] if env["name"] == "Development")
        yield ConsoleServer(
            url=process.url,
            database_url=url,
            api_key=development["apiKey"],
            organization_id=boot["organizationId"],
            environments={env["name"]: env["_id"] for env in boot["environments"]},
            launcher=launcher,
            kind=kind,
        )
    finally:
        launcher.stop_all()
        if database is not None:
            await database.drop()


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
async def console_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ConsoleServer]:
    """``herald serve`` (with its worker) on a fresh store, bootstrapped."""
    async with running_console_server(request.param, tmp_path_factory.mktemp(f"console-{request.param}")) as server:
        yield server


@pytest.fixture(scope="module")
def smtp() -> Iterator[SmtpPeer]:
    server = SmtpPeer().start()
    yield server
    server.stop()


@pytest.fixture
async def api(console_server: ConsoleServer) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"ApiKey {console_server.api_key}"}
    async with httpx.AsyncClient(base_url=console_server.url, headers=headers, timeout=30) as client:
        yield client


@dataclass
class Pages:
    """The browser contexts a test opened, and what they tried to reach outside the server."""

    outside: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    contexts: list[Any] = field(default_factory=list)
    # Texts of console errors a test provokes on purpose (a script refused in a sandboxed email).
    expected: list[str] = field(default_factory=list)


@pytest.fixture
async def new_page(browser: Any, console_server: ConsoleServer) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    """``await new_page()``: a page in a fresh browser context that may reach the console's server only."""
    pages = Pages()
    allowed = urlsplit(console_server.url).netloc

    async def opener() -> Any:
        context = await browser.new_context(viewport={"width": 1280, "height": 900}, base_url=console_server.url)
        pages.contexts.append(context)

        async def guard(route: Any) -> None:
            if urlsplit(route.request.url).netloc == allowed or route.request.url.startswith("data:"):
                await route.continue_()
            else:
                pages.outside.append(route.request.url)
                await route.abort()

        await context.route("**/*", guard)
        # axe-core, served to the page from its own origin by the browser itself: the console's CSP refuses
        # inline scripts, which is what add_script_tag(path=...) would insert (and bypassing the CSP would
        # hide a page's own violations).
        await context.route(f"**{AXE_PATH}", lambda route: route.fulfill(path=str(AXE), content_type="text/javascript"))
        page = await context.new_page()
        # A CSP violation or a script error shows up in the console: none is expected.
        page.on("console", lambda message: pages.errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: pages.errors.append(str(error)))
        page.expected_errors = pages.expected  # a test appends what it provokes on purpose
        return page

    yield opener
    for context in pages.contexts:
        await context.close()
    assert pages.outside == [], f"the console tried to reach other hosts: {pages.outside}"
    unexpected = [
        error
        for error in pages.errors
        if "status of 4" not in error and not any(text in error for text in pages.expected)
    ]
    assert unexpected == [], f"errors in the browser's console: {unexpected}"


async def sign_in(page: Any, email: str, password: str = PASSWORD) -> None:
    await page.goto("/console/sign-in")
    await page.get_by_label("Email").fill(email)
    await page.get_by_label("Password").fill(password)
    await page.get_by_role("button", name="Sign in").click()


@pytest.fixture
def console(new_page: Callable[[], Awaitable[Any]], console_server: ConsoleServer) -> Callable[[str], Awaitable[Any]]:
    """``page = await console("viewer")``: a new member of that role, signed in through the sign-in page."""

    async def signed_in_as(role: str) -> Any:
        member = await console_server.add_member(role)
        page = await new_page()
        await sign_in(page, member.email)
        # The landing: Activity (herald.console.routes.home), or Members where Activity is not built.
        await page.wait_for_url(LANDING)
        page.member = member  # type: ignore[attr-defined]
        return page

    return signed_in_as


async def assert_accessible(page: Any) -> None:
    """No serious or critical axe-core violation on the page as it is now (a page of ``new_page``/``console``)."""
    await page.add_script_tag(url=AXE_PATH)
    result = await page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    failing = [
        f"{violation['id']} ({violation['impact']}): {violation['help']} at "
        + ", ".join(" ".join(node["target"]) for node in violation["nodes"][:5])
        for violation in result["violations"]
        if violation["impact"] in FAILING_IMPACTS
    ]
    assert failing == [], f"axe-core on {page.url}:\n" + "\n".join(failing)


async def assert_keyboard_reachable(page: Any, limit: int = 400) -> None:
    """Tab from the top of the page reaches every visible, enabled link, button, input and select."""
    # The page's deferred script hides its no-script controls (``.js .no-js-only``): a page still loading
    # would list them as visible and then hide them before Tab reaches them.
    await page.wait_for_load_state("load")
    controls = await page.evaluate(
        """() => Array.from(document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex="-1"])'))
            .filter(el => !el.disabled && el.getClientRects().length > 0)
            .map((el, index) => { el.dataset.reachIndex = String(index); return index; })"""
    )
    reached: set[str] = set()
    # Start before the first element of the page (a focusable point that is not itself in the Tab order).
    await page.evaluate(
        """() => { const start = document.createElement('span'); start.tabIndex = -1;
                   document.body.prepend(start); start.focus(); }"""
    )
    for _ in range(limit):
        await page.keyboard.press("Tab")
        index = await page.evaluate("() => document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.reachIndex || null : null")
        if index is not None:
            reached.add(index)
        if len(reached) == len(controls):
            break
    missed = await page.evaluate(
        "(reached) => Array.from(document.querySelectorAll('[data-reach-index]')).filter(el => !reached.includes(el.dataset.reachIndex)).map(el => el.outerHTML.slice(0, 120))",
        sorted(reached),
    )
    assert missed == [], f"not reachable by Tab on {page.url}: {missed}"


async def screenshot(page: Any, name: str) -> None:
    """docs/images/console-<name>.png, when HERALD_SCREENSHOTS=1 (never on an ordinary run)."""
    if os.environ.get("HERALD_SCREENSHOTS") != "1":
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"console-{name}.png"), full_page=True)
