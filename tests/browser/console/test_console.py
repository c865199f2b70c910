"""The console in a real browser, against a real ``herald serve`` on SQLite and on PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from playwright.async_api import expect

from herald.kit.db import create_engine, create_sessionmaker
from herald.members.service import setup_link
from herald.organizations.service import create_organization
from tests.browser.console.conftest import (
    LANDING,
    ConsoleServer,
    assert_accessible,
    assert_keyboard_reachable,
    screenshot,
    sign_in,
)
from tests.fixtures.console import PASSWORD, unique_email

NewPage = Callable[[], Awaitable[Any]]
Console = Callable[[str], Awaitable[Any]]
NAV = ["Activity", "Workflows", "Subscribers", "Topics", "Integrations", "API keys", "Environments", "Webhooks", "Analytics", "Audit log", "Members"]


async def test_sign_in_the_nav_and_sign_out(console_server: ConsoleServer, new_page: NewPage, axe_script: Any) -> None:
    member = await console_server.add_member("admin")
    page = await new_page()
    await page.goto("/console/members")
    await expect(page).to_have_url(re.compile(r"/console/sign-in\?next=/console/members$"))
    await expect(page).to_have_title("Sign in - Herald")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "sign-in")

    await page.get_by_label("Email").fill(member.email)
    await page.get_by_label("Password").fill("not my password")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("Invalid email or password")
    await expect(page.get_by_label("Email")).to_have_attribute("aria-invalid", "true")
    await assert_accessible(page)

    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(re.compile(r"/console/members$"))
    await expect(page.get_by_role("heading", level=1)).to_have_text("Members")
    nav = page.get_by_role("navigation", name="Console")
    await expect(nav.get_by_role("link")).to_have_text(NAV)
    await expect(nav.get_by_role("link", name="Members")).to_have_attribute("aria-current", "page")
    await expect(page.get_by_label("Environment")).to_have_value(console_server.environments["Development"])
    await assert_accessible(page)
    await assert_keyboard_reachable(page)

    # The Environment select submits itself and the choice stays.
    await page.get_by_label("Environment").select_option(label="Production")
    await expect(page.get_by_role("status")).to_contain_text("Showing Production")
    await page.goto("/console/audit")
    await expect(page.get_by_label("Environment")).to_have_value(console_server.environments["Production"])

    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url(re.compile(r"/console/sign-in$"))
    await expect(page.get_by_role("status")).to_contain_text("You are signed out")
    await page.goto("/console/members")
    await expect(page).to_have_url(re.compile(r"/console/sign-in"))


async def test_five_failures_say_too_many_attempts(console_server: ConsoleServer, new_page: NewPage) -> None:
    member = await console_server.add_member("viewer")
    page = await new_page()
    for _ in range(5):
        await sign_in(page, member.email, "a wrong password")
        await expect(page.get_by_role("alert")).to_contain_text("Invalid email or password")
    await sign_in(page, member.email)
    await expect(page.get_by_role("alert")).to_contain_text("Too many attempts")
    await expect(page).to_have_url(re.compile(r"/console/sign-in$"))


async def test_the_first_owners_link(console_server: ConsoleServer, new_page: NewPage, axe_script: Any) -> None:
    # A fresh organization of the same server: the link is made while it has no member.
    engine = create_engine(console_server.database_url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session:
            organization = (await create_organization(session)).organization
            token = await setup_link(session, organization.id)
            await session.commit()
    finally:
        await engine.dispose()
    page = await new_page()
    await page.goto(f"/console/setup/{token}")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Create the first owner")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "setup")
    email = unique_email("owner")
    await page.get_by_label("Email").fill(email)
    await page.get_by_label("Password").fill("short")
    await page.get_by_role("button", name="Create owner").click()
    await expect(page.get_by_role("alert")).to_contain_text("at least 10 characters")
    await assert_accessible(page)
    await page.get_by_label("Password").fill("the first owner's password")
    await page.get_by_role("button", name="Create owner").click()
    await expect(page).to_have_url(LANDING)
    await page.goto("/console/members")
    await expect(page.get_by_role("row", name=re.compile(re.escape(email)))).to_contain_text("owner")
    await page.goto(f"/console/setup/{token}")
    await expect(page.get_by_role("heading", level=1)).to_have_text("This link is not valid")


async def test_invite_join_and_change_a_role(console: Console, new_page: NewPage, axe_script: Any) -> None:
    owner = await console("owner")
    await owner.goto("/console/members")
    email = unique_email("joiner")
    await owner.get_by_label("Email").fill(email)
    await owner.get_by_label("Role", exact=True).select_option("author")
    await owner.get_by_role("button", name="Invite").click()
    link = owner.locator("#invite-link")
    await expect(link).to_contain_text("/console/invite/")
    await assert_accessible(owner)
    await screenshot(owner, "members")
    url = (await link.text_content()).strip()

    joiner = await new_page()
    await joiner.goto(url)
    await expect(joiner.get_by_role("heading", level=1)).to_have_text("Join Herald")
    await assert_accessible(joiner)
    await assert_keyboard_reachable(joiner)
    await joiner.get_by_label("Password").fill("my own long password")
    await joiner.get_by_role("button", name="Join").click()
    await expect(joiner).to_have_url(LANDING)
    await joiner.goto("/console/members")
    # An author sees the members but no control to change them.
    await expect(joiner.get_by_role("button", name="Invite")).to_have_count(0)
    await expect(joiner.get_by_role("button", name=re.compile("^Change role"))).to_have_count(0)

    await owner.goto("/console/members")
    row = owner.get_by_role("row", name=re.compile(re.escape(email)))
    await expect(row).to_contain_text("author")
    await row.get_by_label(f"Role of {email}").select_option("viewer")
    await row.get_by_role("button", name=re.compile("^Change role")).click()
    await expect(owner.get_by_role("status")).to_contain_text(f"{email} is now viewer")
    await expect(owner.get_by_role("row", name=re.compile(re.escape(email)))).to_contain_text("viewer")
    await assert_keyboard_reachable(owner)

    # Used once: the link is no more.
    again = await new_page()
    await again.goto(url)
    await expect(again.get_by_role("heading", level=1)).to_have_text("This link is not valid")
    await assert_accessible(again)


async def test_the_audit_log_page(console: Console, console_server: ConsoleServer, axe_script: Any) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=console_server.url, headers={"Authorization": f"ApiKey {console_server.api_key}"}) as api:
        created = await api.post("/v1/subscribers", json={"subscriberId": "audited-in-browser", "email": "a@example.com"})
        assert created.status_code == 201
        assert (await api.put("/v1/subscribers/audited-in-browser", json={"firstName": "Ann"})).status_code == 200
    page = await console("viewer")
    await page.get_by_role("navigation", name="Console").get_by_role("link", name="Audit log").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Audit log")
    await expect(page.get_by_role("row", name=re.compile("subscriber.updated"))).to_contain_text("audited-in-browser")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "audit-log")
    await page.get_by_label("Action").fill("member.signed_in")
    await page.get_by_role("button", name="Filter").click()
    await expect(page.get_by_role("row", name=re.compile("subscriber.updated"))).to_have_count(0)
    await expect(page.get_by_role("row", name=re.compile("member.signed_in")).first).to_contain_text(page.member.email)


async def test_the_account_and_error_pages_are_accessible(console: Console, axe_script: Any) -> None:
    page = await console("author")
    await page.goto("/console/account")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Your account")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await page.get_by_label("Current password").fill("not it")
    await page.get_by_label("New password").fill("a brand new password")
    await page.get_by_role("button", name="Change password").click()
    await expect(page.get_by_role("alert")).to_contain_text("The current password is not right")
    await expect(page.get_by_role("alert")).to_be_focused()
    await assert_accessible(page)
    response = await page.goto("/console/no-such-page")
    assert response is not None and response.status == 404
    await expect(page.get_by_role("heading", level=1)).to_have_text("Page not found")
    await assert_accessible(page)
