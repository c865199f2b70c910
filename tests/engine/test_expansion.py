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
from herald.engine.expand import is_part
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
    """The trigger's event job (not one of the parts it queued)."""
    [job] = [job for job in await jobs_of(app, transaction_id) if job.kind == "event" and not is_part(job)]
    return job


async def parts_of(app: FastAPI, transaction_id: str) -> list[Job]:
    return [job for job in await jobs_of(app, transaction_id) if job.kind == "event" and is_part(job)]


async def run_until_expansion_ends(worker: Worker, app: FastAPI, transaction_id: str) -> Job:
    """Worker rounds (retries included) until the event job and its parts are completed or failed."""
    for _ in range(200):
        await worker.run_until_idle()
        jobs = [job for job in await jobs_of(app, transaction_id) if job.kind == "event"]
        if all(job.status in ("completed", "failed") for job in jobs):
            return await expansion_job(app, transaction_id)
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
    monkeypatch.setattr(expand, "PARTS_PER_ROUND", 1)
    # The first round (the direct recipient, and a part queued for two members) commits; every later read fails.
    FailingMembers(monkeypatch, failing_from=2)
    result = await trigger(api, name_of(workflow), [unique("direct"), {"type": "Topic", "topicKey": key}])

    job = await run_until_expansion_ends(worker, app, result["transactionId"])

    assert (job.status, job.attempts) == ("failed", job.max_attempts)
    assert job.error_text.startswith("Trigger expansion failed for good after 5 attempts: Internal error ")
    assert "ConnectionError: the database went away" in job.error_text
    details = await details_of(app, result["transactionId"])
    failed = [d for d in details if d.job_id == job.id and d.status == "Failed"]
    assert failed[-1].detail == job.error_text
    assert failed[-1].detail.endswith(
        "; 1 notifications were made before it stopped, the rest of the audience was not reached"
    )
    # The part it queued failed too, and says so of its own range.
    [part] = await parts_of(app, result["transactionId"])
    assert (part.status, part.attempts) == ("failed", part.max_attempts)
    [part_failed] = [d for d in details if d.job_id == part.id and d.status == "Failed"][-1:]
    assert part_failed.detail.endswith(
        "; 0 notifications of this part of the audience were made before it stopped, the rest of the part was not reached"
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


EMAIL = {"name": "mail", "template": {"type": "email", "subject": "Hi", "content": "Hello"}}


async def test_a_large_audience_is_shared_out_in_parts_that_go_ahead_of_the_steps_they_make(
    api: httpx.AsyncClient, app: FastAPI, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expanded by its event job alone, a large fan-out was one worker's serial work.

    The event job queues a part per batch of members, at its trigger's time: claims take the oldest first, so
    the expansion, parts and all, goes before the steps it makes, and expanding and delivering run side by side.
    """
    key, ids = await topic_of(api, 12)
    workflow = await create_workflow(api, steps=[EMAIL])
    monkeypatch.setattr(expand, "BATCH_SIZE", 4)
    monkeypatch.setattr(expand, "PARTS_PER_ROUND", 1)
    worker.batch_size = 1  # one job a claim: which job comes first is the point
    result = await trigger(api, name_of(workflow), {"type": "Topic", "topicKey": key})
    transaction_id = result["transactionId"]

    assert await worker.run_once() == 1  # the event job's first round: a part for the first four members
    assert await notification_count(app, transaction_id) == 0
    [part] = await parts_of(app, transaction_id)
    assert (part.status, part.data["after"], part.data["source"]) == ("queued", "", "topics")

    rounds = 1
    while await notification_count(app, transaction_id) < len(ids):
        assert await worker.run_once() == 1
        rounds += 1
        steps = [job for job in await jobs_of(app, transaction_id) if job.kind == "step"]
        # No step ran while the expansion went on: its rounds came first.
        assert {job.status for job in steps} <= {"queued"}, rounds
    parts = await parts_of(app, transaction_id)
    assert len(parts) == 3 and all(part.status == "completed" for part in parts)
    assert len([job for job in await jobs_of(app, transaction_id) if job.kind == "step"]) == len(ids)


async def test_a_worker_keeps_one_part_of_a_claim_and_queues_the_others_again(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every part is due at the trigger's time, so one claim takes them all: past what the worker expands at
    once (``GROUPS_AT_ONCE``), the others go back for other workers."""
    key, ids = await topic_of(api, 12)
    workflow = await create_workflow(api, steps=[IN_APP])
    monkeypatch.setattr(expand, "BATCH_SIZE", 4)
    await set_aside_other_jobs(app, tenancy.environment_id)
    result = await trigger(api, name_of(workflow), {"type": "Topic", "topicKey": key})
    transaction_id = result["transactionId"]

    await worker.run_once()  # the event job: three parts queued, and done
    assert (await expansion_job(app, transaction_id)).status == "completed"
    assert len(await parts_of(app, transaction_id)) == 3
    await worker.run_once()  # claims the three parts, expands two side by side
    parts = sorted(await parts_of(app, transaction_id), key=lambda job: job.status)
    assert expand.GROUPS_AT_ONCE == 2
    assert [(job.status, job.attempts) for job in parts] == [("completed", 0), ("completed", 0), ("queued", 0)]
    # Their members' in-app messages were stored in the parts' own transactions: no step was left for a worker.
    assert await notification_count(app, transaction_id) == 8
    assert len(await messages_of(app, tenancy.environment_id, transaction_id=transaction_id)) == 8
    assert {job.status for job in await jobs_of(app, transaction_id) if job.kind == "step"} == {"completed"}

    await run_until_expansion_ends(worker, app, transaction_id)
    assert len(await messages_of(app, tenancy.environment_id, transaction_id=transaction_id)) == len(ids)
    # The last part to finish wrote the trigger's detail, once.
    expanded = [d.detail for d in await details_of(app, transaction_id) if d.detail.startswith("Trigger expanded")]
    assert expanded == [f"Trigger expanded into {len(ids)} notifications"]


async def test_a_broadcast_to_more_than_a_batch_reaches_each_subscriber_once_through_its_parts(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = [await create_subscriber(api) for _ in range(7)]
    workflow = await create_workflow(api, steps=[IN_APP])
    monkeypatch.setattr(expand, "BATCH_SIZE", 2)
    monkeypatch.setattr(expand, "PARTS_PER_ROUND", 2)
    response = await api.post("/v1/events/trigger/broadcast", json={"name": name_of(workflow), "payload": {}})
    transaction_id = response.json()["data"]["transactionId"]

    await run_until_expansion_ends(worker, app, transaction_id)
    await worker.run_until_idle()

    parts = await parts_of(app, transaction_id)
    assert len(parts) == 4 and {part.data["source"] for part in parts} == {"broadcast"}
    # The parts' ranges follow one another, each from where the one before ended.
    ranges = sorted((part.data["after"], part.data["through"]) for part in parts)
    assert [after for after, _ in ranges[1:]] == [through for _, through in ranges[:-1]]
    messages = await messages_of(app, tenancy.environment_id, transaction_id=transaction_id)
    assert sorted(m.subscriber_id for m in messages) == sorted(s["_id"] for s in ours)
    expanded = [d.detail for d in await details_of(app, transaction_id) if d.detail.startswith("Trigger expanded")]
    assert expanded == ["Trigger expanded into 7 notifications"]


async def test_a_bulk_triggers_large_events_are_shared_out_between_workers(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim takes a bulk trigger's events together. Events of more than a batch of recipients between them
    go in groups of about a batch (their ``to``'s lengths, read without the lists), expanded side by side, and
    those past the worker's groups go back at once for other workers."""
    workflow = await create_workflow(api, steps=[IN_APP])
    monkeypatch.setattr(expand, "BATCH_SIZE", 4)
    await set_aside_other_jobs(app, tenancy.environment_id)
    audience = [unique("bulk") for _ in range(3)]
    events = [{"name": name_of(workflow), "to": audience, "payload": {}} for _ in range(3)]
    response = await api.post("/v1/events/trigger/bulk", json={"events": events})
    assert response.status_code == 201, response.text
    transaction_ids = [item["transactionId"] for item in response.json()["data"]]

    assert await worker.run_once() == 3  # one claim takes the three events

    expansions = [job for transaction_id in transaction_ids for job in await jobs_of(app, transaction_id) if job.kind == "event"]
    assert sorted((job.status, job.attempts) for job in expansions) == [("completed", 0), ("completed", 0), ("queued", 0)]
    assert expand.GROUPS_AT_ONCE == 2
    await worker.run_until_idle()
    for transaction_id in transaction_ids:
        assert len(await messages_of(app, tenancy.environment_id, transaction_id=transaction_id)) == len(audience)
