"""Outbound webhooks: endpoints, signed deliveries that are retried, and the events that make them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from herald.app import build_worker
from herald.engine.worker import Worker
from herald.kit.time import isoformat, utcnow
from herald.models import Job, WebhookEndpoint
from herald.webhooks import queue as deliveries
from herald.webhooks.delivery import next_attempt_delay
from herald.webhooks.events import LISTENING
from tests.conftest import Tenancy
from tests.engine.conftest import trigger
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.fixtures.peers import (
    FLOOD_BYTES,
    FLOOD_IN_FLIGHT,
    FloodingHttpServer,
    HttpPeer,
    RecordedRequest,
    status_answer,
)

HOOK = "/hooks/herald"


@pytest.fixture(scope="module")
def _receiver() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    yield server
    server.stop()


@pytest.fixture
def receiver(_receiver: HttpPeer) -> Iterator[HttpPeer]:
    _receiver.reset()
    _receiver.route("POST", HOOK, status_answer(204))
    yield _receiver
    _receiver.reset()


@pytest.fixture(autouse=True)
def _fresh_directory() -> Iterator[None]:
    # Endpoints made by a test are heard of at once in this process; clear what other tests left.
    LISTENING._known.clear()
    yield
    LISTENING._known.clear()


async def add_endpoint(api: httpx.AsyncClient, url: str, event_types: list[str]) -> dict[str, Any]:
    response = await api.post("/v1/webhooks/endpoints", json={"url": url, "eventTypes": event_types, "description": "app"})
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


def verified(request: RecordedRequest, secret: str) -> dict[str, Any]:
    """The body, once the Standard Webhooks reference library accepts its signature."""
    return dict(Webhook(secret).verify(request.body, request.headers))


async def drain(worker: Worker, rounds: int = 40) -> None:
    for _ in range(rounds):
        await worker.run_until_idle()
        await asyncio.sleep(0.02)


# --- endpoints -------------------------------------------------------------------------------


async def test_an_endpoint_shows_its_secret_once_and_is_listed_and_deleted(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, receiver: HttpPeer
) -> None:
    created = await add_endpoint(api, receiver.url + HOOK, ["message.sent", "message.read"])
    assert created["secret"].startswith("whsec_") and created["eventTypes"] == ["message.sent", "message.read"]
    assert created["disabled"] is False and created["failingSince"] is None
    listed = (await api.get("/v1/webhooks/endpoints")).json()["data"]
    assert [item["_id"] for item in listed] == [created["_id"]]
    assert "secret" not in listed[0]
    # Another environment sees none of it.
    assert (await production_api.get("/v1/webhooks/endpoints")).json()["data"] == []
    assert (await production_api.delete(f"/v1/webhooks/endpoints/{created['_id']}")).status_code == 404
    assert (await api.delete(f"/v1/webhooks/endpoints/{created['_id']}")).status_code == 204
    assert (await api.get("/v1/webhooks/endpoints")).json()["data"] == []
    missing = await api.delete(f"/v1/webhooks/endpoints/{created['_id']}")
    assert missing.status_code == 404 and missing.json()["statusCode"] == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://example.com/x", "eventTypes": ["message.sent"]}, "url"),
        ({"url": "https://example.com/x", "eventTypes": ["message.teleported"]}, "eventTypes.0"),
        ({"url": "https://example.com/x", "eventTypes": []}, "eventTypes"),
        ({"eventTypes": ["message.sent"]}, "url"),
    ],
)
async def test_a_bad_endpoint_is_refused_with_the_field(api: httpx.AsyncClient, body: dict[str, Any], field: str) -> None:
    response = await api.post("/v1/webhooks/endpoints", json=body)
    assert response.status_code == 422, response.text
    assert field in response.json()["errors"], response.json()


# --- deliveries ------------------------------------------------------------------------------


async def test_a_sent_message_is_delivered_signed_with_a_stable_id(
    api: httpx.AsyncClient, tenancy: Tenancy, worker: Worker, receiver: HttpPeer
) -> None:
    endpoint = await add_endpoint(api, receiver.url + HOOK, ["message.sent"])
    ignored = await add_endpoint(api, receiver.url + "/other", ["workflow.updated"])
    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    transaction = (await trigger(api, workflow["triggers"][0]["identifier"], subscriber["subscriberId"], payload={"name": "Ada"}))[
        "transactionId"
    ]
    await drain(worker)
    [request] = receiver.requests_to(HOOK)
    event = verified(request, endpoint["secret"])
    assert event["type"] == "message.sent"
    assert event["data"]["transactionId"] == transaction
    assert event["data"]["subscriberId"] == subscriber["subscriberId"] and event["data"]["channel"] == "in_app"
    assert request.headers["webhook-id"].startswith("msg_")
    # A forged body does not verify.
    with pytest.raises(WebhookVerificationError):
        Webhook(endpoint["secret"]).verify(request.body.replace(b"in_app", b"email"), request.headers)
    assert receiver.requests_to("/other") == [] and ignored["eventTypes"] == ["workflow.updated"]


def test_retries_start_within_seconds_and_grow_to_hours() -> None:
    delays = [next_attempt_delay(attempt, 2.0) for attempt in range(1, 20)]
    assert delays[0] <= 3.0 and delays[1] <= 6.0
    # At most the cap, give or take its jitter (±50%).
    assert all(delay <= 1.5 * 4 * 3600 for delay in delays) and delays[-1] >= 3600


async def test_a_failing_receiver_gets_the_same_event_again_until_it_answers(
    api: httpx.AsyncClient, app: FastAPI, receiver: HttpPeer
) -> None:
    answers = iter([500, 503, 204])
    receiver.route("POST", HOOK, lambda request: status_answer(next(answers))(request))
    endpoint = await add_endpoint(api, receiver.url + HOOK, ["workflow.updated"])
    workflow = await create_workflow(api)
    assert (await api.put(f"/v1/workflows/{workflow['_id']}", json={"name": "Renamed"})).status_code == 200
    # Retries at their default pace: the test makes each one due instead of waiting for it.
    worker = build_worker(replace(app.state.settings, retry_base_seconds=30), app.state.sessionmaker)
    try:
        for attempt in range(3):
            await worker.run_until_idle()
            [listed] = (await api.get("/v1/webhooks/endpoints")).json()["data"]
            if attempt < 2:
                # After a failure the endpoint says since when it fails, and the retry waits its turn.
                assert listed["failingSince"] is not None and listed["disabled"] is False
                async with app.state.sessionmaker() as session, session.begin():
                    [job] = (await session.execute(select(Job).where(Job.kind == "webhook", Job.environment_id == workflow["_environmentId"]))).scalars()
                    assert job.status == "queued" and job.run_at > utcnow() + timedelta(seconds=5)
                    job.run_at = utcnow()
                    # The endpoint is paused too, at least as long as the first retry waits: its pause is over as well.
                    endpoint_row = await session.get(WebhookEndpoint, endpoint["_id"])
                    assert endpoint_row is not None and endpoint_row.paused_until is not None
                    assert endpoint_row.paused_until > utcnow() + timedelta(seconds=5)
                    endpoint_row.paused_until = utcnow()
    finally:
        await worker.http.aclose()
    attempts = receiver.requests_to(HOOK)
    assert len(attempts) == 3
    assert len({request.headers["webhook-id"] for request in attempts}) == 1
    assert [verified(request, endpoint["secret"])["data"]["name"] for request in attempts] == ["Renamed"] * 3
    [listed] = (await api.get("/v1/webhooks/endpoints")).json()["data"]
    assert listed["failingSince"] is None


async def test_after_a_day_of_failures_the_endpoint_is_disabled_with_the_reason(
    api: httpx.AsyncClient, app: FastAPI, worker: Worker, receiver: HttpPeer
) -> None:
    receiver.route("POST", HOOK, status_answer(500))
    await add_endpoint(api, receiver.url + HOOK, ["workflow.updated"])
    workflow = await create_workflow(api)
    await api.put(f"/v1/workflows/{workflow['_id']}", json={"name": "First"})
    await worker.run_until_idle()
    # The first attempt was 27 hours ago (instead of waiting a day), and the job is due again.
    async with app.state.sessionmaker() as session:
        [job] = (await session.execute(select(Job).where(Job.kind == "webhook", Job.environment_id == workflow["_environmentId"]))).scalars()
        job.data = {**job.data, "firstAttemptAt": isoformat(utcnow() - timedelta(hours=27))}
        job.run_at = utcnow()
        # Its endpoint's pause is over too.
        await session.execute(update(WebhookEndpoint).where(WebhookEndpoint.id == job.endpoint_id).values(paused_until=utcnow()))
        await session.commit()
    await worker.run_until_idle()
    [listed] = (await api.get("/v1/webhooks/endpoints")).json()["data"]
    assert listed["disabled"] is True
    assert "deliveries failed since" in listed["disabledReason"] and "500" in listed["disabledReason"]
    async with app.state.sessionmaker() as session:
        [job] = (await session.execute(select(Job).where(Job.kind == "webhook", Job.environment_id == workflow["_environmentId"]))).scalars()
    assert job.status == "failed"
    # Nothing more is queued for it.
    await api.put(f"/v1/workflows/{workflow['_id']}", json={"name": "Second"})
    async with app.state.sessionmaker() as session:
        count = len((await session.execute(select(Job).where(Job.kind == "webhook", Job.environment_id == workflow["_environmentId"]))).all())
    assert count == 1


async def test_an_address_the_outbound_policy_refuses_disables_the_endpoint(
    api: httpx.AsyncClient, worker: Worker
) -> None:
    await add_endpoint(api, "http://169.254.169.254/latest", ["workflow.updated"])
    workflow = await create_workflow(api)
    await api.put(f"/v1/workflows/{workflow['_id']}", json={"name": "Renamed"})
    await worker.run_until_idle()
    [listed] = (await api.get("/v1/webhooks/endpoints")).json()["data"]
    assert listed["disabled"] is True and "outbound policy refused 169.254.169.254" in listed["disabledReason"]


async def test_an_endpoint_answering_without_end_is_read_to_the_limit_and_hung_up_on(api: httpx.AsyncClient, worker: Worker) -> None:
    """200 MB offered: the delivery is settled on the status (2xx: delivered) and the rest is never read."""
    flood = await FloodingHttpServer().start()
    try:
        await add_endpoint(api, flood.url + HOOK, ["workflow.updated"])
        workflow = await create_workflow(api)
        await api.put(f"/v1/workflows/{workflow['_id']}", json={"name": "Renamed"})
        await worker.run_until_idle()
        written = await flood.wait_finished()
    finally:
        flood.close()
    [listed] = (await api.get("/v1/webhooks/endpoints")).json()["data"]
    assert listed["failingSince"] is None and listed["disabled"] is False
    assert written < FLOOD_IN_FLIGHT < FLOOD_BYTES


async def test_an_event_whose_worker_died_is_sent_by_another(
    api: httpx.AsyncClient, app: FastAPI, receiver: HttpPeer
) -> None:
    endpoint = await add_endpoint(api, receiver.url + HOOK, ["workflow.updated"])
    workflow = await create_workflow(api)
    await api.put(f"/v1/workflows/{workflow['_id']}", json={"name": "Renamed"})
    # A worker claims the job and dies before sending it.
    async with app.state.sessionmaker() as session, session.begin():
        claimed = await deliveries.claim_deliveries(session, endpoint["_id"], 100, "worker-that-died", lease_seconds=60)
    assert [job.kind for job in claimed] == ["webhook"]
    async with app.state.sessionmaker() as session, session.begin():
        await session.execute(update(Job).where(Job.id == claimed[0].id).values(locked_until=utcnow() - timedelta(seconds=1)))
    survivor = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    try:
        await survivor.runner.take_back_from_dead_workers()
        await survivor.run_until_idle()
    finally:
        await survivor.http.aclose()
    [request] = receiver.requests_to(HOOK)
    assert request.headers["webhook-id"] == claimed[0].data["webhookId"]
    assert verified(request, endpoint["secret"])["type"] == "workflow.updated"


async def test_read_seen_archived_and_preference_changes_are_events(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, receiver: HttpPeer
) -> None:
    endpoint = await add_endpoint(api, receiver.url + HOOK, ["message.read", "message.seen", "preference.updated"])
    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    await trigger(api, workflow["triggers"][0]["identifier"], subscriber["subscriberId"], payload={"name": "Ada"})
    await worker.run_until_idle()
    feed = (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed")).json()["data"]
    message_id = feed[0]["_id"]
    marked = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as", json={"messageId": message_id, "markAs": "read"}
    )
    assert marked.status_code == 201, marked.text
    patched = await api.patch(f"/v2/subscribers/{subscriber['subscriberId']}/preferences", json={"channels": {"email": False}})
    assert patched.status_code == 200, patched.text
    await drain(worker)
    events = sorted((verified(r, endpoint["secret"]) for r in receiver.requests_to(HOOK)), key=lambda e: e["type"])
    assert [event["type"] for event in events] == ["message.read", "preference.updated"]
    assert events[0]["data"]["messageId"] == message_id
    assert events[1]["data"]["subscriberId"] == subscriber["subscriberId"] and events[1]["data"]["channels"] == {"email": False}
