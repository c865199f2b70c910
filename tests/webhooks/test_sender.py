"""Webhook deliveries beside the workflow steps: a backlog for a slow or dead endpoint holds up neither the steps nor other endpoints."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, update
from starlette.responses import Response

from herald.app import build_worker
from herald.kit.time import utcnow
from herald.models import Job, WebhookEndpoint
from herald.webhooks.events import LISTENING, emit
from tests.conftest import Tenancy
from tests.engine.conftest import messages_of, trigger
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.fixtures.peers import HttpPeer, RecordedRequest, status_answer

# As long as an endpoint's pause may last (delivery.PAUSE_CAP_SECONDS): as the retry base, every pause is that long.
LONG_PAUSE_SECONDS = 300.0
SLOW = "/hooks/slow"
DEAD = "/hooks/dead"
HEALTHY = "/hooks/healthy"


@pytest.fixture(scope="module")
def _receiver() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    yield server
    server.stop()


@pytest.fixture
def receiver(_receiver: HttpPeer) -> Iterator[HttpPeer]:
    _receiver.reset()
    yield _receiver
    _receiver.reset()


@pytest.fixture(autouse=True)
def _fresh_directory() -> Iterator[None]:
    LISTENING._known.clear()
    yield
    LISTENING._known.clear()


def held_until(release: threading.Event) -> Any:
    """A receiver that holds each request until ``release`` is set, then answers 204."""

    async def answer(_: RecordedRequest) -> Response:
        while not release.is_set():
            await asyncio.sleep(0.02)
        return Response(status_code=204)

    return answer


async def add_endpoint(api: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await api.post("/v1/webhooks/endpoints", json={"url": url, "eventTypes": ["workflow.updated"]})
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


async def queue_events(app: FastAPI, tenancy: Tenancy, count: int) -> None:
    """``count`` workflow.updated events, queued as any change queues them (emit, in the change's transaction)."""
    async with app.state.sessionmaker() as session, session.begin():
        items = [{"name": f"event {n}", "n": n} for n in range(count)]
        assert await emit(session, tenancy.environment_id, tenancy.organization_id, "workflow.updated", items) > 0


async def deliveries_of(app: FastAPI, endpoint_id: str, status: str) -> int:
    async with app.state.sessionmaker() as session:
        count = await session.scalar(
            select(func.count()).select_from(Job).where(Job.kind == "webhook", Job.endpoint_id == endpoint_id, Job.status == status)
        )
    return int(count or 0)


async def test_a_backlog_for_a_slow_endpoint_does_not_hold_up_a_new_triggers_step(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, receiver: HttpPeer
) -> None:
    """3,000 deliveries wait for an endpoint that holds every request; a trigger's in-app step runs meanwhile.

    Before, the worker claimed the deliveries with the steps, oldest first,
    and ran each batch of them to its end (the endpoint's 15 s) before claiming
    again: the trigger waited behind all 3,000.
    """
    release = threading.Event()
    receiver.route("POST", SLOW, held_until(release))
    endpoint = await add_endpoint(api, receiver.url + SLOW)
    await queue_events(app, tenancy, 3000)
    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    worker = build_worker(app.state.settings, app.state.sessionmaker, signal=app.state.job_signal)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run_forever(stop))
    try:
        # The endpoint has taken its first deliveries, and holds them.
        for _ in range(500):
            if receiver.requests_to(SLOW):
                break
            await asyncio.sleep(0.02)
        transaction = (await trigger(api, workflow["triggers"][0]["identifier"], subscriber["subscriberId"]))["transactionId"]
        for _ in range(1500):  # wait on the message (at most 30 s)
            if await messages_of(app, tenancy.environment_id, transaction_id=transaction):
                break
            await asyncio.sleep(0.02)
        [message] = await messages_of(app, tenancy.environment_id, transaction_id=transaction)
        assert message.channel == "in_app"
        # Not yet: the backlog is still there, the endpoint holding no more than its share of the sender.
        assert len(receiver.requests_to(SLOW)) <= app.state.settings.webhook_endpoint_concurrency
        assert await deliveries_of(app, endpoint["_id"], "queued") >= 3000 - app.state.settings.webhook_endpoint_concurrency
    finally:
        stop.set()
        release.set()
        await asyncio.wait_for(running, 30)
        if worker.http is not None:
            await worker.http.aclose()
    # The backlog goes with its endpoint (canceled, with why), so it does not outlive the test.
    assert (await api.delete(f"/v1/webhooks/endpoints/{endpoint['_id']}")).status_code == 204
    assert await deliveries_of(app, endpoint["_id"], "queued") == 0
    async with app.state.sessionmaker() as session:
        reasons = set(
            (await session.execute(select(Job.error_text).where(Job.endpoint_id == endpoint["_id"], Job.status == "canceled"))).scalars()
        )
    assert reasons == {"the endpoint was deleted"}


