"""The workflow editor in a real browser, against ``herald serve`` and its worker, on SQLite and PostgreSQL.

A workflow is made in the editor, its email previewed as it is typed (in a sandbox where a script never
runs), saved, triggered through the API and sent to an SMTP server on loopback: the email sent is the
one the preview showed. A test send is followed to its run; a viewer reads the editor and cannot save.
"""

from __future__ import annotations

import email
import re
from collections.abc import Awaitable, Callable
from email.message import Message
from typing import Any

import httpx
from playwright.async_api import expect

from tests.browser.console.conftest import assert_accessible, assert_keyboard_reachable, screenshot
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow, unique
from tests.fixtures.peers import SmtpPeer

Console = Callable[[str], Awaitable[Any]]
# The worker runs the steps: a run and its email may take a few seconds on a loaded machine.
WAIT_MS = 30_000
BODY = (
    "<h1>Hello {{subscriber.firstName}}</h1><p>Your order {{payload.order}} is on its way.</p>"
    "<script>document.body.setAttribute('data-script-ran', 'yes')</script>"
)
# What Chromium logs when the sandbox refuses the email's script: provoked on purpose.
REFUSED_SCRIPT = ("allow-scripts", "Refused to execute inline script")


def html_part(mail: Message) -> str:
    for part in mail.walk():
        if part.get_content_type() == "text/html":
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            return payload.decode(part.get_content_charset() or "utf-8")
    raise AssertionError("the email has no HTML part")


async def body_html(frame: Any) -> str:
    """The frame's body as the browser parsed it (the same parse for the preview and the email sent)."""
    return await frame.locator("body").evaluate("body => body.innerHTML")


