"""GET /metrics: Prometheus' text format, counts that move with the work, a token when one is set, no secret in a label."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import delete

from herald.engine.worker import Worker
from herald.kit.metrics import serve_port, store_gauges
from herald.kit.time import utcnow
from herald.models import IntegrationHealth
from tests.conftest import Tenancy, assert_error, make_client
from tests.engine.conftest import set_aside_other_jobs, trigger
from tests.fixtures import peers
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow
from tests.fixtures.metrics import Samples, parse
from tests.fixtures.peers import HttpPeer
from tests.fixtures.server import free_port

IN_APP = {"name": "inbox", "template": {"type": "in_app", "content": "Hello"}}
EMAIL = {"name": "mail", "template": {"type": "email", "subject": "Hi", "content": [{"type": "text", "content": "Order"}]}}

def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape(app: FastAPI, **headers: str) -> Samples:
    async with make_client(app, **headers) as client:
        response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


async def scrapes_around_a_delivery(
    app: FastAPI, api: httpx.AsyncClient, worker: Worker, step: dict[str, Any], subscriber: dict[str, Any]
) -> tuple[Samples, Samples]:
    """The scrapes before and after a one-step workflow was triggered for ``subscriber`` and the worker ran.

    The retries earlier tests left in the shared store wait meanwhile: they would be counted too.
    """
    await set_aside_other_jobs(app, subscriber["_environmentId"])
    workflow = await create_workflow(api, steps=[step])
    before = await scrape(app)
    await trigger(api, workflow["triggers"][0]["identifier"], subscriber["subscriberId"])
    await worker.run_until_idle()
    return before, await scrape(app)


@pytest.fixture
def peer() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    yield server
    server.stop()


async def test_a_delivered_trigger_moves_the_counts(app: FastAPI, api: httpx.AsyncClient, worker: Worker) -> None:
    before, after = await scrapes_around_a_delivery(app, api, worker, IN_APP, await create_subscriber(api))

    route = {"method": "POST", "route": "/v1/events/trigger"}
    assert value(after, "herald_http_requests_total", **route, status="201") == value(before, "herald_http_requests_total", **route, status="201") + 1
    assert value(after, "herald_http_request_duration_seconds_count", **route) == value(before, "herald_http_request_duration_seconds_count", **route) + 1
    sent = {"channel": "in_app", "status": "sent"}
    assert value(after, "herald_messages_total", **sent) == value(before, "herald_messages_total", **sent) + 1
    # The trigger's job waited from due to claimed (its in-app step is settled in the same round).
    assert value(after, "herald_job_wait_seconds_count") >= value(before, "herald_job_wait_seconds_count") + 1
    # Read from the store at the scrape: nothing is left waiting.
    assert value(after, "herald_jobs_ready", kind="step") == 0


async def test_routes_are_counted_by_template_and_no_label_carries_a_secret(app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy, worker: Worker) -> None:
    subscriber = await create_subscriber(api, email="grace.hopper@example.com", phone="+15550199")
    assert (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}")).status_code == 200
    workflow = await create_workflow(api, steps=[IN_APP])
    await trigger(api, workflow["triggers"][0]["identifier"], subscriber["subscriberId"])
    await worker.run_until_idle()
    async with make_client(app) as client:
        assert (await client.get(f"/v1/subscribers/{subscriber['subscriberId']}", headers={"Authorization": f"ApiKey {tenancy.api_key}"})).status_code == 200
        await client.get("/no/such/route/grace.hopper@example.com")
        await client.request("BREW-GRACE", "/v1/subscribers")

    samples = await scrape(app)

    assert value(samples, "herald_http_requests_total", method="GET", route="/v1/subscribers/{subscriberId}", status="200") >= 2
    assert value(samples, "herald_http_requests_total", method="GET", route="unmatched", status="404") >= 1
    # A method a client made up is counted, under "other".
    assert [labels for name, labels in samples if name == "herald_http_requests_total" and ("method", "other") in labels]
    assert not [labels for _, labels in samples if any("BREW" in label for _, label in labels)]
    secrets = {subscriber["subscriberId"], subscriber["_id"], "grace.hopper@example.com", "+15550199", tenancy.api_key, tenancy.environment_id}
    label_values = {label for _, labels in samples for _, label in labels}
    assert not label_values & secrets
    assert not [label for label in label_values if any(secret in label for secret in secrets)]


async def test_the_token_is_required_when_it_is_set(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app, "metrics_token", "scrape-token-1")
    async with make_client(app) as client:
        missing = await client.get("/metrics")
        wrong = await client.get("/metrics", headers={"Authorization": "Bearer scrape-token-2"})
        other_scheme = await client.get("/metrics", headers={"Authorization": "ApiKey scrape-token-1"})
    for response in (missing, wrong, other_scheme):
        body = assert_error(response, 401)
        assert "HERALD_METRICS_TOKEN" in body["message"] and "herald_" not in response.text

    samples = await scrape(app, Authorization="Bearer scrape-token-1")
    assert ("herald_sockets_connected", ()) in samples


async def test_provider_calls_are_counted_by_outcome(app: FastAPI, api: httpx.AsyncClient, worker: Worker, peer: HttpPeer) -> None:
    peer.route("POST", "/v3/mail/send", peers.status_answer(503, {"errors": [{"message": "unavailable"}]}))
    await create_integration(api, providerId="sendgrid", active=True, credentials={"apiKey": "SG.metrics", "from": "a@example.com", "baseUrl": peer.url})
    before, after = await scrapes_around_a_delivery(app, api, worker, EMAIL, await create_subscriber(api, email="ada@example.com"))

    failed = {"provider": "sendgrid", "outcome": "transient_error"}
    # One a request the provider answered (the retries that came due while the worker ran included).
    sends = len(peer.requests_to("/v3/mail/send"))
    assert sends >= 1
    assert value(after, "herald_provider_requests_total", **failed) == value(before, "herald_provider_requests_total", **failed) + sends
    assert value(after, "herald_provider_request_duration_seconds_count", provider="sendgrid") == value(before, "herald_provider_request_duration_seconds_count", provider="sendgrid") + sends


async def test_the_access_log_has_a_line_a_request_unless_it_is_off(app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO, logger="herald.access")
    subscriber = await create_subscriber(api)
    [line] = [record for record in caplog.records if record.name == "herald.access"]
    fields: dict[str, Any] = line.fields  # type: ignore[attr-defined]
    assert {key: fields[key] for key in ("method", "route", "status", "environment")} == {
        "method": "POST",
        "route": "/v1/subscribers",
        "status": 201,
        "environment": tenancy.environment_id,
    }
    assert fields["durationMs"] >= 0
    assert subscriber["subscriberId"] not in line.getMessage()

    caplog.clear()
    assert app.http_metrics is not None
    monkeypatch.setattr(app.http_metrics, "access_log", False)
    await api.get(f"/v1/subscribers/{subscriber['subscriberId']}")
    assert not [record for record in caplog.records if record.name == "herald.access"]


async def test_a_workers_metrics_port(app: FastAPI) -> None:
    port = free_port()
    server = await serve_port("127.0.0.1", port, "worker-token", store_gauges(app.state.sessionmaker))
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            refused = await client.get("/metrics")
            elsewhere = await client.get("/other", headers={"Authorization": "Bearer worker-token"})
            scraped = await client.get("/metrics", headers={"Authorization": "Bearer worker-token"})
    finally:
        server.close()
        await server.wait_closed()
    assert refused.status_code == 401 and refused.json()["statusCode"] == 401
    assert elsewhere.status_code == 404
    assert scraped.status_code == 200
    samples = parse(scraped.text)
    assert ("herald_jobs_ready", (("kind", "step"),)) in samples


async def test_open_circuit_breakers_are_read_from_the_store(app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    integration = await create_integration(api, providerId="postmark", channel="email", active=True, credentials={"apiKey": "pm-metrics", "from": "a@example.com"})
    # The gauge counts the whole installation's breakers; on the shared PostgreSQL store earlier
    # tests may have left theirs open, so the count is read before and compared after.
    before = value(await scrape(app), "herald_circuit_open", provider="postmark")
    async with app.state.sessionmaker() as session, session.begin():
        session.add(
            IntegrationHealth(
                integration_id=integration["_id"],
                environment_id=tenancy.environment_id,
                failures=5,
                consecutive_failures=5,
                failing_since=utcnow(),
                skipped_until=utcnow() + timedelta(minutes=5),
            )
        )

    assert value(await scrape(app), "herald_circuit_open", provider="postmark") == before + 1

    async with app.state.sessionmaker() as session, session.begin():
        await session.execute(delete(IntegrationHealth).where(IntegrationHealth.integration_id == integration["_id"]))
    assert value(await scrape(app), "herald_circuit_open", provider="postmark") == before
