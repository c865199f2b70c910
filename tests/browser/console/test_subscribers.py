"""The Subscribers and Topics pages in a real browser, against ``herald serve`` on SQLite and PostgreSQL."""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from tests.browser.console.conftest import ConsoleServer, assert_accessible, assert_keyboard_reachable, screenshot

Console = Callable[[str], Awaitable[Any]]
# An import of a few thousand lines runs for a while on a loaded machine.
IMPORT_TIMEOUT_MS = 120_000


@pytest.fixture
async def api(console_server: ConsoleServer) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"ApiKey {console_server.api_key}"}
    async with httpx.AsyncClient(base_url=console_server.url, headers=headers, timeout=30) as client:
        yield client


async def test_search_and_a_subscribers_page(console: Console, api: httpx.AsyncClient, axe_script: Any) -> None:
    tag = secrets.token_hex(3)
    people = [
        {"subscriberId": f"ada-{tag}", "email": f"ada-{tag}@example.com", "firstName": "Ada", "lastName": "Lovelace", "phone": "+447700900123", "locale": "en-GB"},
        {"subscriberId": f"grace-{tag}", "email": f"grace-{tag}@example.com", "firstName": "Grace", "lastName": "Hopper"},
    ]
    assert (await api.post("/v1/subscribers/bulk", json={"subscribers": people})).status_code == 201
    assert (await api.patch(f"/v1/subscribers/ada-{tag}/online-status", json={"isOnline": True})).status_code == 200
    page = await console("viewer")
    await page.get_by_role("navigation", name="Console").get_by_role("link", name="Subscribers").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Subscribers")
    await page.get_by_label("Search").fill(f"ada-{tag}")
    await page.get_by_role("button", name="Search").click()
    await expect(page).to_have_url(re.compile(rf"search=ada-{tag}"))
    rows = page.get_by_role("table").get_by_role("row")
    await expect(rows).to_have_count(2)
    await expect(page.get_by_role("link", name=f"ada-{tag}")).to_be_visible()
    await expect(page.get_by_role("link", name=f"grace-{tag}")).to_have_count(0)
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await page.get_by_label("Search").fill("Grace Hop")
    await page.get_by_role("button", name="Search").click()
    await expect(page.get_by_role("link", name=f"grace-{tag}")).to_be_visible()
    await screenshot(page, "subscribers")

    await page.get_by_label("Search").fill(f"ada-{tag}")
    await page.get_by_role("button", name="Search").click()
    await page.get_by_role("link", name=f"ada-{tag}").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Subscriber ada-{tag}")
    for text in (f"ada-{tag}@example.com", "Ada Lovelace", "en-GB", "Online now", "All workflows", "No messages yet"):
        await expect(page.get_by_role("main")).to_contain_text(text)
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "subscriber")


async def test_a_csv_import_shows_its_progress_and_names_refused_lines(
    console: Console, api: httpx.AsyncClient, console_server: ConsoleServer, axe_script: Any
) -> None:
    tag = secrets.token_hex(3)
    lines = [f"imp-{tag}-{n},imp-{tag}-{n}@example.com,First{n},Last,,en,,plan-{n % 3}" for n in range(2500)]
    lines[9] = f"imp-{tag}-bad,not-an-email,,,,,,"
    lines[99] = f",nobody-{tag}@example.com,,,,,,"
    content = "subscriberId,email,firstName,lastName,phone,locale,avatar,data.plan\n" + "\n".join(lines) + "\n"
    author = await console("author")
    await author.goto("/console/subscribers")
    await author.get_by_role("link", name="Import subscribers from a CSV file").click()
    await expect(author.get_by_role("heading", level=1)).to_have_text("Import subscribers")
    await assert_accessible(author)
    await assert_keyboard_reachable(author)
    await author.locator('input[type="file"][name="file"]').set_input_files(
        {"name": "people.csv", "mimeType": "text/csv", "buffer": content.encode()}
    )
    await author.get_by_role("button", name="Import").click()
    await expect(author).to_have_url(re.compile(r"/console/subscribers/import/[A-Za-z0-9]+$"))
    await expect(author.get_by_role("progressbar", name="Lines imported")).to_be_visible()
    # The page follows the import by its events, without a reload, to the end.
    await expect(author.locator("#import-status")).to_have_attribute("data-import-finished", "yes", timeout=IMPORT_TIMEOUT_MS)
    await expect(author.get_by_text("Import complete")).to_be_visible()
    await expect(author.locator("#import-created")).to_have_text("2498")
    await expect(author.locator("#import-refused")).to_have_text("2")
    await expect(author.get_by_role("row", name=re.compile(r"Line 11 .*must be an email address"))).to_be_visible()
    await expect(author.get_by_role("row", name=re.compile(r"Line 101 .*subscriberId is empty"))).to_be_visible()
    await assert_accessible(author)
    await screenshot(author, "import")
    stored = await api.get(f"/v1/subscribers/imp-{tag}-7")
    assert stored.json()["data"]["data"] == {"plan": "plan-1"}

    # A viewer sees the imports, not the form.
    viewer = await console("viewer")
    await viewer.goto("/console/subscribers/import")
    await expect(viewer.get_by_role("link", name="people.csv").first).to_be_visible()
    await expect(viewer.locator('input[type="file"]')).to_have_count(0)
    await expect(viewer.get_by_role("button", name="Import")).to_have_count(0)


async def test_topics_members_added_and_removed(console: Console, api: httpx.AsyncClient, axe_script: Any) -> None:
    tag = secrets.token_hex(3)
    ids = [f"top-{tag}-{n}" for n in range(3)]
    assert (await api.post("/v1/subscribers/bulk", json={"subscribers": [{"subscriberId": i} for i in ids]})).status_code == 201
    author = await console("author")
    await author.goto("/console/topics")
    await author.get_by_label("Key").fill(f"club-{tag}")
    await author.get_by_label("Name", exact=True).fill("Book club")
    await author.get_by_role("button", name="Create topic").click()
    await expect(author.get_by_role("heading", level=1)).to_have_text(f"Topic club-{tag}")
    await author.get_by_label("subscriberIds").fill(f"{ids[0]}, {ids[1]}\n{ids[2]} ghost-{tag}")
    await author.get_by_role("button", name="Add to topic").click()
    await expect(author.get_by_role("alert")).to_contain_text(f"ghost-{tag}")
    for subscriber_id in ids:
        await expect(author.get_by_role("link", name=subscriber_id)).to_be_visible()
    await assert_accessible(author)
    await assert_keyboard_reachable(author)
    author.once("dialog", lambda dialog: dialog.accept())
    await author.get_by_role("button", name=f"Remove {ids[1]}").click()
    await expect(author.get_by_role("status")).to_contain_text(f"{ids[1]} removed")
    await expect(author.get_by_role("link", name=ids[1])).to_have_count(0)
    members = (await api.get(f"/v1/topics/club-{tag}")).json()["data"]["subscribers"]
    assert members == [ids[0], ids[2]]
    await author.goto("/console/topics")
    await expect(author.get_by_role("row", name=re.compile(rf"club-{tag} Book club 2"))).to_be_visible()
    await assert_accessible(author)
    await screenshot(author, "topics")

    viewer = await console("viewer")
    await viewer.goto(f"/console/topics/club-{tag}")
    await expect(viewer.get_by_role("link", name=ids[0])).to_be_visible()
    await expect(viewer.get_by_role("button", name=re.compile("Remove"))).to_have_count(0)
    await expect(viewer.get_by_label("subscriberIds")).to_have_count(0)
