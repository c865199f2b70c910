"""Expansion of a trigger into notifications: large audiences, failures, topic exclude lists."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, update

from herald.engine import expand
from herald.engine.repository import EngineRepository
from herald.engine.worker import Worker
from herald.models import Job, Notification
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, jobs_of, messages_of, set_aside_other_jobs, statements_while, trigger
from tests.fixtures.builders import create_subscriber, create_workflow, unique

IN_APP = {"name": "inbox", "template": {"type": "in_app", "content": "Hello"}}


def name_of(workflow: dict[str, Any]) -> str:
    return workflow["triggers"][0]["identifier"]


async def expansion_job(app: FastAPI, transaction_id: str) -> Job:
    [job] = [job for job in await jobs_of(app, transaction_id) if job.kind == "event"]
    return job


async def run_until_expansion_ends(worker: Worker, app: FastAPI, transaction_id: str) -> Job:
    """Worker rounds (retries included) until the expansion job is completed or failed."""
    for _ in range(200):
        await worker.run_until_idle()
        job = await expansion_job(app, transaction_id)
        if job.status in ("completed", "failed"):
            return job
        await asyncio.sleep(0.02)
    raise AssertionError("the expansion did not end")


async def notification_count(app: FastAPI, transaction_id: str) -> int:
    async with app.state.sessionmaker() as session:
        return int(
            await session.scalar(
                select(func.count()).select_from(Notification).where(Notification.transaction_id == transaction_id)
            )
            or 0
        )


async def topic_of(api: httpx.AsyncClient, size: int) -> tuple[str, list[str]]:
    key = unique("topic")
    ids = [unique("member") for _ in range(size)]
    for subscriber_id in ids:
        await create_subscriber(api, subscriberId=subscriber_id)
    assert (await api.post(f"/v1/topics/{key}/subscribers", json={"subscribers": ids})).status_code == 200
    return key, ids


class FailingMembers:
    """Makes ``topic_members_after`` raise on the given calls, or on every call from ``failing_from`` on (1-based)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, failing: set[int] | None = None, failing_from: int = 0) -> None:
        self.calls = 0
        self.failing = failing or set()
        self.failing_from = failing_from
        original = EngineRepository.topic_members_after

        async def members(repository: EngineRepository, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls in self.failing or 0 < self.failing_from <= self.calls:
                raise ConnectionError("the database went away")
            return await original(repository, *args, **kwargs)

        monkeypatch.setattr(EngineRepository, "topic_members_after", members)


async def test_a_committed_batch_is_progress_so_a_long_expansion_survives_a_later_error(
    api: httpx.AsyncClient, app: FastAPI, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, ids = await topic_of(api, 80)
    workflow = await create_workflow(api, steps=[IN_APP])
    monkeypatch.setattr(expand, "BATCH_SIZE", 10)
    # Eight batches of ten; the seventh fails once (after more batches than attempts).
    failing = FailingMembers(monkeypatch, failing={7})
    result = await trigger(api, name_of(workflow), {"type": "Topic", "topicKey": key})

    job = await run_until_expansion_ends(worker, app, result["transactionId"])

    assert failing.calls > 8
    assert job.status == "completed"
    assert await notification_count(app, result["transactionId"]) == len(ids)


async def test_an_expansion_that_fails_for_good_says_why_and_how_far_it_got(
    api: httpx.AsyncClient, app: FastAPI, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, _ = await topic_of(api, 3)
    workflow = await create_workflow(api, steps=[IN_APP])
    monkeypatch.setattr(expand, "BATCH_SIZE", 2)
    # The first batch (the direct recipient and two members) commits; every later one fails.
    FailingMembers(monkeypatch, failing_from=2)
    result = await trigger(api, name_of(workflow), [unique("direct"), {"type": "Topic", "topicKey": key}])

    job = await run_until_expansion_ends(worker, app, result["transactionId"])

    assert (job.status, job.attempts) == ("failed", job.max_attempts)
    assert job.error_text.startswith("Trigger expansion failed for good after 5 attempts: Internal error ")
    assert "ConnectionError: the database went away" in job.error_text
    failed = [d for d in await details_of(app, result["transactionId"]) if d.job_id == job.id and d.status == "Failed"]
    assert failed[-1].detail == job.error_text
    assert failed[-1].detail.endswith(
        "; 3 notifications were made before it stopped, the rest of the audience was not reached"
    )


async def test_a_trigger_to_thousands_of_new_subscribers_creates_them_all(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """More new subscribers than one PostgreSQL statement can insert (32,767 parameters): a ``to`` past
    the default cap of 1,000 recipients, as HERALD_MAX_RECIPIENTS allows."""
    # Not monkeypatch.setattr: its undo deletes what Starlette's State keeps in a dict of its own.
    settings = app.state.settings
    app.state.settings = dataclasses.replace(settings, max_recipients=5000)
    try:
        workflow = await create_workflow(api, steps=[IN_APP])
        prefix = unique("crowd")
        audience = [f"{prefix}-{n}" for n in range(4000)]
        worker.runner.batch_size = 0  # expand only: the steps are not the point here
        result = await trigger(api, name_of(workflow), audience)
    finally:
        app.state.settings = settings

    job = await run_until_expansion_ends(worker, app, result["transactionId"])

    assert job.status == "completed"
    assert await notification_count(app, result["transactionId"]) == 4000
    created = await api.get(f"/v1/subscribers/{audience[-1]}")
    assert created.status_code == 200, created.text
    # The 4,000 in-app steps are not needed: keep them from other tests' workers.
    async with app.state.sessionmaker() as session:
        await session.execute(
            update(Job).where(Job.transaction_id == result["transactionId"], Job.status == "queued").values(status="canceled")
        )
        await session.commit()


async def test_a_topics_exclude_list_leaves_members_out_of_that_topic_only(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    ada, bob, cy = [await create_subscriber(api) for _ in range(3)]
    first, second = unique("first"), unique("second")
    for key, members in ((first, [ada, bob, cy]), (second, [bob])):
        added = await api.post(f"/v1/topics/{key}/subscribers", json={"subscribers": [m["subscriberId"] for m in members]})
        assert added.status_code == 200, added.text
    workflow = await create_workflow(api, steps=[IN_APP])
    excluded = [ada["subscriberId"], bob["subscriberId"]]
    result = await trigger(
        api,
        name_of(workflow),
        [{"type": "Topic", "topicKey": first, "exclude": excluded}, {"type": "Topic", "topicKey": second}],
    )
    await worker.run_until_idle()

    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    # Bob is left out of the first topic, but the second reaches him; Ada is in the first only.
    assert sorted(m.subscriber_id for m in messages) == sorted([bob["_id"], cy["_id"]])


def reads_of(table: str) -> Callable[[str], bool]:
    """Keeps the SELECT statements that read ``table``."""
    return lambda statement: statement.lstrip().upper().startswith("SELECT") and f"FROM {table}" in statement


async def test_the_in_app_steps_settled_in_an_expansion_use_the_subscribers_it_read(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """One read of the subscribers table for a trigger's expansion and its in-app steps, with the fields the trigger set."""
    greeting = {"name": "inbox", "template": {"type": "in_app", "content": "Hello {{subscriber.firstName}}"}}
    workflow = await create_workflow(api, steps=[greeting])
    plain = await create_subscriber(api, firstName="Ada")
    renamed = await create_subscriber(api, firstName="G.")
    result = await trigger(api, name_of(workflow), [plain["subscriberId"], {"subscriberId": renamed["subscriberId"], "firstName": "Grace"}])

    await set_aside_other_jobs(app, tenancy.environment_id)
    reads = await statements_while(app, worker.run_until_idle(), reads_of("subscribers"))

    # A plain subscriberId and one whose fields change are read together, whole,
    # and the in-app steps run in the expansion take those rows.
    assert len(reads) == 1, reads
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert sorted(message.content for message in messages) == ["Hello Ada", "Hello Grace"]
    assert {job.status for job in await jobs_of(app, result["transactionId"])} == {"completed"}


async def test_a_long_expansion_keeps_its_place_ahead_of_the_steps_its_batches_made(
    api: httpx.AsyncClient, app: FastAPI, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expanding and delivering run side by side: a batch's steps do not hold back the next batch.

    Claims take the oldest jobs first. Queued again at the time its batch committed, the expansion of a large
    topic came after that batch's steps, and every batch waited for the one before to be delivered.
    """
    key, ids = await topic_of(api, 12)
    workflow = await create_workflow(api, steps=[IN_APP])
    monkeypatch.setattr(expand, "BATCH_SIZE", 4)
    worker.batch_size = 1  # one job a claim: which job comes first is the point
    worker.runner.batch_size = 0  # the steps stay queued for any worker, as in a large fan-out
    result = await trigger(api, name_of(workflow), {"type": "Topic", "topicKey": key})
    transaction_id = result["transactionId"]

    assert await worker.run_once() == 1  # the first batch: 4 notifications, their steps queued
    assert await notification_count(app, transaction_id) == 4
    assert await worker.run_once() == 1
    # The second claim took the expansion again, ahead of the first batch's four queued steps.
    assert await notification_count(app, transaction_id) == 8
    steps = [job for job in await jobs_of(app, transaction_id) if job.kind == "step"]
    assert [job.status for job in steps] == ["queued"] * 8

    job = await run_until_expansion_ends(worker, app, transaction_id)
    assert job.status == "completed"
    assert len(await messages_of(app, job.environment_id, transaction_id=transaction_id)) == len(ids)
