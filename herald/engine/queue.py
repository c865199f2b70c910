"""The job queue on the jobs table: claim with a lease, finish, retry.

A job is claimable when it is queued or delayed and its ``run_at`` has come,
or when it is running but its lease (``locked_until``) ran out: the worker that
held it died, so another takes it again. On PostgreSQL concurrent workers skip
each other's rows (``FOR UPDATE SKIP LOCKED``); on SQLite every write
transaction is serialized by ``BEGIN IMMEDIATE``, so the same statement is safe.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from contextlib import suppress
from datetime import datetime, timedelta

from sqlalchemy import bindparam, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.time import utcnow
from herald.models import Job

CLAIMABLE = ("queued", "delayed")
WAKE_CHANNEL = "herald_jobs"
ABANDONED = "The worker running this job stopped before finishing it, on every attempt"


class JobLost(Exception):
    """The job's lease ran out and another worker owns it now: leave it alone."""


class JobSignal:
    """An in-process doorbell: rung when this process committed new jobs."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def ring(self) -> None:
        self._event.set()

    async def wait(self, timeout: float) -> None:
        with suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)
        self._event.clear()


async def claim_jobs(session: AsyncSession, worker_id: str, limit: int, lease_seconds: float) -> Sequence[Job]:
    now = utcnow()
    due = (
        select(Job.id)
        .where(
            or_(
                (Job.status.in_(CLAIMABLE)) & (Job.run_at <= now),
                # A job whose worker died is taken again while attempts remain;
                # after that it is failed (see abandoned_jobs), never run again.
                (Job.status == "running") & (Job.locked_until < now) & (Job.attempts < Job.max_attempts),
            )
        )
        .order_by(Job.run_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    result = await session.execute(
        update(Job)
        .where(Job.id.in_(due.scalar_subquery()))
        .values(
            status="running",
            locked_by=worker_id,
            locked_until=now + timedelta(seconds=lease_seconds),
            attempts=Job.attempts + 1,
            updated_at=now,
        )
        .returning(Job),
        execution_options={"synchronize_session": False},
    )
    return result.scalars().all()


async def abandoned_jobs(session: AsyncSession, limit: int = 100) -> Sequence[Job]:
    """Running jobs whose lease ran out with every attempt used: their workers kept dying.

    Such a job is not claimed again (a send that kills its worker every time
    must not be made without end); the caller fails it with why and settles
    the rest of its workflow like after any failed step. The rows are locked
    (skipping those another sweeper holds) until the caller commits.
    """
    result = await session.execute(
        select(Job)
        .where(Job.status == "running", Job.locked_until < utcnow(), Job.attempts >= Job.max_attempts)
        .order_by(Job.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return result.scalars().all()


async def next_run_at(session: AsyncSession) -> datetime | None:
    """When the earliest waiting job is due, so an idle worker knows how long it may sleep."""
    return await session.scalar(select(Job.run_at).where(Job.status.in_(CLAIMABLE)).order_by(Job.run_at).limit(1))


async def wake_workers(session: AsyncSession) -> None:
    """Tell listening workers that jobs were written (delivered by PostgreSQL on commit)."""
    if session.bind.dialect.name == "postgresql":
        await session.execute(text(f"NOTIFY {WAKE_CHANNEL}"))
    session.info["jobs_written"] = True


def retry_delay(attempt: int, base_seconds: float, cap_seconds: float = 300.0) -> float:
    """Exponential backoff with jitter: base·2^(attempt-1), ±50%, at most ``cap_seconds``."""
    delay = min(base_seconds * (2 ** max(attempt - 1, 0)), cap_seconds)
    return delay * (0.5 + random.random())


async def queue_next_steps(session: AsyncSession, jobs: Sequence[Job]) -> None:
    """Release the step after each job in its notification's chain (one statement for them all)."""
    links = [
        {"notification": job.notification_id, "index": job.step_index + 1}
        for job in jobs
        if job.notification_id is not None and job.step_index is not None
    ]
    if not links:
        return
    now = utcnow()
    jobs_table = Job.__table__
    await session.execute(
        update(jobs_table)
        .where(
            jobs_table.c.notification_id == bindparam("notification"),
            jobs_table.c.step_index == bindparam("index"),
            jobs_table.c.status == "pending",
        )
        .values(status="queued", run_at=now, updated_at=now),
        links,
        execution_options={"synchronize_session": False},
    )
    await wake_workers(session)


async def settle_rest_of_chain(session: AsyncSession, job: Job, status: str) -> int:
    """Give the steps after ``job`` a final status (halted, merged into a digest, canceled)."""
    if job.notification_id is None or job.step_index is None:
        return 0
    result = await session.execute(
        update(Job)
        .where(
            Job.notification_id == job.notification_id,
            Job.step_index > job.step_index,
            Job.status == "pending",
        )
        .values(status=status, updated_at=utcnow())
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def extend_leases(session: AsyncSession, job_ids: Sequence[str], worker_id: str, lease_seconds: float) -> list[str]:
    """Push running jobs' leases forward; returns the ids this worker still holds."""
    if not job_ids:
        return []
    result = await session.execute(
        update(Job)
        .where(Job.id.in_(list(job_ids)), Job.locked_by == worker_id, Job.status == "running")
        .values(locked_until=utcnow() + timedelta(seconds=lease_seconds))
        .returning(Job.id),
        execution_options={"synchronize_session": False},
    )
    return list(result.scalars())


async def lock_job(session: AsyncSession, job_id: str) -> Job | None:
    result = await session.execute(select(Job).where(Job.id == job_id).with_for_update())
    return result.scalar_one_or_none()


async def lock_owned_job(session: AsyncSession, job_id: str, worker_id: str) -> Job:
    """Lock the job row and check ``worker_id`` still holds its lease; raises JobLost when not."""
    owned = await lock_job(session, job_id)
    if owned is None or owned.status != "running" or owned.locked_by != worker_id:
        raise JobLost(job_id)
    return owned


async def lock_jobs(session: AsyncSession, job_ids: Sequence[str]) -> Sequence[Job]:
    if not job_ids:
        return []
    result = await session.execute(select(Job).where(Job.id.in_(list(job_ids))).order_by(Job.id).with_for_update())
    return result.scalars().all()
