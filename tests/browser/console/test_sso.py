"""Single sign-on in a real browser: ``herald serve`` with HERALD_OIDC_* and an identity provider on loopback.

The whole flow as a person sees it: the sign-in page's "Sign in with SSO", the
identity provider (tests/fixtures/oidc.py, where they are signed in already),
and back on the page they asked for, as a new member with the role the
provider gives; a refusal at the provider brings them back to the sign-in page
saying so. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.async_api import expect

from tests.browser.console.conftest import (
    AXE,
    AXE_PATH,
    ConsoleServer,
    assert_accessible,
    assert_keyboard_reachable,
    running_console_server,
    screenshot,
)
from tests.fixtures.console import unique_email
from tests.fixtures.oidc import CLIENT_ID, CLIENT_SECRET, OidcProvider, running_provider

ROLE_CLAIM = "herald_role"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def sso_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[ConsoleServer, OidcProvider]]:
    with running_provider() as provider:
        async with running_console_server(
            request.param,
            tmp_path_factory.mktemp(f"console-sso-{request.param}"),
            HERALD_OIDC_ISSUER=provider.issuer,
            HERALD_OIDC_CLIENT_ID=CLIENT_ID,
            HERALD_OIDC_CLIENT_SECRET=CLIENT_SECRET,
            HERALD_OIDC_ROLE_CLAIM=ROLE_CLAIM,
        ) as server:
            yield server, provider


async def test_sign_in_with_sso(sso_server: tuple[ConsoleServer, OidcProvider], browser: Any, axe_script: Any) -> None:
    server, provider = sso_server
    email = unique_email("sso-browser")
    provider.sign_in_as(f"browser-{server.kind}", email, name="Sam Single", **{ROLE_CLAIM: "author"})
    provider.deny = ""
    context = await browser.new_context(viewport={"width": 1280, "height": 900}, base_url=server.url)
    allowed = {urlsplit(server.url).netloc, urlsplit(provider.issuer).netloc}
    outside: list[str] = []

    async def guard(route: Any) -> None:
        if urlsplit(route.request.url).netloc in allowed:
            await route.continue_()
        else:
            outside.append(route.request.url)
            await route.abort()

    try:
        await context.route("**/*", guard)
        await context.route(f"**{AXE_PATH}", lambda route: route.fulfill(path=str(AXE), content_type="text/javascript"))
        page = await context.new_page()
        await page.goto("/console/members")
        await expect(page).to_have_url(re.compile(r"/console/sign-in\?next=/console/members$"))
        sso = page.get_by_role("link", name="Sign in with SSO")
        await expect(sso).to_be_visible()
        await assert_accessible(page)
        await assert_keyboard_reachable(page)
        await screenshot(page, "sign-in-sso")

        # To the provider and back, on the page asked for, signed in as a new member with the provider's role.
        await sso.click()
        await expect(page).to_have_url(re.compile(r"/console/members$"))
        await expect(page.get_by_role("heading", level=1)).to_have_text("Members")
        row = page.get_by_role("row", name=re.compile(re.escape(email)))
        await expect(row).to_contain_text("Sam Single")
        await expect(row.get_by_role("cell").nth(1)).to_have_text("author")
        await expect(page.get_by_role("button", name="Sign out")).to_be_visible()

        # The audit log has the sign-in, by SSO.
        await page.goto("/console/audit")
        await page.get_by_label("Action").fill("member.signed_in")
        await page.get_by_role("button", name="Filter").click()
        await expect(page.get_by_role("row", name=re.compile(re.escape(email))).first).to_contain_text("sso")

        # Signed out, and refused at the provider: back on the sign-in page, which says so.
        await page.get_by_role("button", name="Sign out").click()
        await expect(page).to_have_url(re.compile(r"/console/sign-in$"))
        provider.deny = "access_denied"
        await page.get_by_role("link", name="Sign in with SSO").click()
        await expect(page.get_by_role("alert")).to_contain_text("Single sign-on did not sign you in")
        await expect(page.get_by_role("alert")).to_contain_text("access_denied")
        await assert_accessible(page)
        await page.goto("/console/members")
        await expect(page).to_have_url(re.compile(r"/console/sign-in\?next=/console/members$"))
    finally:
        provider.deny = ""
        await context.close()
    assert outside == [], f"the console tried to reach other hosts: {outside}"