async def test_a_workflow_made_in_the_editor_sends_what_its_preview_showed(
    console: Console, api: httpx.AsyncClient, smtp: SmtpPeer, axe_script: Any
) -> None:
    integration = unique("smtp")
    await create_integration(
        api,
        providerId="nodemailer",
        identifier=integration,
        name=integration,
        active=True,
        credentials={"host": "127.0.0.1", "port": str(smtp.port), "from": "shop@example.com", "ignoreTls": True},
    )
    name = unique("cust")
    subscriber = await create_subscriber(api, subscriberId=name, email=f"{name}@example.com", firstName="Ada")
    page = await console("author")
    page.expected_errors.extend(REFUSED_SCRIPT)

    await page.goto("/console/workflows/new")
    workflow_name = unique("Order shipped")
    await page.get_by_label("Name").fill(workflow_name)
    await page.get_by_role("button", name="Create").click()
    await expect(page).to_have_url(re.compile(r"/console/workflows/[0-9a-f]+/edit$"))
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Edit workflow: {workflow_name}")
    await page.get_by_role("button", name="Email", exact=True).click()
    await expect(page.get_by_role("heading", name="Step 1: Email")).to_be_visible()

    await page.get_by_label("Test payload").fill('{"order": 4242}')
    await page.get_by_label("Preview as subscriber (subscriber ID)").fill(subscriber["subscriberId"])
    await page.get_by_label("Subject subject").fill("Order {{payload.order}} shipped")
    preview = page.get_by_role("region", name="Preview")
    await expect(preview.locator("[data-preview-subject]")).to_have_text("Order 4242 shipped")
    await page.get_by_label("Body (HTML) content").fill(BODY)
    frame = page.frame_locator("#preview iframe.email-preview")
    await expect(frame.get_by_role("heading", name="Hello Ada")).to_be_visible()
    await expect(frame.locator("body")).to_contain_text("Your order 4242 is on its way.")
    await expect(page.locator("#preview iframe.email-preview")).to_have_attribute("sandbox", "")
    await expect(frame.locator("body")).not_to_have_attribute("data-script-ran", "yes")
    previewed = await body_html(frame)

    # A template that does not parse: the preview says where, and Save refuses.
    await page.get_by_label("Subject subject").fill("Order {{payload.order | nope}} shipped")
    await expect(preview).to_contain_text("unknown filter 'nope' at line 1, column")
    await page.get_by_role("button", name="Save").first.click()
    await expect(page.locator(".error-summary")).to_contain_text("Step 1, subject: template could not be rendered")
    await page.get_by_label("Subject subject").fill("Order {{payload.order}} shipped")
    await page.get_by_label("Test payload").fill('{"order": 4242}')
    await page.get_by_role("button", name="Save").first.click()
    await expect(page.locator(".flash")).to_have_text("Workflow saved")
    await expect(page.get_by_label("Subject subject")).to_have_value("Order {{payload.order}} shipped")
    # Opened again, the editor shows its first step at once.
    await expect(preview.locator("[data-preview-subject]")).to_have_text("Order order shipped")
    await page.get_by_label("Test payload").fill('{"order": 4242}')
    await page.get_by_label("Preview as subscriber (subscriber ID)").fill(subscriber["subscriberId"])
    await expect(preview.locator("[data-preview-subject]")).to_have_text("Order 4242 shipped")
    await expect(frame.get_by_role("heading", name="Hello Ada")).to_be_visible()
    await assert_accessible(page)
    await screenshot(page, "editor")
    await assert_keyboard_reachable(page)

    identifier = (await page.locator("#workflow-identifier").text_content() or "").strip()
    received = len(smtp.received)
    answer = await api.post(
        "/v1/events/trigger",
        json={
            "name": identifier,
            "to": subscriber["subscriberId"],
            "payload": {"order": 4242},
            "overrides": {"email": {"integrationIdentifier": integration}},
        },
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["data"]["status"] == "processed", answer.text

    # The run's page shows the email as sent: the same as the preview.
    await page.goto("/console/activity")
    row = page.locator("#activity-rows tr", has_text=subscriber["subscriberId"])
    await expect(row).to_contain_text("Completed", timeout=WAIT_MS)
    await row.get_by_role("link").click()
    sent_frame = page.frame_locator("iframe.email-preview")
    await expect(sent_frame.get_by_role("heading", name="Hello Ada")).to_be_visible()
    assert await body_html(sent_frame) == previewed
    mails = [email.message_from_bytes(mail.data) for mail in smtp.received[received:]]
    sent = next(mail for mail in mails if mail["To"] == subscriber["email"])
    assert sent["Subject"] == "Order 4242 shipped"
    assert "Your order 4242 is on its way." in html_part(sent)


async def test_send_test_triggers_the_saved_workflow_and_links_to_its_run(
    console: Console, api: httpx.AsyncClient, axe_script: Any
) -> None:
    workflow = await create_workflow(
        api,
        name=unique("Welcome"),
        steps=[{"name": "inbox", "template": {"type": "in_app", "content": "Welcome {{payload.team}}"}}],
    )
    subscriber = await create_subscriber(api, subscriberId=unique("cust"))
    page = await console("author")
    await page.goto(f"/console/workflows/{workflow['_id']}/edit")
    await expect(page.get_by_label("Test payload")).to_have_value(re.compile(r'"team": "team"'))
    await page.get_by_label("Test payload").fill('{"team": "Blue"}')
    await expect(page.get_by_role("region", name="Preview").locator("[data-preview-body]")).to_have_text("Welcome Blue")

    await page.get_by_label("Subscriber ID", exact=True).fill(subscriber["subscriberId"])
    await page.get_by_role("button", name="Send test").click()
    await expect(page.get_by_role("status").filter(has_text="Test sent")).to_be_visible()
    # The page follows the run as the engine goes: it shows up, then completes, without a reload.
    await page.evaluate("() => { window.samePage = true; }")
    run = page.get_by_role("table", name="The test's run, as it goes").locator(
        "tr", has_text=subscriber["subscriberId"]
    )
    await expect(run).to_contain_text("Completed", timeout=WAIT_MS)
    assert await page.evaluate("() => window.samePage === true")
    await assert_accessible(page)
    await page.get_by_role("link", name="Follow the run").click()
    if "/console/activity?search=" in page.url:  # not run yet: Activity shows it as it comes
        row = page.locator("#activity-rows tr", has_text=subscriber["subscriberId"])
        await expect(row).to_be_visible(timeout=WAIT_MS)
        await row.get_by_role("link").click()
    await expect(page).to_have_url(re.compile(r"/console/activity/[0-9a-f]+$"))
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Run of {workflow['name']}")
    await expect(page.locator("pre.payload")).to_contain_text('"team": "Blue"')


async def test_a_viewer_reads_the_editor_and_cannot_save(
    console: Console, api: httpx.AsyncClient, axe_script: Any
) -> None:
    workflow = await create_workflow(api, name=unique("Read only"))
    page = await console("viewer")
    await page.goto(f"/console/workflows/{workflow['_id']}/edit")
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Edit workflow: {workflow['name']}")
    await expect(page.get_by_role("button", name="Save")).to_have_count(0)
    await expect(page.get_by_role("button", name="Send test")).to_have_count(0)
    await expect(page.get_by_label("Content content")).to_have_attribute("readonly", "")
    await page.get_by_label("Test payload").fill('{"name": "Grace"}')
    await expect(page.get_by_role("region", name="Preview").locator("[data-preview-body]")).to_have_text("Hello Grace")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)

    token = await page.locator('meta[name="csrf-token"]').get_attribute("content")
    answer = await page.request.post(
        f"/console/workflows/{workflow['_id']}/edit",
        form={"csrf_token": token, "action": "save", "name": "Changed"},
    )
    assert answer.status == 403
    stored = (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"]
    assert stored["name"] == workflow["name"]


async def test_conditions_actions_and_settings_are_edited_in_the_page_and_nothing_else_is_lost(
    console: Console, api: httpx.AsyncClient, axe_script: Any
) -> None:
    filters = [
        {
            "isNegated": False,
            "type": "GROUP",
            "value": "AND",
            "children": [
                {"on": "payload", "field": "plan", "value": "pro", "operator": "EQUAL"},
                {"on": "subscriber", "field": "locale", "value": "fr", "operator": "LIKE"},
            ],
        }
    ]
    cta = {"type": "redirect", "data": {"url": "https://example.com/orders"}}
    workflow = await create_workflow(
        api,
        name=unique("Conditions"),
        tags=["orders"],
        data={"team": "billing"},
        steps=[
            {
                "name": "inbox",
                "filters": filters,
                "template": {"type": "in_app", "content": "Hi {{payload.plan}}", "cta": cta},
            },
            {
                "name": "mail",
                "template": {
                    "type": "email",
                    "subject": "Plan",
                    "content": [
                        {"type": "text", "content": "Plan {{payload.plan}}", "styles": {"textAlign": "center"}}
                    ],
                },
            },
        ],
    )
    subscriber = await create_subscriber(api, subscriberId=unique("cust"))
    page = await console("author")
    await page.goto(f"/console/workflows/{workflow['_id']}/edit")
    conditions = page.get_by_role("group", name="Conditions filters").first
    await expect(conditions.get_by_label("Field field")).to_have_count(2)
    await page.evaluate("() => { window.samePage = true; }")  # gone if a button reloaded the page

    # Rows are removed and added in the page itself, without the server.
    await conditions.get_by_role("button", name="Remove condition").first.click()
    await conditions.get_by_role("button", name="Add condition to step 1", exact=True).click()
    await expect(conditions.get_by_label("Field field")).to_have_count(2)
    await expect(conditions.get_by_label("Field field").last).to_be_focused()
    await conditions.get_by_label("Field field").last.fill("total")
    await conditions.get_by_label("Operator operator").last.select_option("BETWEEN")
    await conditions.get_by_label("Value value").last.fill("10,20")
    # A second group, added in the page too, its conditions joined by OR.
    await conditions.get_by_role("button", name="Add condition group").click()
    await expect(conditions.get_by_label("Field field")).to_have_count(3)
    await expect(conditions.get_by_label("Field field").last).to_be_focused()
    await conditions.get_by_label("Field field").last.fill("tier")
    await conditions.get_by_label("Value value").last.fill("gold")
    await conditions.get_by_label("Run when value").last.select_option("OR")
    assert await page.evaluate("() => window.samePage === true")

    await (
        page.get_by_role("group", name="Secondary action").get_by_label("Label content").fill("Later {{payload.plan}}")
    )
    await page.get_by_label("Test payload").fill('{"plan": "pro"}')
    await expect(page.get_by_role("region", name="Preview")).to_contain_text("Later pro")
    # An email of blocks: a block added in the page and previewed in the frame.
    blocks = page.get_by_role("group", name="Body, in blocks content")
    await blocks.get_by_role("button", name="Add block").click()
    await expect(blocks.get_by_label("Text content").last).to_be_focused()
    await blocks.get_by_label("Text content").last.fill("Thanks, {{payload.plan}}")
    frame = page.frame_locator("#preview iframe.email-preview")
    await expect(frame.locator("body")).to_contain_text("Thanks, pro")
    await expect(frame.locator("body")).to_contain_text("Plan pro")
    await page.get_by_role("group", name="Default channel preferences preferenceSettings").get_by_label("SMS").uncheck()
    await page.get_by_label("Payload schema payloadSchema").fill(
        '{"type": "object", "properties": {"plan": {"type": "string", "examples": ["pro"]}}, "required": ["plan"]}'
    )
    await page.get_by_label(re.compile(r"^Validate payload")).check()
    await expect(frame.locator("body")).to_contain_text("Thanks, pro")  # the preview made again as settings were typed
    await assert_accessible(page)
    await screenshot(page, "editor-conditions")
    await page.get_by_role("button", name="Save").first.click()
    await expect(page.locator(".flash")).to_have_text("Workflow saved")
    await expect(conditions.get_by_label("Field field").nth(1)).to_have_value("total")
    await expect(conditions.get_by_label("Field field").last).to_have_value("tier")

    stored = (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"]
    assert stored["steps"][0]["filters"] == [
        {
            **filters[0],
            "children": [
                filters[0]["children"][1],
                {"on": "payload", "field": "total", "value": "10,20", "operator": "BETWEEN"},
            ],
        },
        {
            "isNegated": False,
            "type": "GROUP",
            "value": "OR",
            "children": [{"on": "payload", "field": "tier", "value": "gold", "operator": "EQUAL"}],
        },
    ]
    template = stored["steps"][0]["template"]
    assert template["cta"]["data"] == cta["data"]
    assert template["cta"]["action"]["buttons"] == [{"type": "secondary", "content": "Later {{payload.plan}}"}]
    assert stored["tags"] == ["orders"] and stored["data"] == {"team": "billing"}
    assert stored["preferenceSettings"]["sms"] is False and stored["preferenceSettings"]["email"] is True
    assert stored["steps"][1]["template"]["content"] == [
        {"type": "text", "content": "Plan {{payload.plan}}", "styles": {"textAlign": "center"}},
        {"type": "text", "content": "Thanks, {{payload.plan}}"},
    ]
    # The payload schema is honoured by a trigger: a payload without "plan" is refused.
    identifier = stored["triggers"][0]["identifier"]
    refused = await api.post(
        "/v1/events/trigger", json={"name": identifier, "to": subscriber["subscriberId"], "payload": {}}
    )
    assert refused.status_code == 400, refused.text
    taken = await api.post(
        "/v1/events/trigger", json={"name": identifier, "to": subscriber["subscriberId"], "payload": {"plan": "pro"}}
    )
    assert taken.status_code == 201, taken.text
