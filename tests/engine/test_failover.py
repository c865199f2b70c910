"""Provider failover end to end: a channel's integrations in order, and the circuit breaker, against real local peers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from herald.app import build_worker
from herald.engine import breaker
from herald.engine.worker import Worker
from herald.models import IntegrationHealth, Job
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, jobs_of, messages_of, trigger
from tests.fixtures import peers
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow
from tests.fixtures.peers import HttpPeer, SmtpPeer

EMAIL = {
    "name": "mail",
    "template": {"type": "email", "subject": "Hi", "content": [{"type": "text", "content": "Order {{payload.order}}"}]},
}


@pytest.fixture
def smtp() -> Iterator[SmtpPeer]:
    server = SmtpPeer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def _peer() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    yield server
    server.stop()


@pytest.fixture
def peer(_peer: HttpPeer) -> Iterator[HttpPeer]:
    _peer.reset()
    yield _peer
    _peer.reset()


async def _worker(app: FastAPI, **settings: Any) -> Worker:
    return build_worker(replace(app.state.settings, retry_base_seconds=0.01, **settings), app.state.sessionmaker)


@pytest.fixture
async def breaker_worker(app: FastAPI) -> AsyncIterator[Worker]:
    """A worker whose breaker opens after two failures and stays open for a minute."""
    worker = await _worker(app, breaker_failures=2, breaker_cooldown_seconds=60)
    yield worker
    if worker.http is not None:
        await worker.http.aclose()


@pytest.fixture
async def worker(app: FastAPI) -> AsyncIterator[Worker]:
    """A worker with the breaker's default settings."""
    worker = await _worker(app)
    yield worker
    if worker.http is not None:
        await worker.http.aclose()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[timedelta]:
    """Move the breaker's clock: append to it (the offset from the real time)."""
    offset = [timedelta(0)]
    real = breaker.now
    monkeypatch.setattr(breaker, "now", lambda: real() + offset[-1])
    return offset


async def settle(worker: Worker, app: FastAPI, transaction_ids: list[str], rounds: int = 80) -> list[Job]:
    final = {"completed", "failed", "skipped", "canceled", "merged"}
    jobs: list[Job] = []
    for _ in range(rounds):
        await worker.run_until_idle()
        jobs = [j for t in transaction_ids for j in await jobs_of(app, t) if j.kind == "step"]
        if jobs and all(j.status in final for j in jobs):
            return jobs
        await asyncio.sleep(0.03)
    raise AssertionError(f"jobs did not settle: {[(j.step_type, j.status) for j in jobs]}")


def name_of(workflow: dict[str, Any]) -> str:
    return workflow["triggers"][0]["identifier"]


def smtp_credentials(port: int) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": str(port), "from": "herald@example.com", "ignoreTls": True}


def sendgrid(peer: HttpPeer, key: str) -> dict[str, Any]:
    return {"apiKey": key, "from": "herald@example.com", "baseUrl": peer.url}


