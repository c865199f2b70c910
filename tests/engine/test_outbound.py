"""The outbound policy through the engine: trigger, worker, message and execution details."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.app import build_worker
from herald.engine.worker import Worker
from herald.models import Job
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, jobs_of, messages_of, trigger
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow
from tests.fixtures.peers import CountingListener

CHAT = {"name": "chat", "template": {"type": "chat", "content": "Deploy {{payload.version}} done"}}
REFUSAL = "outbound policy refused 127.0.0.1 (a loopback address); allow it with HERALD_OUTBOUND_ALLOW"
SECRET = "internal-service-secret-7f3a"  # in the listener's 200 answer


@pytest.fixture
def listener() -> Iterator[CountingListener]:
    server = CountingListener().start()
    yield server
    server.stop()


@pytest.fixture
async def strict_worker(app: FastAPI) -> AsyncIterator[Worker]:
    """A worker as production builds it without HERALD_OUTBOUND_ALLOW (the tests' app allows loopback)."""
    settings = replace(app.state.settings, outbound_allow=(), retry_base_seconds=0.01)
    engine_worker = build_worker(settings, app.state.sessionmaker)
    yield engine_worker
    if engine_worker.http is not None:
        await engine_worker.http.aclose()


async def settle(worker: Worker, app: FastAPI, transaction_id: str) -> list[Job]:
    final = {"completed", "failed", "skipped", "canceled", "merged"}
    jobs: list[Job] = []
    for _ in range(60):
        await worker.run_until_idle()
        jobs = [job for job in await jobs_of(app, transaction_id) if job.kind == "step"]
        if jobs and all(job.status in final for job in jobs):
            return jobs
        await asyncio.sleep(0.03)
    raise AssertionError(f"jobs did not settle: {[(job.step_type, job.status) for job in jobs]}")


async def chat_to(api: httpx.AsyncClient, webhook_url: str) -> tuple[dict[str, Any], str]:
    """A chat-webhook integration, a subscriber whose chat channel is ``webhook_url``, and a workflow that chats."""
    await create_integration(api, providerId="chat-webhook", channel="chat", active=True, credentials={})
    subscriber = await create_subscriber(api)
    response = await api.put(
        f"/v1/subscribers/{subscriber['subscriberId']}/credentials",
        json={"providerId": "chat-webhook", "credentials": {"webhookUrl": webhook_url}},
    )
    assert response.status_code == 200, response.text
    workflow = await create_workflow(api, steps=[CHAT])
    return subscriber, workflow["triggers"][0]["identifier"]


async def test_a_webhook_on_loopback_fails_for_good_naming_the_setting(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, strict_worker: Worker, listener: CountingListener
) -> None:
    subscriber, name = await chat_to(api, f"{listener.url}/hook")

    result = await trigger(api, name, subscriber["subscriberId"], payload={"version": "1.2"})
    [job] = await settle(strict_worker, app, result["transactionId"])

    assert listener.connections == 0
    assert (job.status, job.attempts) == ("failed", 1)  # permanent: not retried
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.status == "error"
    assert message.error_text == f"chat-webhook: {REFUSAL}"
    failed = [detail.detail for detail in await details_of(app, result["transactionId"]) if detail.status == "Failed"]
    assert f"Delivery failed: chat-webhook: {REFUSAL}" in failed


async def test_an_allowed_webhook_is_reached_and_its_answer_is_not_stored(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, listener: CountingListener
) -> None:
    """The tests' app allows loopback (HERALD_OUTBOUND_ALLOW); only the message id of the answer is kept."""
    subscriber, name = await chat_to(api, f"{listener.url}/hook")

    result = await trigger(api, name, subscriber["subscriberId"], payload={"version": "1.2"})
    [job] = await settle(worker, app, result["transactionId"])

    assert listener.connections == 1
    assert job.status == "completed"
    details = await details_of(app, result["transactionId"])
    [accepted] = [detail for detail in details if detail.status == "Success" and detail.provider_id == "chat-webhook"]
    assert accepted.raw == {"providerMessageId": "internal-1"}
    assert not any(SECRET in f"{detail.detail} {detail.raw}" for detail in details)
    activity = await api.get("/v1/notifications", params={"transactionId": result["transactionId"]})
    assert activity.status_code == 200 and "internal-1" in activity.text and SECRET not in activity.text
