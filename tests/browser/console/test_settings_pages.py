"""Integrations, API keys, Environments and Webhooks in a real browser, against ``herald serve`` on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from playwright.async_api import expect
from sqlalchemy import select, update
from starlette.responses import Response

from herald.kit.db import create_engine, create_sessionmaker
from herald.kit.ids import new_id
from herald.kit.time import isoformat, utcnow
from herald.models import Job, WebhookEndpoint
from tests.browser.console.conftest import ConsoleServer, assert_accessible, assert_keyboard_reachable, screenshot
from tests.fixtures.peers import HttpPeer, RecordedRequest, SmtpPeer

Console = Callable[[str], Awaitable[Any]]
SMTP_PASSWORD = "browser-smtp-password-never-shown"


@pytest.fixture
def smtp() -> Iterator[SmtpPeer]:
    """An SMTP server that takes mail only from ``mailer`` with its password (AUTH required)."""
    server = SmtpPeer(users={"mailer": SMTP_PASSWORD}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def hooks() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    try:
        yield server
    finally:
        server.stop()


def record_bodies(page: Any) -> list[str]:
    """Every answer's body the page receives from now on (read as text)."""
    bodies: list[str] = []

    async def keep(response: Any) -> None:
        try:
            bodies.append(await response.text())
        except Exception:  # a redirect has no body to read
            bodies.append("")

    page.on("response", keep)
    return bodies


async def test_an_admin_adds_an_smtp_integration_sends_a_test_and_no_secret_reaches_the_browser(
    console_server: ConsoleServer, console: Console, smtp: SmtpPeer, axe_script: Any
) -> None:
    # The SMTP server is the module's, and the integration made here may deliver other tests' email on the same
    # server: the test's own mail is the one to its address, sent after this point.
    received_before = len(smtp.received)
    page = await console("admin")
    bodies = record_bodies(page)
    await page.get_by_role("navigation", name="Console").get_by_role("link", name="Integrations").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Integrations")
    await page.get_by_label("Email provider").select_option(label="Custom SMTP")
    await page.get_by_role("button", name="Add Email integration").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("New Custom SMTP integration")
    name = f"Office SMTP {secrets.token_hex(3)}"
    await page.get_by_label("Name", exact=True).fill(name)
    await page.locator('[name="credentials.host"]').fill("127.0.0.1")
    await page.locator('[name="credentials.port"]').fill(str(smtp.port))
    await page.locator('[name="credentials.from"]').fill("herald@example.com")
    await page.locator('[name="credentials.user"]').fill("mailer")
    await page.locator('[name="credentials.password"]').fill(SMTP_PASSWORD)
    await page.locator('[name="credentials.ignoreTls"]').check()
    await assert_accessible(page)
    await page.get_by_role("button", name="Add integration").click()
    await expect(page.get_by_role("status")).to_contain_text(f"Integration {name} added")
    await expect(page.get_by_text("set. Leave empty to keep it")).to_be_visible()
    await expect(page.locator('[name="credentials.password"]')).to_have_value("")
    await expect(page.locator('[name="credentials.host"]')).to_have_value("127.0.0.1")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)

    # Saved with the password left empty: the test below authenticates with nothing else.
    await page.locator('[name="credentials.from"]').fill("ops@example.com")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status")).to_contain_text(f"Integration {name} saved")
    await page.get_by_label("Email address").fill("not an address")
    await page.get_by_role("button", name="Send test").click()
    await expect(page.get_by_role("alert")).to_contain_text("Enter an email address")
    await page.get_by_label("Email address").fill("someone@example.com")
    await page.get_by_role("button", name="Send test").click()
    await expect(page.get_by_role("status")).to_contain_text("Test sent to someone@example.com")
    [mail] = [mail for mail in smtp.received[received_before:] if mail.rcpt_tos == ["someone@example.com"]]
    assert mail.rcpt_tos == ["someone@example.com"] and "ops@example.com" in mail.mail_from and mail.login == "mailer"
    await screenshot(page, "integration")

    await page.get_by_role("link", name="All integrations").click()
    row = page.get_by_role("row", name=re.compile(re.escape(name)))
    await expect(row).to_contain_text("Custom SMTP")
    await expect(row).to_contain_text("Healthy")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "integrations")
    assert bodies and all(SMTP_PASSWORD not in body for body in bodies)
    assert SMTP_PASSWORD not in await page.content()


async def test_a_viewer_sees_integrations_but_changes_nothing(console_server: ConsoleServer, console: Console, axe_script: Any) -> None:
    async with httpx.AsyncClient(base_url=console_server.url, headers={"Authorization": f"ApiKey {console_server.api_key}"}) as api:
        made = await api.post(
            "/v1/integrations",
            json={"providerId": "postmark", "channel": "email", "name": f"Postmark {secrets.token_hex(3)}", "credentials": {"apiKey": "pm-secret-key-value"}},
        )
        assert made.status_code == 201
    integration = made.json()["data"]
    page = await console("viewer")
    await page.goto("/console/integrations")
    await expect(page.get_by_role("row", name=re.compile(re.escape(integration["name"])))).to_contain_text("Inactive")
    await expect(page.get_by_role("button", name=re.compile("^Add "))).to_have_count(0)
    await page.get_by_role("link", name=integration["name"]).click()
    await expect(page.locator('[name="credentials.apiKey"]')).to_be_disabled()
    await expect(page.get_by_role("button", name="Save")).to_have_count(0)
    assert "pm-secret-key-value" not in await page.content()
    await assert_accessible(page)