async def integrations_by_identifier(api: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    response = await api.get("/v1/integrations")
    assert response.status_code == 200, response.text
    return {item["identifier"]: item for item in response.json()["data"]}


async def health_row(app: FastAPI, integration_id: str) -> IntegrationHealth | None:
    async with app.state.sessionmaker() as session:
        return (
            await session.execute(select(IntegrationHealth).where(IntegrationHealth.integration_id == integration_id))
        ).scalar_one_or_none()


async def test_a_refused_smtp_primary_fails_over_to_the_fallback_and_each_message_goes_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, smtp: SmtpPeer
) -> None:
    closed_port = peers.free_port()  # nothing listens there: connections are refused
    primary = await create_integration(
        api, providerId="nodemailer", identifier="smtp-down", active=True, credentials=smtp_credentials(closed_port)
    )
    fallback = await create_integration(
        api, providerId="nodemailer", identifier="smtp-up", active=True, credentials=smtp_credentials(smtp.port)
    )
    assert primary["primary"] and not fallback["primary"]
    workflow = await create_workflow(api, steps=[EMAIL])
    addresses = [f"user{n}@example.com" for n in range(3)]
    transactions = []
    for address in addresses:
        subscriber = await create_subscriber(api, email=address)
        transactions.append(
            (await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": address}))[
                "transactionId"
            ]
        )
    jobs = await settle(worker, app, transactions)

    # Every message delivered once, at the first attempt, through the fallback.
    assert [j.status for j in jobs] == ["completed"] * 3
    assert all(j.attempts == 1 for j in jobs)
    assert sorted(rcpt for mail in smtp.received for rcpt in mail.rcpt_tos) == sorted(addresses)
    messages = await messages_of(app, tenancy.environment_id, channel="email")
    assert len(messages) == 3
    assert {(m.status, m.delivery_key) for m in messages} == {("sent", "email:smtp-up")}
    for transaction_id in transactions:
        details = [d.detail for d in await details_of(app, transaction_id)]
        moved = [d for d in details if d.startswith("smtp-down (nodemailer) failed, moving on")]
        assert len(moved) == 1 and "could not reach SMTP server" in moved[0]
        assert any(d.startswith("Accepted by nodemailer through smtp-up (failover)") for d in details)
    # Three failures within the window, below the default five: failing, not skipped.
    shown = (await integrations_by_identifier(api))["smtp-down"]["health"]
    assert shown["status"] == "failing" and shown["consecutiveFailures"] == 3
    assert "skippedUntil" not in shown and shown["failingSince"]
    assert (await integrations_by_identifier(api))["smtp-up"]["health"] == {
        "status": "healthy",
        "consecutiveFailures": 0,
    }

    # A worker running one of the jobs again (its lease ran out) sends nothing twice.
    async with app.state.sessionmaker() as session:
        again = await session.get(Job, jobs[0].id)
        again.status = "queued"
        await session.commit()
    await settle(worker, app, transactions)
    assert len(smtp.received) == 3


async def test_an_http_primary_answering_500_fails_over_and_a_400_does_not(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    peers.install_resend(peer, api_key="re_ok")
    answers: list[int] = [500]
    peer.route(
        "POST",
        "/v3/mail/send",
        lambda request: peers.status_answer(answers[-1], {"errors": [{"message": f"status {answers[-1]}"}]})(request),
    )
    await create_integration(
        api, providerId="sendgrid", identifier="sendgrid-main", active=True, credentials=sendgrid(peer, "SG.main")
    )
    await create_integration(
        api,
        providerId="resend",
        identifier="resend-backup",
        active=True,
        credentials={"apiKey": "re_ok", "from": "herald@example.com", "baseUrl": peer.url},
    )
    subscriber = await create_subscriber(api, email="ada@example.com")
    workflow = await create_workflow(api, steps=[EMAIL])

    moved = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "A"})
    [job] = await settle(worker, app, [moved["transactionId"]])
    assert job.status == "completed" and job.attempts == 1
    assert [r.path for r in peer.requests] == ["/v3/mail/send", "/emails"]
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=moved["transactionId"])
    assert (message.status, message.provider_id, message.delivery_key) == ("sent", "resend", "email:resend-backup")
    details = await details_of(app, moved["transactionId"])
    [failed] = [d for d in details if "moving on" in d.detail]
    assert failed.provider_id == "sendgrid" and "500" in failed.detail
    assert (
        failed.raw is not None
        and failed.raw["integrationIdentifier"] == "sendgrid-main"
        and failed.raw["failover"] == "transient"
    )

    # A 400 is the request's fault: no other provider would take it either.
    peer.requests.clear()
    answers.append(400)
    refused = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "B"})
    [job] = await settle(worker, app, [refused["transactionId"]])
    assert job.status == "failed" and job.attempts == 1
    assert [r.path for r in peer.requests] == ["/v3/mail/send"]
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=refused["transactionId"])
    assert (
        message.status == "error"
        and message.delivery_key == "email:sendgrid-main"
        and "400" in (message.error_text or "")
    )
    # The permanent failure is not the provider's health: still one failure counted.
    shown = (await integrations_by_identifier(api))["sendgrid-main"]["health"]
    assert shown["consecutiveFailures"] == 1


