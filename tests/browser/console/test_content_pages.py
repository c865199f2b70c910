"""Layouts, Translations, Variables and Publish in a real browser, against ``herald serve``, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from herald.kit.db import create_engine, create_sessionmaker
from herald.translations.repository import TranslationRepository
from tests.browser.console.conftest import ConsoleServer, assert_accessible, assert_keyboard_reachable, screenshot
from tests.fixtures.builders import unique

Console = Callable[[str], Awaitable[Any]]
LAYOUT = "<html><body><header>Acme</header>{{{body}}}<footer>Bye {{ subscriber.firstName }}</footer></body></html>"
SECRET = "sk_live_browser_0123456789abcdef"


@pytest.fixture
async def api(console_server: ConsoleServer) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"ApiKey {console_server.api_key}"}
    async with httpx.AsyncClient(base_url=console_server.url, headers=headers, timeout=30) as client:
        yield client


async def test_a_layout_is_made_previewed_sandboxed_and_refused_when_broken(console: Console, console_server: ConsoleServer) -> None:
    page = await console("author")
    await page.goto(f"{console_server.url}/console/layouts/new")
    await page.get_by_label("Name", exact=True).fill("Brand")
    await page.get_by_label("Identifier").fill(unique("brand"))
    await page.get_by_label("Content", exact=True).fill(LAYOUT)
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("heading", name="Layout Brand")).to_be_visible()
    frame = page.locator("iframe.email-preview")
    await expect(frame).to_have_attribute("sandbox", "")
    inside = page.frame_locator("iframe.email-preview")
    await expect(inside.get_by_text("Hello Ada")).to_be_visible()
    await expect(inside.get_by_text("Bye Ada")).to_be_visible()
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "layouts")

    await page.get_by_label("Content", exact=True).fill(LAYOUT.replace("firstName }}", "firstName | shout }}"))
    await page.get_by_role("button", name="Preview").click()
    preview = page.get_by_role("region", name="Preview")
    await expect(preview).to_contain_text("Line 1, column")
    await expect(preview).to_contain_text("unknown filter 'shout'")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("alert")).to_contain_text("unknown filter 'shout'")
    await assert_accessible(page)
    await page.goto(f"{console_server.url}/console/layouts")
    await expect(page.get_by_role("row", name="Brand")).to_be_visible()
    await assert_accessible(page)


async def test_variables_show_values_never_a_secret(console: Console, console_server: ConsoleServer, api: httpx.AsyncClient) -> None:
    development = console_server.environments["Development"]
    key = unique("API_TOKEN").replace("-", "_")
    body = {"key": key, "isSecret": True, "values": [{"_environmentId": development, "value": SECRET}]}
    assert (await api.post("/v1/environment-variables", json=body)).status_code == 200
    user = await api.post(
        "/v1/workflows",
        json={"name": unique("Uses token"), "steps": [{"name": "sms", "template": {"type": "sms", "content": "{{env." + key + "}}"}}]},
    )
    assert user.status_code == 201, user.text
    page = await console("viewer")
    await page.goto(f"{console_server.url}/console/variables")
    await expect(page.get_by_role("row", name=key)).to_contain_text("Set")
    # Where it is used: the workflow whose template reads it.
    await expect(page.get_by_role("row", name=key).get_by_role("link", name=user.json()["data"]["name"])).to_be_visible()
    assert SECRET not in await page.content()
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "variables")


async def test_translations_page_reads_and_saves_keys(console: Console, console_server: ConsoleServer, api: httpx.AsyncClient) -> None:
    made = await api.post(
        "/v2/workflows",
        json={"name": "Greeting", "workflowId": unique("greeting"), "isTranslationEnabled": True,
              "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "{{ t.hello }}"}}]},
    )
    assert made.status_code == 201, made.text
    identifier = made.json()["data"]["workflowId"]
    # The organization's locales (set with Production's own key over the API): written to the store here.
    engine = create_engine(console_server.database_url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session:
            await TranslationRepository(session).put_locales(console_server.organization_id, "en_US", ["fr_FR"])
            await session.commit()
    finally:
        await engine.dispose()
    page = await console("author")
    await page.goto(f"{console_server.url}/console/translations")
    await page.get_by_label("Workflow identifier").fill(identifier)
    await page.get_by_role("button", name="Open").click()
    await page.get_by_label("Keys of en_US (JSON)").fill('{"hello": "Hello", "bye": "Bye"}')
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator(".flash")).to_contain_text("en_US saved")
    # A locale uploaded as its file; the keys it lacks are told; a locale's keys download as JSON.
    await page.get_by_label("Translation files").set_input_files(
        files=[{"name": "fr_FR.json", "mimeType": "application/json", "buffer": b'{"hello": "Bonjour"}'}]
    )
    await page.get_by_role("button", name="Upload").click()
    await expect(page.get_by_role("row", name=re.compile(r"^fr_FR"))).to_contain_text("1: bye")
    async with page.expect_download() as download_info:
        await page.get_by_role("link", name="en_US.json").click()
    download = await download_info.value
    assert download.suggested_filename == "en_US.json"
    assert json.loads(Path(await download.path()).read_text()) == {"hello": "Hello", "bye": "Bye"}
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "translations")


async def test_publish_brings_the_chosen_change_and_only_it(console: Console, console_server: ConsoleServer, api: httpx.AsyncClient) -> None:
    names = [unique("Chosen"), unique("Left")]
    for name in names:
        body = {"name": name, "steps": [{"name": "inbox", "template": {"type": "in_app", "content": "Hi"}}]}
        assert (await api.post("/v1/workflows", json=body)).status_code == 201
    page = await console("admin")
    page.on("dialog", lambda dialog: dialog.accept())
    await page.goto(f"{console_server.url}/console/environments/publish")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "publish")
    await page.get_by_role("checkbox", name=names[0]).check()
    await page.get_by_role("button", name="Publish").click()
    await expect(page.get_by_text("Published 1 of 1 to Production")).to_be_visible()
    # The chosen one is in Production now; the other still waits.
    await expect(page.get_by_role("checkbox", name=names[0])).to_have_count(0)
    await expect(page.get_by_role("checkbox", name=names[1])).to_have_count(1)
