"""A digest's window is one of trigger time: events triggered within it join it, however late the workers reach them.

Under a backlog the workers reach a burst's last events after its digest's
window has ended. Before, the digest closed with the events that had reached
it and the rest opened a second digest (10,000 events into one digest came out
as [24, 9976] on a busy machine). These tests put the jobs in the states a
backlog leaves them in, then let the worker run.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, select, update

from herald.engine.repository import EngineRepository
from herald.engine.steps import digest as digest_step
from herald.engine.worker import Worker
from herald.kit.time import utcnow
from herald.models import Event, Job
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, fast_forward, jobs_of, messages_of, trigger
from tests.fixtures.builders import create_subscriber, create_workflow

DIGEST = {"name": "digest", "template": {"type": "digest"}, "metadata": {"type": "regular", "amount": 5, "unit": "minutes"}}
SUMMARY = {
    "name": "summary",
    "template": {"type": "in_app", "content": "{{step.total_count}} events: {% for e in step.events %}{{e.n}} {% endfor %}"},
}


async def open_digest(api: httpx.AsyncClient, app: FastAPI, worker: Worker) -> tuple[dict[str, Any], str, Job]:
    """A subscriber, the digest workflow's name and the digest its first event opened."""
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[DIGEST, SUMMARY])
    name = workflow["triggers"][0]["identifier"]
    first = await trigger(api, name, subscriber["subscriberId"], payload={"n": 1})
    await worker.run_until_idle()
    [master, _] = [job for job in await jobs_of(app, first["transactionId"]) if job.kind == "step"]
    assert master.status == "delayed"
    return subscriber, name, master


async def set_job(app: FastAPI, job_id: str, **values: Any) -> None:
    async with app.state.sessionmaker() as session, session.begin():
        await session.execute(update(Job).where(Job.id == job_id).values(**values))


async def get_job(app: FastAPI, job_id: str) -> Job:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Job).where(Job.id == job_id))).scalar_one()


async def close_digest(app: FastAPI, worker: Worker, master: Job) -> None:
    await fast_forward(app, master.transaction_id)
    await worker.run_until_idle()


async def last_pending(app: FastAPI, master: Job) -> str:
    """The digest's latest Pending detail: why it is open."""
    return [d.detail for d in await details_of(app, master.transaction_id) if d.job_id == master.id and d.status == "Pending"][-1]


async def inbox(app: FastAPI, tenancy: Tenancy, subscriber: dict[str, Any]) -> list[str]:
    return [m.content for m in await messages_of(app, tenancy.environment_id, subscriber_id=subscriber["_id"])]