async def test_environments_api_keys_reveal_and_regenerate(console_server: ConsoleServer, console: Console, axe_script: Any) -> None:
    page = await console("admin")
    await page.get_by_role("navigation", name="Console").get_by_role("link", name="Environments").click()
    await expect(page.get_by_role("row", name=re.compile("^Production"))).to_contain_text("Protected")
    name = f"Staging {secrets.token_hex(3)}"
    await page.get_by_label("Name", exact=True).fill(name)
    await page.get_by_role("button", name="Create environment").click()
    await expect(page.get_by_role("status")).to_contain_text(f"Environment {name} created")
    first_key = (await page.locator("#created-key").text_content()).strip()
    await page.get_by_label("Name", exact=True).fill(name)
    await page.get_by_role("button", name="Create environment").click()
    await expect(page.get_by_role("alert")).to_contain_text(f"Environment with name {name} already exists")
    await page.get_by_role("row", name=re.compile(f"^{re.escape(name)}")).get_by_role("button", name=re.compile("^Protect")).click()
    await expect(page.get_by_role("status")).to_contain_text(f"{name} is protected")
    await expect(page.get_by_role("row", name=re.compile(f"^{re.escape(name)}"))).to_contain_text("Protected")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "environments")

    await page.get_by_label("Environment").select_option(label=name)
    await expect(page.get_by_role("status")).to_contain_text(f"Showing {name}")
    await page.goto("/console/api-keys")
    masked = f"{first_key[:3]}****{first_key[-4:]}"
    await expect(page.get_by_role("row", name=re.compile(re.escape(masked)))).to_be_visible()
    assert first_key not in await page.content()
    await page.get_by_role("button", name=re.compile("^Reveal")).click()
    await expect(page.locator("#revealed-key")).to_have_text(first_key)
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "api-keys")

    await page.get_by_role("link", name="Regenerate the API key").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Regenerate the API key of {name}?")
    await assert_accessible(page)
    await page.get_by_role("button", name="Yes, regenerate the key").click()
    new_key = (await page.locator("#new-key").text_content()).strip()
    assert new_key and new_key != first_key
    async with httpx.AsyncClient(base_url=console_server.url) as api:
        old = await api.get("/v1/integrations", headers={"Authorization": f"ApiKey {first_key}"})
        assert old.status_code == 401
        assert (await api.get("/v1/integrations", headers={"Authorization": f"ApiKey {new_key}"})).status_code == 200
    await page.goto("/console/audit?action=api_key.")
    await expect(page.get_by_role("row", name=re.compile("api_key.regenerated"))).to_contain_text(page.member.email)
    await expect(page.get_by_role("row", name=re.compile("api_key.revealed"))).to_contain_text(page.member.email)


async def test_webhooks_secret_once_deliveries_and_retry_now(
    console_server: ConsoleServer, console: Console, hooks: HttpPeer, axe_script: Any
) -> None:
    arrived = threading.Event()

    def answer(request: RecordedRequest) -> Response:
        arrived.set()
        return Response(status_code=204)

    hooks.route("POST", "/hook", answer)
    page = await console("admin")
    await page.get_by_role("navigation", name="Console").get_by_role("link", name="Webhooks").click()
    url = f"{hooks.url}/hook?n={secrets.token_hex(3)}"
    await page.get_by_label("URL").fill(url)
    await page.get_by_label("Description (optional)").fill("Our application")
    await page.get_by_role("button", name="Add endpoint").click()
    secret = (await page.locator("#signing-secret").text_content()).strip()
    assert secret.startswith("whsec_")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await screenshot(page, "webhooks")
    await page.goto("/console/webhooks")
    assert secret not in await page.content()

    # A delivery as the sender leaves one after failed attempts: to be tried again in two hours, its endpoint paused.
    environment_id = console_server.environments["Development"]
    engine = create_engine(console_server.database_url, pool_size=1)
    later = utcnow() + timedelta(hours=2)
    try:
        async with create_sessionmaker(engine)() as session:
            endpoint_id = (
                await session.execute(select(WebhookEndpoint.id).where(WebhookEndpoint.url == url))
            ).scalar_one()
            job_id = new_id()
            body = json.dumps({"type": "message.sent", "timestamp": isoformat(utcnow()), "data": {"n": 1}})
            session.add(
                Job(
                    id=job_id,
                    kind="webhook",
                    status="queued",
                    environment_id=environment_id,
                    organization_id=console_server.organization_id,
                    event_id=job_id,
                    transaction_id=f"msg_{job_id}",
                    step_type="message.sent",
                    run_at=later,
                    attempts=3,
                    max_attempts=1000,
                    endpoint_id=endpoint_id,
                    error_text="the endpoint answered 503",
                    data={"endpointId": endpoint_id, "webhookId": f"msg_{job_id}", "body": body},
                )
            )
            await session.execute(
                update(WebhookEndpoint).where(WebhookEndpoint.id == endpoint_id).values(failing_since=utcnow(), paused_until=later)
            )
            await session.commit()
    finally:
        await engine.dispose()
    await page.get_by_role("link", name=url).click()
    row = page.get_by_role("row", name=re.compile(job_id))
    await expect(row).to_contain_text("Waiting")
    await expect(row).to_contain_text("the endpoint answered 503")
    await expect(row.get_by_role("cell").nth(1)).to_have_text("3")
    await assert_accessible(page)
    await assert_keyboard_reachable(page)
    await row.get_by_role("button", name=re.compile("^Retry now")).click()
    await expect(page.get_by_role("status")).to_contain_text(f"Delivery {job_id} is sent again now")
    # The worker sends it now, not in two hours.
    assert await asyncio.to_thread(arrived.wait, 60)
    [delivered] = hooks.requests_to("/hook")
    assert delivered.headers["webhook-id"] == f"msg_{job_id}" and delivered.body.decode() == body
