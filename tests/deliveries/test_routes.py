"""Delivery providers' reports (POST /v2/inbound-webhooks/...) and GET /v1/execution-details."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from novu_py.models import WebhookResultDto
from sqlalchemy import select, update

from herald.app import build_worker
from herald.engine.worker import Worker
from herald.kit.time import isoformat
from herald.models import ExecutionDetail, Message
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow


@pytest.fixture
async def worker(app: FastAPI) -> AsyncIterator[Worker]:
    engine_worker = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    yield engine_worker
    if engine_worker.http is not None:
        await engine_worker.http.aclose()


async def delivered_message(api: httpx.AsyncClient, app: FastAPI, worker: Worker) -> tuple[Message, dict[str, Any]]:
    """A message the engine made for a fresh subscriber (an in-app step), and the subscriber."""
    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    response = await api.post(
        "/v1/events/trigger",
        json={
            "name": workflow["triggers"][0]["identifier"],
            "to": subscriber["subscriberId"],
            "payload": {"name": "Ada"},
        },
    )
    assert response.status_code == 201, response.text
    await worker.run_until_idle()
    async with app.state.sessionmaker() as session:
        message = (
            await session.execute(select(Message).where(Message.subscriber_id == subscriber["_id"]))
        ).scalar_one()
    assert message.job_id is not None
    return message, subscriber


async def stored(app: FastAPI, message_id: str) -> tuple[Message, list[ExecutionDetail]]:
    async with app.state.sessionmaker() as session:
        message = (await session.execute(select(Message).where(Message.id == message_id))).scalar_one()
        details = (
            await session.execute(
                select(ExecutionDetail)
                .where(ExecutionDetail.job_id == message.job_id, ExecutionDetail.source == "Webhook")
                .order_by(ExecutionDetail.created_at)
            )
        ).scalars()
        return message, list(details)


def track_url(tenancy: Tenancy, integration_id: str, environment_id: str | None = None) -> str:
    return f"/v2/inbound-webhooks/delivery-providers/{environment_id or tenancy.environment_id}/{integration_id}"


async def test_a_bounce_is_recorded_against_the_message(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    message, _ = await delivered_message(api, app, worker)
    integration = await create_integration(api)
    body = {
        "messageId": message.id,
        "status": "bounced",
        "date": "2026-01-02T03:04:05Z",
        "response": "550 no such user",
    }
    response = await api.post(track_url(tenancy, integration["_id"]), json=body)
    assert response.status_code == 200, response.text
    results = [WebhookResultDto.model_validate(item) for item in response.json()["data"]]
    assert len(results) == 1 and results[0].id == message.id
    assert results[0].event.status == "bounced" and results[0].event.date_ == "2026-01-02T03:04:05.000Z"
    assert json.loads(results[0].event.row or "") == body

    after, details = await stored(app, message.id)
    assert after.status == "error" and after.error_id == "provider_bounced"
    assert "550 no such user" in (after.error_text or "")
    assert [(d.status, d.source, d.provider_id, d.notification_id) for d in details] == [
        ("Failed", "Webhook", "sendgrid", message.notification_id)
    ]
    assert details[0].raw == body


async def test_an_open_by_the_providers_id_marks_the_message_seen(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    message, _ = await delivered_message(api, app, worker)
    async with app.state.sessionmaker() as session:
        await session.execute(update(Message).where(Message.id == message.id).values(provider_message_id="sg-123"))
        await session.commit()
    integration = await create_integration(api)
    # The shape push services use: eventId, eventType, timestamp in milliseconds.
    body = {"eventId": "sg-123", "eventType": "opened", "timestamp": 1767323045000}
    response = await api.post(track_url(tenancy, integration["_id"]), json=body)
    assert response.status_code == 200, response.text
    (result,) = response.json()["data"]
    assert result["id"] == "sg-123" and result["event"]["externalId"] == "sg-123"
    after, details = await stored(app, message.id)
    assert after.seen is True and after.status == "sent"
    assert isoformat(after.last_seen_date) == isoformat(after.first_seen_date) == "2026-01-02T03:04:05.000Z"
    assert [d.status for d in details] == ["Success"]
    # A later click moves the last time seen; an older event reported late does not.
    for date in ("2026-01-03T00:00:00Z", "2026-01-01T00:00:00Z"):
        response = await api.post(
            track_url(tenancy, integration["_id"]), json={"id": "sg-123", "status": "clicked", "date": date}
        )
        assert response.status_code == 200, response.text
    after, details = await stored(app, message.id)
    assert isoformat(after.first_seen_date) == "2026-01-02T03:04:05.000Z"
    assert isoformat(after.last_seen_date) == "2026-01-03T00:00:00.000Z"
    assert len(details) == 3


async def test_several_events_at_once(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    message, _ = await delivered_message(api, app, worker)
    integration = await create_integration(api)
    events = [{"id": message.id, "status": "deferred"}, {"id": message.id, "status": "DELIVERED"}]
    response = await api.post(track_url(tenancy, integration["_id"]), json={"events": events})
    assert response.status_code == 200, response.text
    assert [item["event"]["status"] for item in response.json()["data"]] == ["deferred", "delivered"]
    _, details = await stored(app, message.id)
    assert sorted(d.status for d in details) == ["Pending", "Success"]


async def test_a_dated_event_posted_again_is_recorded_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """A caller retrying activity.track (its answer lost) must not count the open twice; undated events happen when posted."""
    message, _ = await delivered_message(api, app, worker)
    integration = await create_integration(api)
    url = track_url(tenancy, integration["_id"])
    dated = {"messageId": message.id, "status": "opened", "date": "2026-01-02T03:04:05Z"}
    first = await api.post(url, json=dated)
    again = await api.post(url, json={"events": [dated, dated]})
    assert first.status_code == again.status_code == 200, again.text
    assert again.json()["data"] == first.json()["data"] * 2
    _, details = await stored(app, message.id)
    assert len(details) == 1
    # Another date is another event; an undated one is recorded each time it is posted.
    assert (await api.post(url, json={**dated, "date": "2026-01-02T03:04:06Z"})).status_code == 200
    for _ in range(2):
        assert (await api.post(url, json={"messageId": message.id, "status": "clicked"})).status_code == 200
    _, details = await stored(app, message.id)
    assert len(details) == 4


async def test_what_cannot_be_recorded_is_refused_and_nothing_is_written(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    message, _ = await delivered_message(api, app, worker)
    integration = await create_integration(api)
    url = track_url(tenancy, integration["_id"])
    assert_error(await api.post(url, json={"id": message.id, "status": "exploded"}), 422)
    assert_error(await api.post(url, json={"status": "delivered"}), 422)
    assert_error(await api.post(url, json={"id": message.id, "status": "delivered", "date": "yesterday"}), 422)
    # Not the generic form, so SendGrid's own (a JSON array of event objects): refused by its reader.
    assert_error(await api.post(url, json=[1, 2]), 400, "SendGrid's event webhook posts a JSON array of event objects")
    # One unknown message in the batch: none of it is recorded.
    unknown = {"events": [{"id": message.id, "status": "delivered"}, {"id": "nope", "status": "delivered"}]}
    assert_error(await api.post(url, json=unknown), 404, "Message with id nope not found")
    assert_error(await api.post(track_url(tenancy, "0" * 24), json={"id": message.id, "status": "sent"}), 404)
    _, details = await stored(app, message.id)
    assert details == []


async def test_scoped_to_the_callers_environment(
    api: httpx.AsyncClient,
    production_api: httpx.AsyncClient,
    other_org_api: httpx.AsyncClient,
    anonymous: httpx.AsyncClient,
    app: FastAPI,
    tenancy: Tenancy,
    worker: Worker,
) -> None:
    message, _ = await delivered_message(api, app, worker)
    integration = await create_integration(api)
    body = {"id": message.id, "status": "delivered"}
    # Another environment's key, with this environment in the path or its own.
    assert_error(await production_api.post(track_url(tenancy, integration["_id"]), json=body), 404)
    assert_error(
        await production_api.post(track_url(tenancy, integration["_id"], tenancy.production_environment_id), json=body),
        404,
    )
    assert_error(await other_org_api.post(track_url(tenancy, integration["_id"]), json=body), 404)
    assert_error(await anonymous.post(track_url(tenancy, integration["_id"]), json=body), 401)
    # This environment's integration cannot name another environment's message.
    production_integration = await create_integration(production_api)
    assert_error(
        await production_api.post(
            track_url(tenancy, production_integration["_id"], tenancy.production_environment_id), json=body
        ),
        404,
    )
    _, details = await stored(app, message.id)
    assert details == []


async def test_execution_details_of_a_notification(
    api: httpx.AsyncClient, other_org_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    message, subscriber = await delivered_message(api, app, worker)
    integration = await create_integration(api)
    response = await api.post(track_url(tenancy, integration["_id"]), json={"id": message.id, "status": "clicked"})
    assert response.status_code == 200, response.text

    params = {"notificationId": message.notification_id, "subscriberId": subscriber["subscriberId"]}
    response = await api.get("/v1/execution-details", params=params)
    assert response.status_code == 200, response.text
    details = response.json()["data"]
    assert details, "the engine's details and the webhook's"
    for detail in details:
        assert detail["_notificationId"] == message.notification_id
        assert detail["_subscriberId"] == subscriber["_id"]
        assert detail["_environmentId"] == tenancy.environment_id
        assert detail["_organizationId"] == tenancy.organization_id
        assert detail["_jobId"] == message.job_id
        assert detail["_messageId"] == message.id
        assert detail["transactionId"] == message.transaction_id
        assert detail["isTest"] is False
    assert details[-1]["source"] == "Webhook" and details[-1]["status"] == "Success"
    assert json.loads(details[-1]["raw"]) == {"id": message.id, "status": "clicked"}
    assert [d["createdAt"] for d in details] == sorted(d["createdAt"] for d in details)
    # The activity feed shows the same record under the message's job.
    activity = (await api.get(f"/v1/notifications/{message.notification_id}")).json()["data"]
    [job] = activity["jobs"]
    assert [d["source"] for d in job["executionDetails"]][-1] == "Webhook"

    other = await create_subscriber(api)
    empty = await api.get("/v1/execution-details", params={**params, "subscriberId": other["subscriberId"]})
    assert empty.status_code == 200 and empty.json()["data"] == []
    assert_error(await api.get("/v1/execution-details", params={**params, "subscriberId": "nobody"}), 404)
    assert_error(await api.get("/v1/execution-details", params={"notificationId": message.notification_id}), 422)
    assert_error(await other_org_api.get("/v1/execution-details", params=params), 404)