async def test_a_digest_due_waits_for_a_trigger_of_its_window_not_yet_expanded(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber, name, master = await open_digest(api, app, worker)
    second = await trigger(api, name, subscriber["subscriberId"], payload={"n": 2})
    # The digest falls due before the worker has expanded the second trigger (its job waits from when it was accepted).
    [expansion] = await jobs_of(app, second["transactionId"])
    await set_job(app, master.id, run_at=expansion.run_at - timedelta(seconds=1))
    worker.batch_size = 1
    assert await worker.run_once() == 1

    kept = await get_job(app, master.id)
    assert (kept.status, kept.data["digest_open"]) == ("delayed", True)
    assert kept.run_at > expansion.run_at
    assert await last_pending(app, master) == (
        "Digest kept open: events triggered within its window are on their way (1 of the workflow's triggers not yet expanded)"
    )

    await worker.run_until_idle()  # the second event expands and merges into the digest kept open
    [step, summary] = [job for job in await jobs_of(app, second["transactionId"]) if job.kind == "step"]
    assert (step.status, step.merged_into, summary.status) == ("merged", master.id, "merged")
    await close_digest(app, worker, master)
    assert await inbox(app, tenancy, subscriber) == ["2 events: 1 2 "]


async def test_a_digest_due_waits_for_events_of_its_window_at_its_step(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber, name, master = await open_digest(api, app, worker)
    other_key = await create_subscriber(api)  # the same workflow for someone else never holds this digest open
    await trigger(api, name, other_key["subscriberId"], payload={"n": 9})
    second = await trigger(api, name, subscriber["subscriberId"], payload={"n": 2})
    await worker.run_until_idle()
    # Put the second event back where a backlog leaves it: at the digest step, queued and not yet run.
    [arriving, summary] = [job for job in await jobs_of(app, second["transactionId"]) if job.kind == "step"]
    later = utcnow() + timedelta(hours=1)
    await set_job(app, arriving.id, status="queued", merged_into=None, digest_key=None, run_at=later, locked_by=None)
    await set_job(app, summary.id, status="pending")

    await close_digest(app, worker, master)
    kept = await get_job(app, master.id)
    assert kept.status == "delayed"
    assert await last_pending(app, master) == "Digest kept open: events triggered within its window are on their way (1 at its step)"

    await set_job(app, arriving.id, run_at=utcnow())
    await worker.run_until_idle()
    assert (await get_job(app, arriving.id)).merged_into == master.id
    await close_digest(app, worker, master)
    assert await inbox(app, tenancy, subscriber) == ["2 events: 1 2 "]


async def test_an_event_triggered_after_the_window_does_not_hold_the_digest_open(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber, name, master = await open_digest(api, app, worker)
    second = await trigger(api, name, subscriber["subscriberId"], payload={"n": 2})
    async with app.state.sessionmaker() as session, session.begin():
        # The second trigger came after the window: it opens the next digest when its turn comes.
        await session.execute(
            update(Event).where(Event.transaction_id == second["transactionId"]).values(created_at=utcnow() + timedelta(minutes=10))
        )
    [expansion] = await jobs_of(app, second["transactionId"])
    await set_job(app, expansion.id, run_at=utcnow() + timedelta(minutes=10))
    await set_job(app, master.id, data={"digest_open": True, "window_end": utcnow().isoformat()})

    await close_digest(app, worker, master)
    assert (await get_job(app, master.id)).status == "completed"
    assert await inbox(app, tenancy, subscriber) == ["1 events: 1 "]


@pytest.mark.parametrize("close", ["kept open", "closed"])
async def test_an_event_that_finds_its_digest_closing_waits_for_the_close(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, close: str
) -> None:
    """Kept open, the digest takes the event; closed for good, the event opens the next digest."""
    subscriber, name, master = await open_digest(api, app, worker)
    # Another worker is closing the digest (claimed, not yet settled) when the second event reaches its step.
    await set_job(app, master.id, status="running", locked_by="another-worker", locked_until=utcnow() + timedelta(minutes=1))
    second = await trigger(api, name, subscriber["subscriberId"], payload={"n": 2})
    running = asyncio.create_task(worker.run_until_idle())
    await asyncio.sleep(0.3)
    assert not running.done()  # the event waits while the close is under way
    settled = "delayed" if close == "kept open" else "completed"
    await set_job(app, master.id, status=settled, locked_by=None, locked_until=None)
    await asyncio.wait_for(running, timeout=10)

    [step, _] = [job for job in await jobs_of(app, second["transactionId"]) if job.kind == "step"]
    if close == "kept open":
        assert (step.status, step.merged_into) == ("merged", master.id)
    else:
        assert (step.status, step.merged_into, step.data.get("digest_open")) == ("delayed", None, True)


async def test_the_questions_before_a_close_read_partial_indexes(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """Every digest close asks them: no scan of the jobs table (checked on SQLite, whose plans follow the statement)."""
    if app.state.engine.dialect.name != "sqlite":
        pytest.skip("SQLite's query plans")
    _, _, master = await open_digest(api, app, worker)
    statements: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        statements.append((statement, parameters))

    event.listen(app.state.engine.sync_engine, "before_cursor_execute", record)
    try:
        async with app.state.sessionmaker() as session:
            repository = EngineRepository(session)
            await repository.digest_arrivals(master, utcnow())
            await repository.triggers_being_expanded(master.workflow_id, utcnow())
            await repository.closing_digests(master, "")
    finally:
        event.remove(app.state.engine.sync_engine, "before_cursor_execute", record)
    asked = [(s, p) for s, p in statements if "FROM jobs" in s or "JOIN jobs" in s]
    assert len(asked) == 3
    async with app.state.engine.connect() as connection:
        for statement, parameters in asked:
            plan = (await connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)).all()
            reads = [str(row[-1]) for row in plan if " jobs" in str(row[-1])]
            # A partial index may be read whole ("SCAN jobs USING INDEX"): it holds only the jobs asked about.
            assert reads and all("USING INDEX ix_jobs_" in read for read in reads), (statement, reads)


async def test_an_event_in_the_batch_that_closes_its_digest_merges_without_waiting(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The close and the event run in one batch: the event cannot wait for a close its own batch writes."""
    subscriber, name, master = await open_digest(api, app, worker)
    second = await trigger(api, name, subscriber["subscriberId"], payload={"n": 2})
    await fast_forward(app, master.transaction_id)  # due after the second trigger's expansion: one claim takes both
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(seconds)

    monkeypatch.setattr(digest_step, "asyncio", SimpleNamespace(sleep=sleep))
    assert await worker.run_once() == 2

    assert waits == []
    kept = await get_job(app, master.id)
    assert kept.status == "delayed"
    assert await last_pending(app, master) == "Digest kept open: events triggered within its window are on their way (1 at its step)"
    [step, _] = [job for job in await jobs_of(app, second["transactionId"]) if job.kind == "step"]
    assert (step.status, step.merged_into) == ("merged", master.id)
    await close_digest(app, worker, master)
    assert await inbox(app, tenancy, subscriber) == ["2 events: 1 2 "]
