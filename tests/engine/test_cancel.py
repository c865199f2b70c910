"""DELETE /v1/events/trigger/{transactionId}: what waits is canceled, and a digest others merged into lives on."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from herald.engine.worker import Worker
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, fast_forward, jobs_of, messages_of, trigger
from tests.fixtures.builders import create_subscriber, create_workflow

DIGEST = {"name": "digest", "template": {"type": "digest"}, "metadata": {"type": "regular", "amount": 5, "unit": "minutes"}}
SUMMARY = {
    "name": "summary",
    "template": {"type": "in_app", "content": "{{step.total_count}} events: {% for e in step.events %}{{e.n}} {% endfor %}"},
}


def name_of(workflow: dict[str, Any]) -> str:
    return workflow["triggers"][0]["identifier"]


async def step_statuses(app: FastAPI, transaction_id: str) -> list[str]:
    return [job.status for job in await jobs_of(app, transaction_id) if job.kind == "step"]


async def three_events_in_one_digest(api: httpx.AsyncClient, app: FastAPI, worker: Worker) -> tuple[dict[str, Any], list[str]]:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[DIGEST, SUMMARY])
    transactions = []
    for n in (1, 2, 3):
        result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"n": n})
        await worker.run_until_idle()
        transactions.append(result["transactionId"])
    assert [await step_statuses(app, t) for t in transactions] == [["delayed", "pending"]] + [["merged", "merged"]] * 2
    return subscriber, transactions


async def test_canceling_the_event_that_opened_a_digest_hands_the_digest_to_the_next(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber, [first, second, third] = await three_events_in_one_digest(api, app, worker)
    [master, _] = [job for job in await jobs_of(app, first) if job.kind == "step"]

    assert (await api.delete(f"/v1/events/trigger/{first}")).json() == {"data": True}

    assert await step_statuses(app, first) == ["canceled", "canceled"]
    [heir, after_heir] = [job for job in await jobs_of(app, second) if job.kind == "step"]
    assert (heir.status, heir.run_at, heir.merged_into, heir.data.get("digest_open")) == ("delayed", master.run_at, None, True)
    assert after_heir.status == "pending"
    [merged, _] = [job for job in await jobs_of(app, third) if job.kind == "step"]
    assert (merged.status, merged.merged_into) == ("merged", heir.id)
    canceled = [d.detail for d in await details_of(app, first) if d.status == "Warning"]
    assert len([d for d in canceled if d.startswith(f"Canceled: transaction {first} was canceled")]) == 2
    assert f"Digest handed on to job {heir.id}, the oldest event merged into it, with 1 more events" in canceled
    assert any(d.detail.startswith("Digest reopened by this event") for d in await details_of(app, second))

    await fast_forward(app, second)
    await worker.run_until_idle()

    [message] = await messages_of(app, tenancy.environment_id, subscriber_id=subscriber["_id"])
    assert message.content == "2 events: 2 3 "
    assert await step_statuses(app, second) == ["completed", "completed"]
    assert await step_statuses(app, third) == ["merged", "merged"]


async def test_canceling_an_event_merged_into_a_digest_leaves_it_out(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber, [first, second, _] = await three_events_in_one_digest(api, app, worker)

    assert (await api.delete(f"/v1/events/trigger/{second}")).json() == {"data": True}
    await fast_forward(app, first)
    await worker.run_until_idle()

    [message] = await messages_of(app, tenancy.environment_id, subscriber_id=subscriber["_id"])
    assert message.content == "2 events: 1 3 "
    assert await step_statuses(app, second) == ["canceled", "canceled"]
