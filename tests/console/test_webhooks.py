"""The Webhooks page: endpoints (the signing secret shown once), deliveries with status, attempts and next retry, "Retry now"."""

from __future__ import annotations

import html
import re
from datetime import timedelta

from fastapi import FastAPI
from sqlalchemy import select, update

from herald.kit.time import utcnow
from herald.models import AuditEntry, Job, WebhookEndpoint
from herald.webhooks.events import LISTENING, emit
from tests.conftest import Tenancy
from tests.fixtures.console import ConsoleAs, ConsoleClient


async def _endpoint_id(app: FastAPI, environment_id: str, url: str) -> str:
    async with app.state.sessionmaker() as session:
        return (
            await session.execute(
                select(WebhookEndpoint.id).where(WebhookEndpoint.environment_id == environment_id, WebhookEndpoint.url == url)
            )
        ).scalar_one()


async def _add_endpoint(app: FastAPI, admin: ConsoleClient, tenancy: Tenancy, url: str) -> str:
    """Add an endpoint taking message.sent through the page's form; its id."""
    added = await admin.client.post("/console/webhooks", data={"url": url, "eventTypes": ["message.sent"], "csrf_token": admin.csrf})
    assert added.status_code == 200
    return await _endpoint_id(app, tenancy.environment_id, url)


async def _queue_events(app: FastAPI, tenancy: Tenancy, count: int) -> list[Job]:
    """Events as the engine queues them (herald.webhooks.events.emit), to the environment's endpoints."""
    LISTENING.forget(tenancy.environment_id)
    async with app.state.sessionmaker() as session:
        made = await emit(
            session, tenancy.environment_id, tenancy.organization_id, "message.sent", [{"n": n} for n in range(count)]
        )
        await session.commit()
        assert made == count
        rows = await session.execute(
            select(Job).where(Job.kind == "webhook", Job.environment_id == tenancy.environment_id).order_by(Job.created_at)
        )
        return list(rows.scalars())


async def test_an_endpoint_is_added_with_its_secret_shown_once(app: FastAPI, console_as: ConsoleAs, tenancy: Tenancy) -> None:
    for role in ("viewer", "author"):
        member = await console_as(role)
        page = await member.get("/console/webhooks")
        assert page.status_code == 200 and "Add endpoint" not in page.text
        refused = await member.post_form("/console/webhooks", {"url": "https://hooks.example.com/a", "eventTypes": "message.sent"})
        assert refused.status_code == 403
    admin = await console_as("admin")
    assert (await admin.post_form("/console/webhooks", {"url": "https://hooks.example.com/a"}, csrf="")).status_code == 403
    missing = await admin.post_form("/console/webhooks", {"url": "https://hooks.example.com/a"})
    assert missing.status_code == 422 and "Choose at least one event" in missing.text
    wrong = await admin.post_form("/console/webhooks", {"url": "ftp://hooks.example.com", "eventTypes": "message.sent"})
    assert wrong.status_code == 422 and "http or https URL" in wrong.text
    response = await admin.client.post(
        "/console/webhooks",
        data={"url": "https://hooks.example.com/a", "eventTypes": ["message.sent", "message.failed"], "csrf_token": admin.csrf},
    )
    assert response.status_code == 200
    [secret] = re.findall(r'id="signing-secret">(whsec_[^<]+)</code>', response.text)
    endpoint_id = await _endpoint_id(app, tenancy.environment_id, "https://hooks.example.com/a")
    async with app.state.sessionmaker() as session:
        stored = await session.get(WebhookEndpoint, endpoint_id)
        assert stored is not None and app.state.secret_box.open(stored.secret) == secret
        assert stored.event_types == ["message.sent", "message.failed"]
        [entry] = (await session.execute(select(AuditEntry).where(AuditEntry.resource_id == endpoint_id))).scalars()
        assert entry.action == "webhook_endpoint.created" and secret not in str(entry.changes)
    # Never again: not on the list, not on its page.
    for member in (admin, await console_as("owner"), await console_as("viewer")):
        for path in ("/console/webhooks", f"/console/webhooks/{endpoint_id}"):
            shown = await member.get(path)
            assert shown.status_code == 200 and "https://hooks.example.com/a" in shown.text
            assert secret not in shown.text


