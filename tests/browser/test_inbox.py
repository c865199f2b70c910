"""Novu's ``<Inbox />`` (@novu/js 3.19, unmodified) in Chromium, against a running Herald.

Each test has a subscriber of its own whose notifications were triggered
through Herald's API (and delivered by its worker) before the page loaded;
what the UI does is checked in Herald's state through its API. Everything
here is REST; test_live.py checks what arrives over Herald's socket.

``HERALD_SCREENSHOTS=docs/images`` writes the screenshots docs/inbox.md shows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import expect

from tests.browser.conftest import HeraldServer, InboxPage
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.fixtures.processes import wait_until

WAIT_MS = 10_000
ORDERS = ("A-1", "A-2")


async def notified(api: httpx.AsyncClient, workflow_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A workflow with an in-app step, a subscriber, and one delivered notification per order.

    The workflows share the environment (and so the preferences panel): each test names its own.
    """
    workflow = await create_workflow(
        api,
        name=workflow_name,
        steps=[
            {
                "name": "inbox",
                "template": {
                    "type": "in_app",
                    "subject": "Order {{payload.order}}",
                    "content": "Your order {{payload.order}} has shipped",
                },
            }
        ],
    )
    subscriber = await create_subscriber(api)
    for order in ORDERS:
        response = await api.post(
            "/v1/events/trigger",
            json={"name": workflow["triggers"][0]["identifier"], "to": subscriber["subscriberId"], "payload": {"order": order}},
        )
        assert response.status_code == 201, response.text

    async def delivered() -> bool:
        return len(await feed(api, subscriber["subscriberId"])) == len(ORDERS)

    await wait_until(delivered, timeout=15, what="the worker to deliver the in-app messages")
    return workflow, subscriber


async def feed(api: httpx.AsyncClient, subscriber_id: str) -> list[dict[str, Any]]:
    response = await api.get(f"/v1/subscribers/{subscriber_id}/notifications/feed")
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def by_subject(api: httpx.AsyncClient, subscriber_id: str) -> dict[str, dict[str, Any]]:
    return {message["subject"]: message for message in await feed(api, subscriber_id)}


async def screenshot(inbox: InboxPage, name: str, height: int | None = None) -> None:
    folder = os.environ.get("HERALD_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        clip = {"x": 0, "y": 0, "width": inbox.page.viewport_size["width"], "height": height} if height else None
        await inbox.page.screenshot(path=str(Path(folder) / f"{name}.png"), animations="disabled", clip=clip)


async def open_popover(inbox: InboxPage) -> None:
    await inbox.page.get_by_test_id("bell").click()
    await expect(inbox.page.locator(".nv-notification")).to_have_count(len(ORDERS), timeout=WAIT_MS)


def notification(inbox: InboxPage, subject: str) -> Any:
    return inbox.page.locator(".nv-notification").filter(has_text=subject)


async def test_the_bell_counts_what_was_unread_before_the_page_loaded(herald_server: HeraldServer, open_inbox: Any) -> None:
    async with herald_server.api() as api:
        _, subscriber = await notified(api, "Order shipped")
    inbox = await open_inbox(subscriber["subscriberId"])
    await expect(inbox.page.get_by_test_id("unread-count")).to_have_text(str(len(ORDERS)), timeout=WAIT_MS)
    await screenshot(inbox, "inbox-bell", height=80)


async def test_the_inbox_lists_the_notifications_newest_first_with_their_content(
    herald_server: HeraldServer, open_inbox: Any
) -> None:
    async with herald_server.api() as api:
        _, subscriber = await notified(api, "Order updates")
    inbox = await open_inbox(subscriber["subscriberId"])
    await open_popover(inbox)
    items = inbox.page.locator(".nv-notification")
    await expect(items.locator(".nv-notificationSubject")).to_have_text(["Order A-2", "Order A-1"], timeout=WAIT_MS)
    await expect(items.locator(".nv-notificationBody")).to_have_text(
        ["Your order A-2 has shipped", "Your order A-1 has shipped"], timeout=WAIT_MS
    )
    await screenshot(inbox, "inbox-open")


async def test_marking_one_read_in_the_ui_marks_it_read_in_herald(herald_server: HeraldServer, open_inbox: Any) -> None:
    async with herald_server.api() as api:
        _, subscriber = await notified(api, "Deliveries")
        inbox = await open_inbox(subscriber["subscriberId"])
        await open_popover(inbox)
        item = notification(inbox, "Order A-1")
        await item.hover()
        await item.locator(".nv-notificationRead__button").click()
        await expect(inbox.page.get_by_test_id("unread-count")).to_have_text("1", timeout=WAIT_MS)

        async def read_in_herald() -> bool:
            return (await by_subject(api, subscriber["subscriberId"]))["Order A-1"]["read"]

        await wait_until(read_in_herald, timeout=WAIT_MS / 1000, what="Herald to have Order A-1 read")
        state = await by_subject(api, subscriber["subscriberId"])
        assert state["Order A-2"]["read"] is False


async def test_archiving_one_in_the_ui_archives_it_in_herald(herald_server: HeraldServer, open_inbox: Any) -> None:
    async with herald_server.api() as api:
        _, subscriber = await notified(api, "Returns")
        inbox = await open_inbox(subscriber["subscriberId"])
        await open_popover(inbox)
        item = notification(inbox, "Order A-2")
        await item.hover()
        await item.locator(".nv-notificationArchive__button").click()
        await expect(inbox.page.locator(".nv-notificationSubject")).to_have_text(["Order A-1"], timeout=WAIT_MS)

        async def archived_in_herald() -> bool:
            return (await by_subject(api, subscriber["subscriberId"]))["Order A-2"]["archived"]

        await wait_until(archived_in_herald, timeout=WAIT_MS / 1000, what="Herald to have Order A-2 archived")
        state = await by_subject(api, subscriber["subscriberId"])
        assert state["Order A-1"]["archived"] is False


async def test_turning_a_workflow_channel_off_in_the_preferences_panel_is_stored_by_herald(
    herald_server: HeraldServer, open_inbox: Any
) -> None:
    async with herald_server.api() as api:
        workflow, subscriber = await notified(api, "Billing")
        subscriber_id = subscriber["subscriberId"]
        identifier = workflow["triggers"][0]["identifier"]

        async def in_app_preference() -> bool:
            response = await api.get(f"/v2/subscribers/{subscriber_id}/preferences")
            assert response.status_code == 200, response.text
            [preference] = [
                entry for entry in response.json()["data"]["workflows"] if entry["workflow"]["identifier"] == identifier
            ]
            return preference["channels"]["in_app"]

        assert await in_app_preference() is True
        inbox = await open_inbox(subscriber_id)
        await open_popover(inbox)
        await inbox.page.locator(".nv-preferences__button").click()
        row = inbox.page.locator(".nv-workflowContainer").filter(has_text=workflow["name"])
        await row.locator(".nv-workflowLabelContainer").click()
        switch = row.locator(".nv-channelSwitch")
        await expect(switch.locator(".nv-channelSwitchThumb")).to_have_attribute("data-state", "enabled", timeout=WAIT_MS)
        await switch.click()
        await expect(switch.locator(".nv-channelSwitchThumb")).to_have_attribute("data-state", "disabled", timeout=WAIT_MS)

        async def turned_off() -> bool:
            return await in_app_preference() is False

        await wait_until(turned_off, timeout=WAIT_MS / 1000, what="Herald to store in_app off for the workflow")
        await screenshot(inbox, "inbox-preferences")
