"""The throttle step: at most ``threshold`` runs per window go past it, counted exactly under concurrency."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import update

from herald.app import build_worker
from herald.engine.worker import Worker
from herald.kit.time import utcnow
from herald.models import ThrottleWindow
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, jobs_of, messages_of, trigger
from tests.fixtures.builders import create_subscriber, create_workflow

IN_APP = {"name": "inbox", "template": {"type": "in_app", "content": "Order {{payload.orderId}}"}}


def throttle(**metadata: Any) -> dict[str, Any]:
    return {"name": "throttle", "template": {"type": "throttle"}, "metadata": metadata}


async def throttled_workflow(api: httpx.AsyncClient, **metadata: Any) -> str:
    workflow = await create_workflow(api, steps=[throttle(**metadata), IN_APP])
    return str(workflow["triggers"][0]["identifier"])


async def run(api: httpx.AsyncClient, worker: Worker, name: str, to: Any, **payload: Any) -> str:
    data = await trigger(api, name, to, payload=payload)
    await worker.run_until_idle()
    return str(data["transactionId"])


async def test_threshold_runs_pass_and_the_rest_stop_at_the_step(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    name = await throttled_workflow(api, type="fixed", amount=1, unit="hours", threshold=2)
    subscriber = await create_subscriber(api)
    runs = [await run(api, worker, name, subscriber["subscriberId"], orderId=n) for n in range(4)]

    messages = await messages_of(app, tenancy.environment_id, channel="in_app")
    assert sorted(m.content for m in messages) == ["Order 0", "Order 1"]
    for transaction in runs[:2]:
        assert [job.status for job in await jobs_of(app, transaction) if job.kind != "event"] == [
            "completed",
            "completed",
        ]
    for number, transaction in enumerate(runs[2:], start=3):
        assert [job.status for job in await jobs_of(app, transaction) if job.kind != "event"] == [
            "canceled",
            "canceled",
        ]
        texts = [detail.detail for detail in await details_of(app, transaction)]
        assert any(text.startswith(f"Throttled: run {number} of at most 2 until ") for text in texts), texts
        assert "Workflow halted: the throttle step stopped it (1 steps not run)" in texts
    passed = [detail.detail for detail in await details_of(app, runs[1])]
    assert any(text.startswith("Throttle passed: run 2 of at most 2") for text in passed), passed


async def test_each_subscriber_and_key_is_counted_apart(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    name = await throttled_workflow(api, type="fixed", amount=1, unit="days", threshold=1, throttleKey="orderId")
    ada, grace = await create_subscriber(api), await create_subscriber(api)
    await run(api, worker, name, ada["subscriberId"], orderId="a")
    await run(api, worker, name, ada["subscriberId"], orderId="a")
    await run(api, worker, name, ada["subscriberId"], orderId="b")
    await run(api, worker, name, grace["subscriberId"], orderId="a")
    delivered = [(m.subscriber_id, m.content) for m in await messages_of(app, tenancy.environment_id, channel="in_app")]
    assert sorted(delivered) == sorted([(ada["_id"], "Order a"), (ada["_id"], "Order b"), (grace["_id"], "Order a")])


async def test_a_closed_window_opens_again_with_a_new_count(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    name = await throttled_workflow(api, type="fixed", amount=10, unit="minutes", threshold=1)
    subscriber = await create_subscriber(api)
    await run(api, worker, name, subscriber["subscriberId"], orderId=1)
    await run(api, worker, name, subscriber["subscriberId"], orderId=2)
    # The window closes (its end moved to the past instead of waiting ten minutes).
    async with app.state.sessionmaker() as session:
        await session.execute(
            update(ThrottleWindow)
            .where(ThrottleWindow.environment_id == tenancy.environment_id)
            .values(window_ends_at=utcnow() - timedelta(seconds=1))
        )
        await session.commit()
    reopened = await run(api, worker, name, subscriber["subscriberId"], orderId=3)
    contents = sorted(m.content for m in await messages_of(app, tenancy.environment_id, channel="in_app"))
    assert contents == ["Order 1", "Order 3"]
    texts = [detail.detail for detail in await details_of(app, reopened)]
    assert any(text.startswith("Throttle passed: run 1 of at most 1") for text in texts), texts


async def test_a_dynamic_window_comes_from_the_payload_and_a_missing_one_stops_the_run(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    name = await throttled_workflow(api, type="dynamic", dynamicKey="window", threshold=1)
    subscriber = await create_subscriber(api)
    await run(api, worker, name, subscriber["subscriberId"], orderId=1, window={"amount": 2, "unit": "hours"})
    second = await run(api, worker, name, subscriber["subscriberId"], orderId=2, window=7200)
    missing = await run(api, worker, name, subscriber["subscriberId"], orderId=3)
    assert [m.content for m in await messages_of(app, tenancy.environment_id, channel="in_app")] == ["Order 1"]
    assert [job.status for job in await jobs_of(app, second) if job.kind != "event"] == ["canceled", "canceled"]
    assert [job.status for job in await jobs_of(app, missing) if job.kind != "event"] == ["failed", "canceled"]
    texts = [detail.detail for detail in await details_of(app, missing)]
    assert "Throttle misconfigured: the payload has no window length at 'window' (dynamicKey)" in texts
    assert "Workflow halted: the throttle step failed (1 steps not run)" in texts


async def test_the_count_is_exact_under_fifty_concurrent_runs(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    name = await throttled_workflow(api, type="fixed", amount=1, unit="hours", threshold=5)
    subscriber = await create_subscriber(api)
    await asyncio.gather(*(trigger(api, name, subscriber["subscriberId"], payload={"orderId": n}) for n in range(50)))
    # Two workers at once, each running its batch's steps concurrently.
    settings = replace(app.state.settings, retry_base_seconds=0.01)
    workers = [build_worker(settings, app.state.sessionmaker) for _ in range(2)]
    try:
        await asyncio.gather(*(worker.run_until_idle() for worker in workers))
        await asyncio.gather(*(worker.run_until_idle() for worker in workers))
    finally:
        for worker in workers:
            await worker.http.aclose()
    messages = await messages_of(app, tenancy.environment_id, channel="in_app")
    assert len(messages) == 5