async def test_when_every_integration_fails_transiently_the_job_retries_as_before(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    peer.route("POST", "/v3/mail/send", peers.status_answer(503, {"errors": [{"message": "unavailable"}]}))
    await create_integration(
        api, providerId="sendgrid", identifier="one", active=True, credentials=sendgrid(peer, "SG.1")
    )
    await create_integration(
        api, providerId="sendgrid", identifier="two", active=True, credentials=sendgrid(peer, "SG.2")
    )
    subscriber = await create_subscriber(api, email="ada@example.com")
    workflow = await create_workflow(api, steps=[EMAIL])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "C"})
    [job] = await settle(worker, app, [result["transactionId"]])
    assert job.status == "failed" and job.attempts == job.max_attempts
    # Each attempt asked both (five failures each: the default threshold, reached on the last attempt).
    keys = [r.headers.get("authorization") for r in peer.requests_to("/v3/mail/send")]
    assert keys.count("Bearer SG.1") == job.max_attempts and keys.count("Bearer SG.2") == job.max_attempts
    details = [d.detail for d in await details_of(app, result["transactionId"])]
    assert (
        sum("Every active email integration failed" in d and "will retry" in d for d in details) == job.max_attempts - 1
    )
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.status == "error" and "one:" in (message.error_text or "") and "two:" in (message.error_text or "")


async def test_the_breaker_opens_skips_lets_one_message_probe_and_closes(
    api: httpx.AsyncClient,
    app: FastAPI,
    tenancy: Tenancy,
    breaker_worker: Worker,
    peer: HttpPeer,
    clock: list[timedelta],
) -> None:
    peers.install_resend(peer, api_key="re_ok")
    primary_answers: list[int] = [500]

    def primary(request: peers.RecordedRequest):  # type: ignore[no-untyped-def]
        if primary_answers[-1] == 202:
            return peers.status_answer(202, None, {"X-Message-Id": "sg-1"})(request)
        return peers.status_answer(primary_answers[-1], {"errors": [{"message": "down"}]})(request)

    peer.route("POST", "/v3/mail/send", primary)
    main = await create_integration(
        api, providerId="sendgrid", identifier="main", active=True, credentials=sendgrid(peer, "SG.main")
    )
    await create_integration(
        api,
        providerId="resend",
        identifier="backup",
        active=True,
        credentials={"apiKey": "re_ok", "from": "herald@example.com", "baseUrl": peer.url},
    )
    workflow = await create_workflow(api, steps=[EMAIL])
    subscriber = await create_subscriber(api, email="ada@example.com")

    async def send(count: int) -> list[str]:
        ids = [
            (await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": str(n)}))[
                "transactionId"
            ]
            for n in range(count)
        ]
        jobs = await settle(breaker_worker, app, ids)
        assert [j.status for j in jobs] == ["completed"] * count
        return ids

    def primary_calls() -> int:
        return len(peer.requests_to("/v3/mail/send"))

    # Two failures (the threshold here) open the breaker.
    await send(1)
    assert (await integrations_by_identifier(api))["main"]["health"]["status"] == "failing"
    await send(1)
    assert primary_calls() == 2
    shown = (await integrations_by_identifier(api))["main"]["health"]
    assert shown["status"] == "skipped" and shown["consecutiveFailures"] == 2
    skipped_until = datetime.fromisoformat(shown["skippedUntil"].replace("Z", "+00:00"))
    assert timedelta(seconds=55) < skipped_until - breaker.now() <= timedelta(seconds=60)
    single = await api.put(f"/v1/integrations/{main['_id']}", json={"name": "Main"})
    assert single.json()["data"]["health"]["status"] == "skipped"

    # Open: the primary is not called; the activity feed names the skip.
    [skipping] = await send(1)
    assert primary_calls() == 2
    details = await details_of(app, skipping)
    [skip] = [d for d in details if d.detail.startswith("Skipped main (sendgrid)")]
    assert skip.status == "Warning" and "circuit breaker is open until" in skip.detail
    feed = await api.get("/v1/notifications", params={"transactionId": skipping})
    assert feed.status_code == 200
    feed_details = [
        d["detail"] for n in feed.json()["data"] for j in n.get("jobs", []) for d in j.get("executionDetails", [])
    ]
    assert any(d.startswith("Skipped main") for d in feed_details), feed_details

    # After the cool-down: half-open. Of three messages at once, one probes; its failure opens the breaker again.
    clock.append(timedelta(seconds=61))
    assert (await integrations_by_identifier(api))["main"]["health"]["status"] == "half-open"
    probes = await send(3)
    assert primary_calls() == 3
    probe_details = [d.detail for t in probes for d in await details_of(app, t)]
    assert sum(d.startswith("Probing main") for d in probe_details) == 1
    shown = (await integrations_by_identifier(api))["main"]["health"]
    assert shown["status"] == "skipped" and shown["consecutiveFailures"] == 3

    # The next cool-down: the provider is back, the probe succeeds and the breaker closes.
    primary_answers.append(202)
    clock.append(timedelta(seconds=122))
    [closing] = await send(1)
    assert primary_calls() == 4
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=closing)
    assert (message.provider_id, message.delivery_key) == ("sendgrid", "email:main")
    assert (await integrations_by_identifier(api))["main"]["health"] == {"status": "healthy", "consecutiveFailures": 0}
    assert await health_row(app, main["_id"]) is None
    await send(2)
    assert primary_calls() == 6


