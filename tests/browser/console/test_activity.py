"""Activity and a run's page in a real browser, against ``herald serve`` and its worker, on SQLite and PostgreSQL.

The runs are real: triggered through the API, run by the worker, their emails sent to an SMTP
server on loopback (tests/fixtures/peers.SmtpPeer) that refuses one mailbox with 550.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from tests.browser.console.conftest import assert_accessible, assert_keyboard_reachable, screenshot
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow, unique
from tests.fixtures.peers import SmtpPeer

Console = Callable[[str], Awaitable[Any]]
# The worker runs the steps: a run's row and its outcome may take a few seconds on a loaded machine.
WAIT_MS = 30_000
STEPS = [
    {"name": "inbox", "template": {"type": "in_app", "content": "Your order {{payload.order}} has shipped"}},
    {
        "name": "mail",
        "template": {
            "type": "email",
            "subject": "Order {{payload.order}} shipped",
            "content": "<h1>Good news</h1><p>Your order {{payload.order}} is on its way.</p>",
        },
    },
]


class Shop:
    """A workflow (in-app, then email) of its own, sending through its own SMTP integration."""

    def __init__(self, api: httpx.AsyncClient, smtp: SmtpPeer) -> None:
        self.api = api
        self.smtp = smtp
        self.workflow: dict[str, Any] = {}
        self.integration = unique("smtp")

    async def open(self) -> Shop:
        self.workflow = await create_workflow(self.api, name=unique("Order shipped"), steps=STEPS)
        await create_integration(
            self.api,
            providerId="nodemailer",
            identifier=self.integration,
            name=self.integration,
            active=True,
            credentials={"host": "127.0.0.1", "port": str(self.smtp.port), "from": "shop@example.com", "ignoreTls": True},
        )
        return self

    async def customer(self, *, refused: bool = False) -> dict[str, Any]:
        name = unique("cust")
        subscriber = await create_subscriber(self.api, subscriberId=name, email=f"{name}@example.com", firstName="Ada")
        if refused:
            self.smtp.refuse.add(subscriber["email"])
        return subscriber

    async def trigger(self, subscriber: dict[str, Any], order: int) -> str:
        response = await self.api.post(
            "/v1/events/trigger",
            json={
                "name": self.workflow["triggers"][0]["identifier"],
                "to": subscriber["subscriberId"],
                "payload": {"order": order},
                # Its own integration, whatever other tests add to the environment.
                "overrides": {"email": {"integrationIdentifier": self.integration}},
            },
        )
        assert response.status_code == 201, response.text
        return response.json()["data"]["transactionId"]


@pytest.fixture
async def shop(api: httpx.AsyncClient, smtp: SmtpPeer) -> Shop:
    return await Shop(api, smtp).open()


def run_row(page: Any, subscriber: dict[str, Any]) -> Any:
    return page.locator("#activity-rows tr", has_text=subscriber["subscriberId"])


async def test_runs_are_listed_found_by_search_and_narrowed_by_filters(console: Console, shop: Shop, axe_script: Any) -> None:
    delivered, refused = await shop.customer(), await shop.customer(refused=True)
    delivered_transaction = await shop.trigger(delivered, 1001)
    await shop.trigger(refused, 1002)
    page = await console("viewer")

    await expect(page).to_have_url(re.compile(r"/console/activity$"))
    await expect(page.get_by_role("heading", level=1)).to_have_text("Activity")
    await expect(run_row(page, refused)).to_contain_text("Failed", timeout=WAIT_MS)
    await expect(run_row(page, delivered)).to_contain_text("Completed", timeout=WAIT_MS)
    await expect(run_row(page, delivered)).to_contain_text(shop.workflow["name"])
    await expect(run_row(page, delivered)).to_contain_text("Email, In-app")
    await assert_accessible(page)
    await screenshot(page, "activity")
    await assert_keyboard_reachable(page)

    # Search by email, then by transactionId.
    await page.get_by_label("Search").fill(refused["email"])
    await page.get_by_role("button", name="Show runs").click()
    await expect(page.locator("#activity-rows tr")).to_have_count(1)
    await expect(run_row(page, refused)).to_be_visible()
    await page.get_by_label("Search").fill(delivered_transaction)
    await page.get_by_role("button", name="Show runs").click()
    await expect(page.locator("#activity-rows tr")).to_have_count(1)
    await expect(run_row(page, delivered)).to_be_visible()

    # The workflow and a status: only the failed run of this workflow.
    await page.get_by_label("Search").fill("")
    await page.get_by_label("Workflow").select_option(label=shop.workflow["name"])
    await page.get_by_label("Status").select_option(label="Failed")
    await page.get_by_label("Channel").select_option(label="Email")
    await page.get_by_label("Time").select_option(label="Last hour")
    await page.get_by_role("button", name="Show runs").click()
    await expect(page.locator("#activity-rows tr")).to_have_count(1)
    await expect(run_row(page, refused)).to_contain_text("Failed")
    await expect(page.get_by_label("Status")).to_have_value("failed")
    await assert_accessible(page)


async def test_a_new_run_appears_without_a_reload(console: Console, shop: Shop) -> None:
    page = await console("viewer")
    await expect(page).to_have_url(re.compile(r"/console/activity$"))
    # A mark on this document: a reload would lose it.
    await page.evaluate("() => { window.sameDocument = true; }")
    newcomer = await shop.customer()

    await shop.trigger(newcomer, 2001)

    await expect(run_row(page, newcomer)).to_be_visible(timeout=WAIT_MS)
    await expect(run_row(page, newcomer)).to_contain_text("Completed", timeout=WAIT_MS)
    await expect(page.locator("#activity-live-status")).to_contain_text("new run")
    assert await page.evaluate("() => window.sameDocument === true")


async def test_a_runs_page_says_why_the_email_failed_and_shows_the_email_sent(console: Console, shop: Shop, axe_script: Any) -> None:
    refused, delivered = await shop.customer(refused=True), await shop.customer()
    refused_transaction = await shop.trigger(refused, 3001)
    await shop.trigger(delivered, 3002)
    page = await console("viewer")

    await expect(run_row(page, refused)).to_contain_text("Failed", timeout=WAIT_MS)
    await run_row(page, refused).get_by_role("link").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Run of {shop.workflow['name']}")
    await expect(page.locator("dl")).to_contain_text(refused_transaction)
    why = page.locator("ul.reasons")
    await expect(why).to_contain_text("Step 2: Email (mail): failed.")
    await expect(why).to_contain_text("550")
    await expect(page.get_by_role("heading", name="Step 1: In-app (inbox): completed")).to_be_visible()
    await expect(page.locator("pre.payload")).to_contain_text('"order": 3001')
    await assert_accessible(page)
    await screenshot(page, "run")
    await assert_keyboard_reachable(page)

    await page.get_by_role("link", name="Back to Activity").click()
    await expect(run_row(page, delivered)).to_contain_text("Completed", timeout=WAIT_MS)
    await run_row(page, delivered).get_by_role("link").click()
    await expect(page.get_by_text("Every step ran: nothing was skipped, held, throttled, failed over or failed.")).to_be_visible()
    preview = page.locator("iframe.email-preview")
    await expect(preview).to_have_attribute("sandbox", "")
    # The email as sent, inside its sandbox.
    await expect(page.frame_locator("iframe.email-preview").get_by_role("heading", name="Good news")).to_be_visible()
    await expect(page.frame_locator("iframe.email-preview").locator("body")).to_contain_text("Your order 3002 is on its way.")
