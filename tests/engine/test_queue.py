"""The job queue's statements, on both stores."""

from __future__ import annotations

from datetime import timedelta

from fastapi import FastAPI
from sqlalchemy import select

from herald.engine import queue
from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.models import Job


def running_job(locked_by: str, **fields: object) -> Job:
    now = utcnow()
    values = {
        "id": new_id(),
        "environment_id": "env-queue-test",
        "organization_id": "org",
        "kind": "step",
        "status": "running",
        "event_id": "event",
        "transaction_id": f"txn-{new_id()}",
        "run_at": now,
        "attempts": 1,
        "max_attempts": 5,
        "data": {},
        "locked_by": locked_by,
        "locked_until": now + timedelta(seconds=60),
        "created_at": now,
        "updated_at": now,
        **fields,
    }
    return Job(**values)


async def test_finish_jobs_writes_only_the_jobs_this_worker_holds(app: FastAPI) -> None:
    mine, theirs = running_job("me"), running_job("another")
    async with app.state.sessionmaker() as session, session.begin():
        session.add_all([mine, theirs])
    later = utcnow() + timedelta(minutes=5)
    async with app.state.sessionmaker() as session, session.begin():
        written = await queue.finish_jobs(
            session,
            "me",
            [
                queue.outcome_row(job, status="delayed", run_at=later, data={"digest_open": True, "n": 2**70}, result={"total_count": 3})
                for job in (mine, theirs)
            ],
        )
    assert written == {mine.id}
    async with app.state.sessionmaker() as session:
        rows = {job.id: job for job in (await session.execute(select(Job).where(Job.id.in_([mine.id, theirs.id])))).scalars()}
    assert (rows[mine.id].status, rows[mine.id].run_at, rows[mine.id].locked_until) == ("delayed", later, None)
    assert rows[mine.id].data == {"digest_open": True, "n": 2**70}
    assert rows[mine.id].result == {"total_count": 3}
    assert (rows[theirs.id].status, rows[theirs.id].data) == ("running", {})


async def test_a_job_queued_again_by_finish_jobs_is_claimed_when_due(app: FastAPI) -> None:
    """The written run_at compares with the claim's clock as any other (same storage format)."""
    job = running_job("me")
    async with app.state.sessionmaker() as session, session.begin():
        session.add(job)
    async with app.state.sessionmaker() as session, session.begin():
        await queue.finish_jobs(session, "me", [queue.outcome_row(job, status="queued", run_at=utcnow())])
    async with app.state.sessionmaker() as session, session.begin():
        claimed = await queue.claim_jobs(session, "next-worker", 1000, 60)
    assert job.id in {claimed_job.id for claimed_job in claimed}