async def test_priorities_set_through_the_routes_order_the_fallbacks(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    down = {"SG.primary", "SG.low"}

    def answer(request: peers.RecordedRequest):  # type: ignore[no-untyped-def]
        key = (request.headers.get("authorization") or "").removeprefix("Bearer ")
        if key in down:
            return peers.status_answer(503, {"errors": [{"message": "down"}]})(request)
        return peers.status_answer(202, None, {"X-Message-Id": f"id-{key}"})(request)

    peer.route("POST", "/v3/mail/send", answer)
    primary = await create_integration(
        api, providerId="sendgrid", identifier="primary", active=True, credentials=sendgrid(peer, "SG.primary")
    )
    low = await create_integration(
        api, providerId="sendgrid", identifier="low", active=True, priority=5, credentials=sendgrid(peer, "SG.low")
    )
    high = await create_integration(
        api, providerId="sendgrid", identifier="high", active=True, priority=50, credentials=sendgrid(peer, "SG.high")
    )
    assert (primary["primary"], low["priority"], high["priority"]) == (True, 5, 50)
    subscriber = await create_subscriber(api, email="ada@example.com")
    workflow = await create_workflow(api, steps=[EMAIL])

    def keys_asked() -> list[str]:
        return [
            (r.headers.get("authorization") or "").removeprefix("Bearer ") for r in peer.requests_to("/v3/mail/send")
        ]

    first = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "1"})
    await settle(worker, app, [first["transactionId"]])
    assert keys_asked() == ["SG.primary", "SG.high"]

    # PUT moves "low" above "high"; it is down, so the message goes on to "high".
    updated = await api.put(f"/v1/integrations/{low['_id']}", json={"priority": 100})
    assert updated.status_code == 200 and updated.json()["data"]["priority"] == 100
    peer.requests.clear()
    second = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "2"})
    await settle(worker, app, [second["transactionId"]])
    assert keys_asked() == ["SG.primary", "SG.low", "SG.high"]
    moved = [d.detail.split(" ")[0] for d in await details_of(app, second["transactionId"]) if "moving on" in d.detail]
    assert moved == ["primary", "low"]

    # set-primary keeps its meaning: the new primary is first.
    made = await api.post(f"/v1/integrations/{high['_id']}/set-primary")
    assert made.status_code == 201 and made.json()["data"]["primary"] is True
    peer.requests.clear()
    third = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "3"})
    await settle(worker, app, [third["transactionId"]])
    assert keys_asked() == ["SG.high"]

    # A priority out of range is refused with the field named.
    bad = await api.put(f"/v1/integrations/{low['_id']}", json={"priority": -1})
    assert bad.status_code == 422 and "priority" in bad.text


