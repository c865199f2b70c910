"""A batch's events merging into one digest are written together: the digest locked once, not once per event."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import update

from herald.engine.steps.base import Detail, StepOutcome
from herald.engine.worker import Worker
from herald.models import Job
from tests.conftest import Tenancy
from tests.engine.conftest import (
    details_of,
    fast_forward,
    jobs_of,
    messages_of,
    set_aside_other_jobs,
    statements_while,
    trigger,
)
from tests.fixtures.builders import create_subscriber, create_workflow

DIGEST = {"name": "digest", "template": {"type": "digest"}, "metadata": {"type": "regular", "amount": 5, "unit": "minutes"}}
SUMMARY = {"name": "summary", "template": {"type": "in_app", "content": "{{step.total_count}} events"}}
EVENTS = 30


async def digest_workflow(api: httpx.AsyncClient) -> tuple[dict[str, Any], str]:
    """A subscriber and the identifier of a workflow digesting into an in-app summary."""
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[DIGEST, SUMMARY])
    return subscriber, workflow["triggers"][0]["identifier"]


async def digest_opened(api: httpx.AsyncClient, worker: Worker) -> tuple[dict[str, Any], str, dict[str, Any]]:
    subscriber, name = await digest_workflow(api)
    first = await trigger(api, name, subscriber["subscriberId"], payload={"n": 0})
    await worker.run_until_idle()
    return subscriber, name, first


async def job_updates_while(app: FastAPI, environment_id: str, work: Awaitable[Any]) -> list[str]:
    """The ``UPDATE jobs`` statements sent while ``work`` runs, no other environment's job due meanwhile."""
    await set_aside_other_jobs(app, environment_id)
    return await statements_while(app, work, lambda statement: statement.lstrip().startswith("UPDATE jobs"))


async def test_a_batch_of_events_merges_into_its_digest_in_one_transaction(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber, name, first = await digest_opened(api, worker)
    events = [{"name": name, "to": subscriber["subscriberId"], "payload": {"n": n}} for n in range(1, EVENTS + 1)]
    response = await api.post("/v1/events/trigger/bulk", json={"events": events})
    assert response.status_code == 201, response.text
    # One batch: the expansions and the digest steps they hand off.
    updates = await job_updates_while(app, tenancy.environment_id, worker.run_until_idle())
    # One by one, each merge was a transaction of its own: the job's UPDATE and its chain's, two an event.
    assert len(updates) < 10, updates

    [master, _] = [job for job in await jobs_of(app, first["transactionId"]) if job.kind == "step"]
    merged = [[job for job in await jobs_of(app, item["transactionId"]) if job.kind == "step"] for item in response.json()["data"]]
    assert {(step.status, step.merged_into, step.digest_key, rest.status) for step, rest in merged} == {("merged", master.id, "", "merged")}
    details = [d for item in response.json()["data"] for d in await details_of(app, item["transactionId"])]
    assert sum(d.detail == f"Merged into the digest of job {master.id}" for d in details) == EVENTS
    assert sum(d.detail == "Step digest queued; attempt 1" for d in details) == EVENTS
    await fast_forward(app, first["transactionId"])
    await worker.run_until_idle()
    [message] = await messages_of(app, tenancy.environment_id, subscriber_id=subscriber["_id"])
    assert message.content == f"{EVENTS + 1} events"


async def test_merges_into_a_digest_closed_meanwhile_are_left_to_be_worked_out_again(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber, name, first = await digest_opened(api, worker)
    [master, _] = [job for job in await jobs_of(app, first["transactionId"]) if job.kind == "step"]
    second = await trigger(api, name, subscriber["subscriberId"], payload={"n": 1})
    await worker.run_until_idle()
    [step, _] = [job for job in await jobs_of(app, second["transactionId"]) if job.kind == "step"]
    # The digest closes between a step's evaluation (merge into it) and the write.
    async with app.state.sessionmaker() as session, session.begin():
        await session.execute(update(Job).where(Job.id == master.id).values(status="completed"))
    [ctx] = await worker.runner._load_contexts([step])
    outcome = StepOutcome("merged", details=[Detail("Success", "merged")], merged_into=master.id, digest_key="")
    assert await worker.runner._merge_many([(ctx, outcome)]) == set()  # the one-by-one path opens the next digest


async def test_a_burst_opens_its_digest_once_and_the_rest_of_its_batch_merge_together(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """No digest open yet: the first batch's events would each open it; the first does, the others merge."""
    subscriber, name = await digest_workflow(api)
    events = [{"name": name, "to": subscriber["subscriberId"], "payload": {"n": n}} for n in range(EVENTS)]
    response = await api.post("/v1/events/trigger/bulk", json={"events": events})
    assert response.status_code == 201, response.text
    # One batch: the expansions and the digest steps they hand off.
    updates = await job_updates_while(app, tenancy.environment_id, worker.run_until_idle())
    # Each opening its own, all but one lost the race on the open-digest index and
    # were worked out again alone: a failed write, then a merge of their own.
    assert len(updates) < 12, len(updates)

    transactions = [item["transactionId"] for item in response.json()["data"]]
    steps = [[job for job in await jobs_of(app, transaction) if job.kind == "step"] for transaction in transactions]
    [master] = [step for step, _ in steps if step.status == "delayed"]
    merged = [(step.status, step.merged_into, rest.status) for step, rest in steps if step.id != master.id]
    assert merged == [("merged", master.id, "merged")] * (EVENTS - 1)
    details = [d.detail for transaction in transactions for d in await details_of(app, transaction)]
    assert details.count(f"Merged into the digest of job {master.id}") == EVENTS - 1
    assert sum(detail.startswith("Digest open until") for detail in details) == 1
    await fast_forward(app, master.transaction_id)
    await worker.run_until_idle()
    [message] = await messages_of(app, tenancy.environment_id, subscriber_id=subscriber["_id"])
    assert message.content == f"{EVENTS} events"