async def test_deliveries_show_status_attempts_and_next_retry_and_retry_now_sends_at_once(
    app: FastAPI, console_as: ConsoleAs, tenancy: Tenancy
) -> None:
    admin = await console_as("admin")
    endpoint_id = await _add_endpoint(app, admin, tenancy, "https://hooks.example.com/b")
    waiting, failed, delivered = await _queue_events(app, tenancy, 3)
    later = utcnow() + timedelta(hours=2)
    async with app.state.sessionmaker() as session:
        # As the sender leaves them (herald.webhooks.delivery): one to try again later, one given up, one delivered.
        await session.execute(
            update(Job).where(Job.id == waiting.id).values(attempts=3, run_at=later, error_text="the endpoint answered 503")
        )
        await session.execute(update(Job).where(Job.id == failed.id).values(status="failed", attempts=7, error_text="the endpoint answered 410"))
        await session.execute(update(Job).where(Job.id == delivered.id).values(status="completed", attempts=1))
        await session.execute(
            update(WebhookEndpoint).where(WebhookEndpoint.id == endpoint_id).values(failing_since=utcnow(), paused_until=later)
        )
        await session.commit()
    viewer = await console_as("viewer")
    page = await viewer.get(f"/console/webhooks/{endpoint_id}")
    assert page.status_code == 200 and "Retry now" not in page.text

    def row(text: str, job_id: str) -> str:
        return text.split(f"<code class=\"hint\">{job_id}</code>", 1)[1].split("</tr>", 1)[0]

    waiting_row = row(page.text, waiting.id)
    assert "Waiting" in waiting_row and ">3<" in waiting_row and "the endpoint answered 503" in waiting_row
    assert later.strftime("%Y") in waiting_row
    assert "Failed" in row(page.text, failed.id) and ">7<" in row(page.text, failed.id)
    assert "Delivered" in row(page.text, delivered.id)
    assert (await viewer.post_form(f"/console/webhooks/{endpoint_id}/deliveries/{waiting.id}/retry")).status_code == 403

    page = await admin.get(f"/console/webhooks/{endpoint_id}")
    assert "Retry now" in row(page.text, waiting.id) and "Retry now" in row(page.text, failed.id)
    assert "Retry now" not in row(page.text, delivered.id)
    before = utcnow()
    for job in (waiting, failed):
        retried = await admin.post_form(f"/console/webhooks/{endpoint_id}/deliveries/{job.id}/retry")
        assert retried.status_code == 303
    refused = await admin.post_form(f"/console/webhooks/{endpoint_id}/deliveries/{delivered.id}/retry")
    assert refused.status_code == 400 and "completed" in html.unescape(refused.text)
    async with app.state.sessionmaker() as session:
        for job in (waiting, failed):
            fresh = await session.get(Job, job.id)
            assert fresh is not None and fresh.status == "queued" and fresh.run_at <= utcnow() and fresh.run_at >= before - timedelta(seconds=1)
        endpoint = await session.get(WebhookEndpoint, endpoint_id)
        assert endpoint is not None and endpoint.paused_until is None
        actions = (
            await session.execute(select(AuditEntry.resource_id).where(AuditEntry.action == "webhook_delivery.retried"))
        ).scalars()
        assert {waiting.id, failed.id} <= set(actions)
    # Another environment's endpoint is not found.
    assert (await admin.get("/console/webhooks/not-an-endpoint")).status_code == 404


async def test_an_admin_deletes_an_endpoint_and_its_waiting_deliveries_go_with_it(
    app: FastAPI, console_as: ConsoleAs, tenancy: Tenancy
) -> None:
    admin = await console_as("admin")
    endpoint_id = await _add_endpoint(app, admin, tenancy, "https://hooks.example.com/c")
    [waiting] = await _queue_events(app, tenancy, 1)
    author = await console_as("author")
    assert (await author.post_form(f"/console/webhooks/{endpoint_id}/delete")).status_code == 403
    deleted = await admin.post_form(f"/console/webhooks/{endpoint_id}/delete")
    assert deleted.status_code == 303
    listed = await admin.get("/console/webhooks")
    assert "Endpoint https://hooks.example.com/c deleted" in listed.text and 'href="/console/webhooks/' not in listed.text
    async with app.state.sessionmaker() as session:
        assert await session.get(WebhookEndpoint, endpoint_id) is None
        job = await session.get(Job, waiting.id)
        assert job is not None and job.status == "canceled"
        # Ordered by nothing, the store may answer the two entries either way round (PostgreSQL does).
        actions = (await session.execute(select(AuditEntry.action).where(AuditEntry.resource_id == endpoint_id))).scalars()
        assert sorted(actions) == ["webhook_endpoint.created", "webhook_endpoint.deleted"]
        [entry] = (
            await session.execute(
                select(AuditEntry).where(AuditEntry.resource_id == endpoint_id, AuditEntry.action == "webhook_endpoint.deleted")
            )
        ).scalars().all()
        assert entry.action == "webhook_endpoint.deleted" and entry.actor_email == admin.member.email  # type: ignore[union-attr]