async def test_an_override_picks_the_first_integration_and_failover_goes_on_in_priority_order(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    down = {"SG.chosen"}

    def answer(request: peers.RecordedRequest):  # type: ignore[no-untyped-def]
        key = (request.headers.get("authorization") or "").removeprefix("Bearer ")
        if key in down:
            return peers.status_answer(429, {"errors": [{"message": "slow down"}]})(request)
        return peers.status_answer(202, None, {"X-Message-Id": f"id-{key}"})(request)

    peer.route("POST", "/v3/mail/send", answer)
    await create_integration(
        api, providerId="sendgrid", identifier="primary", active=True, credentials=sendgrid(peer, "SG.primary")
    )
    await create_integration(
        api,
        providerId="sendgrid",
        identifier="second",
        active=True,
        priority=10,
        credentials=sendgrid(peer, "SG.second"),
    )
    await create_integration(
        api,
        providerId="sendgrid",
        identifier="chosen",
        active=True,
        priority=1,
        credentials=sendgrid(peer, "SG.chosen"),
    )
    subscriber = await create_subscriber(api, email="ada@example.com")
    workflow = await create_workflow(api, steps=[EMAIL])
    result = await trigger(
        api,
        name_of(workflow),
        subscriber["subscriberId"],
        payload={"order": "1"},
        overrides={"email": {"integrationIdentifier": "chosen"}},
    )
    [job] = await settle(worker, app, [result["transactionId"]])
    assert job.status == "completed"
    assert [(r.headers.get("authorization") or "") for r in peer.requests_to("/v3/mail/send")] == [
        "Bearer SG.chosen",
        "Bearer SG.primary",
    ]
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.delivery_key == "email:primary" and message.status == "sent"


async def test_two_workers_let_one_message_probe_a_half_open_integration(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, peer: HttpPeer
) -> None:
    peers.install_resend(peer, api_key="re_ok")
    peer.route("POST", "/v3/mail/send", peers.status_answer(503, {"errors": [{"message": "still down"}]}))
    main = await create_integration(
        api, providerId="sendgrid", identifier="main", active=True, credentials=sendgrid(peer, "SG.main")
    )
    await create_integration(
        api,
        providerId="resend",
        identifier="backup",
        active=True,
        credentials={"apiKey": "re_ok", "from": "herald@example.com", "baseUrl": peer.url},
    )
    # Its breaker opened a while ago and the cool-down is over: half-open.
    opened = breaker.now() - timedelta(seconds=40)
    async with app.state.sessionmaker() as session, session.begin():
        session.add(
            IntegrationHealth(
                integration_id=main["_id"],
                environment_id=tenancy.environment_id,
                failures=5,
                window_started_at=opened,
                consecutive_failures=5,
                failing_since=opened,
                skipped_until=opened + timedelta(seconds=30),
            )
        )
    workflow = await create_workflow(api, steps=[EMAIL])
    ids = []
    for n in range(6):
        subscriber = await create_subscriber(api, email=f"p{n}@example.com")
        ids.append(
            (await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": str(n)}))[
                "transactionId"
            ]
        )
    first, second = await _worker(app), await _worker(app)
    try:
        for _ in range(40):
            await asyncio.gather(first.run_until_idle(), second.run_until_idle())
            jobs = [j for t in ids for j in await jobs_of(app, t) if j.kind == "step"]
            if all(j.status == "completed" for j in jobs):
                break
            await asyncio.sleep(0.03)
    finally:
        for worker in (first, second):
            if worker.http is not None:
                await worker.http.aclose()
    assert [j.status for j in jobs] == ["completed"] * 6
    assert len(peer.requests_to("/v3/mail/send")) == 1
    assert len(peer.requests_to("/emails")) == 6
    details = [d.detail for t in ids for d in await details_of(app, t)]
    assert sum(d.startswith("Probing main") for d in details) == 1
    row = await health_row(app, main["_id"])
    assert row is not None and row.consecutive_failures == 6 and row.skipped_until > breaker.now()


async def test_sms_fails_over_too(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    peers.install_twilio(peer, account_sid="AC1", token="tok")
    peer.route("POST", "/2010-04-01/Accounts/AC9/Messages.json", peers.status_answer(502, {"message": "bad gateway"}))
    await create_integration(
        api,
        providerId="twilio",
        channel="sms",
        identifier="sms-down",
        active=True,
        credentials={"accountSid": "AC9", "token": "tok", "from": "+100", "baseUrl": peer.url},
    )
    await create_integration(
        api,
        providerId="twilio",
        channel="sms",
        identifier="sms-up",
        active=True,
        credentials={"accountSid": "AC1", "token": "tok", "from": "+100", "baseUrl": peer.url},
    )
    subscriber = await create_subscriber(api, phone="+15550002")
    workflow = await create_workflow(api, steps=[{"name": "text", "template": {"type": "sms", "content": "Hi"}}])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"])
    [job] = await settle(worker, app, [result["transactionId"]])
    assert job.status == "completed" and job.attempts == 1
    assert [r.path.split("/")[3] for r in peer.requests] == ["AC9", "AC1"]
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert (message.status, message.delivery_key, message.phone) == ("sent", "sms:sms-up", "+15550002")
