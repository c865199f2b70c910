"""The Workflows and Analytics pages in a real browser, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
from playwright.async_api import expect

from herald.kit.db import create_engine, create_sessionmaker
from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.models import Message
from tests.browser.console.conftest import ConsoleServer, assert_accessible, assert_keyboard_reachable, screenshot
from tests.fixtures.builders import unique

Console = Callable[[str], Awaitable[Any]]


async def _workflow(server: ConsoleServer, **fields: Any) -> dict[str, Any]:
    body = {"active": True, "steps": [{"name": "Inbox", "template": {"type": "in_app", "content": "Hello"}}], **fields}
    async with httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"ApiKey {server.api_key}"}) as api:
        answer = await api.post("/v1/workflows", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()["data"]


async def test_search_and_the_active_switch(console_server: ConsoleServer, console: Console, axe_script: Any) -> None:
    tag = unique("team")
    tagged = await _workflow(console_server, name=unique("Password reset"), tags=[tag, "security"])
    await _workflow(console_server, name=unique("Weekly digest"), tags=["digest"])
    page = await console("author")
    await page.get_by_role("navigation", name="Console").get_by_role("link", name="Workflows").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Workflows")
    await page.get_by_label("Search").fill(tag)
    await page.get_by_label("Search").press("Enter")
    await expect(page).to_have_url(re.compile(rf"/console/workflows\?search={tag}$"))
    rows = page.locator("table.workflows-table tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text(tagged["name"])
    await expect(rows.first).to_contain_text("Active")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)

    await page.get_by_role("button", name=f"Deactivate {tagged['name']}").click()
    await expect(page.get_by_role("status")).to_contain_text(f"{tagged['name']} is now inactive")
    # Back on the same search, the row says so and offers the other way.
    await expect(page).to_have_url(re.compile(rf"/console/workflows\?search={tag}$"))
    await expect(rows.first).to_contain_text("Inactive")
    await expect(page.get_by_role("button", name=f"Activate {tagged['name']}")).to_be_visible()
    await page.get_by_label("Search").fill("")
    await page.get_by_role("button", name="Search", exact=True).click()
    await screenshot(page, "workflows")

    await page.get_by_role("link", name=tagged["name"]).click()
    await expect(page.get_by_role("heading", level=1)).to_have_text(tagged["name"])
    await expect(page.locator("table tbody tr")).to_contain_text(["Inbox"])
    await assert_accessible(page)

    # The audit log has the switch, with who did it.
    await page.goto("/console/audit?action=workflow.status")
    await expect(page.locator("table tbody tr").first).to_contain_text(page.member.email)


async def test_a_viewer_has_no_switch(console_server: ConsoleServer, console: Console) -> None:
    workflow = await _workflow(console_server, name=unique("Viewer sees"))
    page = await console("viewer")
    await page.goto(f"/console/workflows?search={workflow['name']}")
    await expect(page.locator("table.workflows-table tbody tr")).to_contain_text([workflow["name"]])
    await expect(page.get_by_role("button", name=re.compile("Deactivate|Activate"))).to_have_count(0)


async def _messages(server: ConsoleServer, workflow_id: str, rows: list[tuple[str, str | None, str, int]]) -> None:
    """(channel, provider, status, days ago) messages of Development, written to the server's store."""
    engine = create_engine(server.database_url, pool_size=1)
    now = utcnow()
    try:
        async with create_sessionmaker(engine)() as session:
            for channel, provider, status, days_ago in rows:
                at = now - timedelta(days=days_ago)
                session.add(
                    Message(
                        environment_id=server.environments["Development"],
                        organization_id=server.organization_id,
                        notification_id=new_id(),
                        subscriber_id=new_id(),
                        workflow_id=workflow_id,
                        transaction_id=f"txn_{new_id()}",
                        channel=channel,
                        provider_id=provider,
                        status=status,
                        created_at=at,
                        updated_at=at,
                    )
                )
            await session.commit()
    finally:
        await engine.dispose()


# The messages are written into past days directly: no other test of the shared server may open Analytics
# for Development first (a day that ended is counted once, when Analytics is first opened after it).
async def test_analytics_charts_and_their_tables(console_server: ConsoleServer, console: Console, axe_script: Any) -> None:
    workflow = await _workflow(console_server, name=unique("Order shipped"))
    await _messages(
        console_server,
        workflow["_id"],
        [("email", "sendgrid", "sent", 0), ("email", "sendgrid", "error", 0), ("sms", "twilio", "sent", 2), ("in_app", None, "sent", 12)]
        + [("email", "sendgrid", "sent", day) for day in range(1, 7)],
    )
    page = await console("viewer")
    await page.get_by_role("navigation", name="Console").get_by_role("link", name="Analytics").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Analytics")
    await expect(page.get_by_role("link", name="Last 7 days")).to_have_attribute("aria-current", "page")
    charts = page.locator("figure.chart-figure")
    await expect(charts.locator("svg[role=img]")).to_have_count(6)
    top = charts.filter(has_text="Top workflows by messages")
    await expect(top.locator("tbody tr").filter(has_text=workflow["name"]).locator("td")).to_have_text(["9", "1"])
    await assert_accessible(page)
    await assert_keyboard_reachable(page)

    await page.get_by_role("link", name="Last 30 days").click()
    await expect(page).to_have_url(re.compile(r"/console/analytics\?days=30$"))
    await expect(top.locator("tbody tr").filter(has_text=workflow["name"]).locator("td")).to_have_text(["10", "1"])
    by_day = charts.filter(has_text="Messages by day and channel").locator("tbody tr")
    await expect(by_day).to_have_count(30)
    await screenshot(page, "analytics")