async def test_a_dead_endpoint_is_tried_once_a_pause_while_another_endpoints_events_go_out(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, receiver: HttpPeer
) -> None:
    """200 events for a dead endpoint cost it a few attempts, not 200, and a healthy endpoint gets all of its 200.

    Then the pause ends and the endpoint is back: one delivery probes it, and
    everything it missed is delivered, each event at least once.
    """
    receiver.route("POST", DEAD, status_answer(503))
    receiver.route("POST", HEALTHY, status_answer(204))
    dead = await add_endpoint(api, receiver.url + DEAD)
    await add_endpoint(api, receiver.url + HEALTHY)
    await queue_events(app, tenancy, 200)
    # Pauses of the longest: the drains below end well within the first.
    worker = build_worker(replace(app.state.settings, retry_base_seconds=LONG_PAUSE_SECONDS), app.state.sessionmaker)
    try:
        await worker.run_until_idle()
        assert len({request.headers["webhook-id"] for request in receiver.requests_to(HEALTHY)}) == 200
        attempts = receiver.requests_to(DEAD)
        # The first claim's share (HERALD_WEBHOOK_ENDPOINT_CONCURRENCY), sent before the first failure paused
        # the endpoint; nothing after.
        assert 1 <= len(attempts) <= app.state.settings.webhook_endpoint_concurrency
        assert await deliveries_of(app, dead["_id"], "queued") == 200  # waiting, none given up
        [listed] = [item for item in (await api.get("/v1/webhooks/endpoints")).json()["data"] if item["_id"] == dead["_id"]]
        assert listed["failingSince"] is not None and listed["disabled"] is False

        # Another drain while it is paused: not one attempt more.
        await worker.run_until_idle()
        assert len(receiver.requests_to(DEAD)) == len(attempts)

        # The endpoint is back and its pause over (instead of waiting for it): one delivery probes it, alone.
        receiver.route("POST", DEAD, status_answer(204))
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(update(WebhookEndpoint).where(WebhookEndpoint.id == dead["_id"]).values(paused_until=utcnow()))
        await worker.webhooks.run_once()
        assert len(receiver.requests_to(DEAD)) == len(attempts) + 1
        # Its success ends the pause, and the rest go out, the failed ones once their retry is due.
        await worker.run_until_idle()
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(
                update(Job).where(Job.endpoint_id == dead["_id"], Job.status == "queued").values(run_at=utcnow())
            )
        await worker.run_until_idle()
    finally:
        if worker.http is not None:
            await worker.http.aclose()
    assert len({request.headers["webhook-id"] for request in receiver.requests_to(DEAD)}) == 200
    assert await deliveries_of(app, dead["_id"], "completed") == 200
    [listed] = [item for item in (await api.get("/v1/webhooks/endpoints")).json()["data"] if item["_id"] == dead["_id"]]
    assert listed["failingSince"] is None


async def test_two_workers_probe_a_paused_endpoint_with_one_delivery(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, receiver: HttpPeer
) -> None:
    receiver.route("POST", DEAD, status_answer(503))
    dead = await add_endpoint(api, receiver.url + DEAD)
    await queue_events(app, tenancy, 50)
    workers = [
        build_worker(replace(app.state.settings, retry_base_seconds=LONG_PAUSE_SECONDS), app.state.sessionmaker) for _ in range(2)
    ]
    try:
        await workers[0].run_until_idle()
        first = len(receiver.requests_to(DEAD))
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(update(WebhookEndpoint).where(WebhookEndpoint.id == dead["_id"]).values(paused_until=utcnow()))
        claimed = await asyncio.gather(*(worker.webhooks.claim() for worker in workers))
        assert sum(1 for jobs in claimed for job in jobs if job.endpoint_id == dead["_id"]) == 1
        for worker, jobs in zip(workers, claimed, strict=True):
            await asyncio.gather(*worker.webhooks.start(jobs))
        assert len(receiver.requests_to(DEAD)) == first + 1
    finally:
        for worker in workers:
            if worker.http is not None:
                await worker.http.aclose()
    # The failed probe paused it again: nothing more is sent to it.
    await workers[0].webhooks.run_once()
    assert len(receiver.requests_to(DEAD)) == first + 1
    assert (await api.delete(f"/v1/webhooks/endpoints/{dead['_id']}")).status_code == 204


def test_a_pause_lasts_as_long_as_the_endpoint_has_been_failing_within_bounds() -> None:
    from datetime import timedelta

    from herald.webhooks.delivery import PAUSE_CAP_SECONDS, pause_after_failure

    assert LONG_PAUSE_SECONDS == PAUSE_CAP_SECONDS

    now = utcnow()
    assert pause_after_failure(None, now, 2.0) == 2.0  # the first failure
    assert pause_after_failure(now - timedelta(seconds=1), now, 2.0) == 2.0
    assert pause_after_failure(now - timedelta(seconds=40), now, 2.0) == 40.0
    assert pause_after_failure(now - timedelta(hours=3), now, 2.0) == PAUSE_CAP_SECONDS

