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
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, bindparam, delete, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from herald.kit.db import any_of, any_of_parameter, dialect_of
from herald.kit.db import dumps_json as dumps
from herald.kit.time import utcnow
from herald.models import Job

# The predicates of the jobs table's partial indexes (models.Job), written as
# literals, as the indexes are. A store can read a partial index only for a
# condition it can prove implies the index's own: with the statuses as bound
# parameters, SQLite scanned and sorted the whole jobs table on every claim
# (milliseconds a claim once it held a few hundred thousand jobs), and
# PostgreSQL's generic plan for the prepared statement would do the same.
# The jobs a workflow worker claims: every waiting job but the webhook
# deliveries, which wait in a queue of their own (herald/webhooks/queue.py).
DUE = text("jobs.status IN ('queued', 'delayed') AND jobs.kind <> 'webhook'")  # ix_jobs_due
LEASED = text("jobs.status = 'running'")  # ix_jobs_leased
# The lease guard of statements that find their jobs by id (finish_jobs,
# extend_leases), written so that it does NOT match ix_jobs_leased ('' is no
# status). PostgreSQL keeps an index entry for every row version until a
# vacuum, and every job passes through 'running': with the guard written as
# LEASED, the planner (which counts only live rows, a hundred or so) answered
# the batch's finish from that partial index, through the entries of every
# job that had ever run since the last vacuum: after a minute of sustained
# delivery, about 17 ms a finish. Written this way only the primary key can
# find the rows: a tenth of a millisecond for a hundred jobs, however long
# since the last vacuum (tests/engine/test_queue.py checks the plan). On a
# table of a few thousand jobs the planner may read the whole primary key
# instead, which at that size is as cheap.
HELD = text("jobs.status IN ('running', '')")
OPEN_DIGEST = text("jobs.status = 'delayed' AND jobs.step_type = 'digest'")  # uq_jobs_open_digest
# Jobs at a digest step, waiting for a worker or being run by one (a digest's
# own close among them): what a digest about to close asks about.
DIGEST_ARRIVING = text("jobs.step_type = 'digest' AND jobs.status IN ('queued', 'running')")  # ix_jobs_digest_arriving
WAKE_CHANNEL = "herald_jobs"
# Requests an API process answers at once before its workers give way to it
# (engine/worker.py). A trigger batch of this many triggers means as many
# callers waiting on one API process: its wake-up then carries BUSY, and
# workers in other processes give way too. At moderate rates (100 triggers/s,
# clients polling their inboxes) a few requests are in flight at once; a burst
# holds dozens.
PRESSURE_REQUESTS = 16
BUSY = "busy"
# The payload of a wake-up for the webhook senders alone (webhook deliveries queued).
WEBHOOKS = "webhooks"
ABANDONED = "The worker running this job stopped before finishing it, on every attempt"


class JobLost(Exception):
    """The job's lease ran out and another worker owns it now: leave it alone."""


class JobSignal:
    """In-process doorbells: rung when this process committed new jobs, and new webhook deliveries.

    The worker's loop waits on the first, its webhook sender (webhooks/sender.py)
    on the second: each is cleared by its one waiter, and deliveries queued by
    a busy round of steps do not make the steps' loop claim for nothing.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._webhooks = asyncio.Event()
        # How many times the steps' bell has rung: an idle worker compares it with the count when it last
        # read the next due time, to know whether jobs were written since (Worker._idle_timeout).
        self.rings = 0

    def ring(self) -> None:
        self.rings += 1
        self._event.set()

    def ring_webhooks(self) -> None:
        self._webhooks.set()

    async def wait(self, timeout: float) -> None:
        await _wait_and_clear(self._event, timeout)

    async def wait_webhooks(self, timeout: float) -> None:
        await _wait_and_clear(self._webhooks, timeout)


async def _wait_and_clear(event: asyncio.Event, timeout: float) -> None:
    with suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout)
    event.clear()


async def claim_jobs(session: AsyncSession, worker_id: str, limit: int, lease_seconds: float) -> list[Job]:
    """Take up to ``limit`` due jobs, oldest first, leasing them for ``lease_seconds``.

    Read in run_at order from ``ix_jobs_due``, which holds only queued and
    delayed jobs: a claim reads as many index entries as it takes, however
    many jobs wait. Webhook deliveries are not among them: they wait in
    ``ix_jobs_webhook_due`` for the worker's webhook sender
    (herald/webhooks/sender.py), so however many wait for a slow endpoint, a
    workflow's due job is claimed as soon as without them. Jobs of workers
    that died come back through :func:`requeue_expired_leases`.

    Every worker claims once per round and whenever jobs are announced, found
    or not, so the statement is built once (``_CLAIM``) and run on the
    session's connection: built per call and run through the ORM, a claim cost
    1.1 to 2 ms of CPU, a third to a half of that as Core. The jobs are built as
    :func:`job_from_row` builds the ones an expansion hands off.
    """
    now = utcnow()
    connection = await session.connection()
    result = await connection.execute(
        _CLAIM,
        {"now": now, "limit": limit, "worker": worker_id, "until": now + timedelta(seconds=lease_seconds)},
    )
    return [job_from_row(row._asdict()) for row in result]


def job_from_row(row: dict[str, Any]) -> Job:
    """A Job holding ``row`` (every column of a jobs row), built as the ORM builds a loaded row.

    For jobs a claim took and jobs an expansion inserts and hands to its own
    worker. ``Job(**row)`` fires an attribute event per column: 15 µs a job, a
    tenth of a busy worker's time when every trigger hands its first step off.
    The job is only read and handed to the runner (never added to a session),
    so its state starts from the row as a loaded one would.
    """
    job = Job.__mapper__.class_manager.new_instance()
    job.__dict__.update(row)
    return job


_JOBS = Job.__table__


def claim_statement(*due: Any) -> Any:
    """The claim of up to ``:limit`` jobs that ``due`` selects and whose ``run_at`` has come, oldest first.

    Skipped when locked elsewhere; each claimed job is running, leased to ``:worker`` until ``:until``, one
    attempt more. The engine's queue and the webhook sender's (herald.webhooks.queue) claim with it.
    """
    return (
        update(_JOBS)
        .where(
            _JOBS.c.id.in_(
                select(_JOBS.c.id)
                .where(*due, _JOBS.c.run_at <= bindparam("now", type_=_JOBS.c.run_at.type))
                .order_by(_JOBS.c.run_at)
                .limit(bindparam("limit"))
                .with_for_update(skip_locked=True)
                .scalar_subquery()
            )
        )
        .values(
            status="running",
            locked_by=bindparam("worker"),
            locked_until=bindparam("until", type_=_JOBS.c.locked_until.type),
            attempts=_JOBS.c.attempts + 1,
            updated_at=bindparam("now", type_=_JOBS.c.updated_at.type),
        )
        .returning(*_JOBS.c)
    )


_CLAIM = claim_statement(DUE)


async def requeue_expired_leases(session: AsyncSession, limit: int = 1000) -> int:
    """Queue again the running jobs whose lease ran out while attempts remain: their worker died.

    Run by every worker's periodic sweep (herald.engine.worker), from
    ``ix_jobs_leased``. A job with no attempt left is failed instead
    (:func:`abandoned_jobs`), never run again.
    """
    expired = (
        select(Job.id)
        .where(LEASED, Job.locked_until < utcnow(), Job.attempts < Job.max_attempts)
        .order_by(Job.locked_until)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return await _queue_again(session, Job.id.in_(expired.scalar_subquery()))


async def release_claims(session: AsyncSession, worker_id: str) -> int:
    """Queue again, due now, the jobs ``worker_id`` holds: it stops without finishing them.

    The attempt they were claimed for counts, as after a crash; another worker
    takes them at once rather than when their lease runs out.
    """
    return await _queue_again(session, and_(LEASED, Job.locked_by == worker_id))


async def give_back(session: AsyncSession, job_ids: Sequence[str], worker_id: str) -> None:
    """Queue again, in their place and with the attempt not counted, jobs ``worker_id`` claimed and will not run."""
    await session.execute(
        update(Job)
        .where(Job.id.in_(list(job_ids)), LEASED, Job.locked_by == worker_id)
        .values(status="queued", locked_by=None, locked_until=None, attempts=Job.attempts - 1, updated_at=utcnow()),
        execution_options={"synchronize_session": False},
    )
    await wake_workers(session)


async def _queue_again(session: AsyncSession, which: ColumnElement[bool]) -> int:
    """Queue the ``which`` jobs again, due now and held by no worker; wake the workers when there were any."""
    now = utcnow()
    result = await session.execute(
        update(Job)
        .where(which)
        .values(status="queued", run_at=now, locked_by=None, locked_until=None, updated_at=now)
        .returning(Job.id),
        execution_options={"synchronize_session": False},
    )
    queued = len(result.all())
    if queued:
        await wake_workers(session)
    return queued


async def abandoned_jobs(session: AsyncSession, limit: int = 100) -> Sequence[Job]:
    """Running jobs whose lease ran out with every attempt used: their workers kept dying.

    Such a job is not claimed again (a send that kills its worker every time
    must not be made without end); the caller fails it with why and settles
    the rest of its workflow like after any failed step. The rows are locked
    (skipping those another sweeper holds) until the caller commits.
    """
    result = await session.execute(abandoned_statement(utcnow(), limit))
    return result.scalars().all()


def abandoned_statement(now: datetime, limit: int) -> Select[tuple[Job]]:
    """The read of :func:`abandoned_jobs`, in the order of ``ix_jobs_leased``, the index it reads.

    Ordered by id, with its LIMIT a parameter, SQLite chose to walk the whole
    table in id order instead: 60-70 ms a sweep on a store of 370,000 jobs
    (410 ms read cold), on the event loop's thread (kit.sqlite_inline), every
    sweep (SWEEP_SECONDS in engine/worker.py). Every request waited for it.
    """
    return (
        select(Job)
        .where(LEASED, Job.locked_until < now, Job.attempts >= Job.max_attempts)
        .order_by(Job.locked_until)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )


async def next_run_at(session: AsyncSession) -> datetime | None:
    """When the earliest waiting job (not a webhook delivery) is due, so an idle worker knows how long it may sleep."""
    return await session.scalar(select(Job.run_at).where(DUE).order_by(Job.run_at).limit(1))


async def wake_workers(session: AsyncSession) -> None:
    """Tell listening workers that jobs were written (delivered by PostgreSQL on commit)."""
    if session.bind.dialect.name == "postgresql":
        await session.execute(text(f"NOTIFY {WAKE_CHANNEL}"))
    mark_jobs_written(session)


async def wake_webhook_senders(session: AsyncSession) -> None:
    """Tell the workers' webhook senders that deliveries were queued (on commit), and no one else.

    The payload (``WEBHOOKS``) says so to the listeners of other processes,
    whose loops of workflow steps then make no claim for it.
    """
    if session.bind.dialect.name == "postgresql":
        await session.execute(text(f"NOTIFY {WAKE_CHANNEL}, '{WEBHOOKS}'"))
    session.info["webhooks_written"] = True


def mark_jobs_written(session: AsyncSession) -> None:
    """Note on the session that it wrote jobs: this process's worker is woken once it commits.

    For a statement that notifies PostgreSQL's listeners itself (``pg_notify``);
    :func:`wake_workers` does both. The note is read by :func:`ring_on_commit`.
    """
    session.info["jobs_written"] = True


def ring_on_commit(signal: JobSignal) -> Callable[[Session], None]:
    """A sessionmaker's ``after_commit`` hook (kit.db.create_sessionmaker): ring ``signal`` when jobs were committed.

    Every commit that wrote jobs rings this process's worker (one that queued
    webhook deliveries, its webhook sender), whoever made it: a request, the trigger group commit, or the worker itself releasing
    the next steps of a chain. The worker relies on the last to go idle after
    a round that emptied the queue (engine/worker.py): on SQLite nothing else
    tells it about the jobs its own round released.
    """

    def ring(session: Session) -> None:
        if session.info.pop("jobs_written", False):
            signal.ring()
        if session.info.pop("webhooks_written", False):
            signal.ring_webhooks()

    return ring


def retry_delay(attempt: int, base_seconds: float, cap_seconds: float = 300.0) -> float:
    """Exponential backoff with jitter: base·2^(attempt-1), ±50%, at most ``cap_seconds``."""
    delay = min(base_seconds * (2 ** max(attempt - 1, 0)), cap_seconds)
    return delay * (0.5 + random.random())


async def queue_next_steps(session: AsyncSession, jobs: Sequence[Job]) -> None:
    """Release the step after each job in its notification's chain (one statement for them all).

    Workers are woken only when a step was released: the last step of a
    chain has none after it, and waking every worker for nothing had each of
    them make a claim that found nothing, once per finished batch.
    """
    links = [
        {"notification": job.notification_id, "index": job.step_index + 1}
        for job in jobs
        if job.notification_id is not None and job.step_index is not None
    ]
    if not links:
        return
    now = utcnow()
    if session.bind.dialect.name == "postgresql":
        released = await session.execute(
            _RELEASE_POSTGRESQL,
            {
                "notifications": [link["notification"] for link in links],
                "indexes": [link["index"] for link in links],
                "now": now,
            },
        )
        if released.first() is not None:
            await wake_workers(session)
        return
    jobs_table = Job.__table__
    result = await session.execute(
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
    if result.rowcount:  # type: ignore[attr-defined]  # SQLite sums an executemany's rows
        await wake_workers(session)


# One statement whatever the number of links (arrays, not a list of parameters).
_RELEASE_POSTGRESQL = text(
    """UPDATE jobs SET status = 'queued', run_at = :now, updated_at = :now
    FROM unnest(CAST(:notifications AS text[]), CAST(:indexes AS integer[])) AS next(notification_id, step_index)
    WHERE jobs.notification_id = next.notification_id AND jobs.step_index = next.step_index AND jobs.status = 'pending'
    RETURNING jobs.id"""
)


async def settle_rest_of_chain(session: AsyncSession, job: Job, status: str) -> int:
    """Give the steps after ``job`` a final status (halted, merged into a digest, canceled)."""
    return await settle_rest_of_chains(session, [job], status)


async def settle_rest_of_chains(session: AsyncSession, jobs: Sequence[Job], status: str) -> int:
    """:func:`settle_rest_of_chain` for many jobs: one statement per step index among them."""
    notifications: dict[int, list[str]] = {}
    for job in jobs:
        if job.notification_id is not None and job.step_index is not None:
            notifications.setdefault(job.step_index, []).append(job.notification_id)
    settled = 0
    for step_index, ids in notifications.items():
        result = await session.execute(
            update(Job)
            .where(any_of(session, Job.notification_id, ids), Job.step_index > step_index, Job.status == "pending")
            .values(status=status, updated_at=utcnow()),
            execution_options={"synchronize_session": False},
        )
        settled += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return settled


async def extend_leases(session: AsyncSession, job_ids: Sequence[str], worker_id: str, lease_seconds: float) -> list[str]:
    """Push running jobs' leases forward; returns the ids this worker still holds."""
    if not job_ids:
        return []
    result = await session.execute(
        update(Job)
        .where(any_of(session, Job.id, job_ids), Job.locked_by == worker_id, HELD)
        .values(locked_until=utcnow() + timedelta(seconds=lease_seconds))
        .returning(Job.id),
        execution_options={"synchronize_session": False},
    )
    return list(result.scalars())


# The columns a job's outcome sets (finish_jobs); every row names all of them.
OUTCOME_COLUMNS = (
    "status",
    "run_at",
    "attempts",
    "locked_until",
    "data",
    "result",
    "digest_key",
    "merged_into",
    "error_text",
    "handed_over",
)


async def finish_jobs(session: AsyncSession, worker_id: str, outcomes: Sequence[dict[str, Any]]) -> set[str]:
    """Write each job's outcome where this worker still holds the job; returns the ids written.

    One UPDATE for the whole batch, guarded by the lease (``status =
    'running' AND locked_by = worker_id``): it takes the row locks, checks the
    ownership and writes the new states in one statement, where reading the
    rows back first to lock and check them cost as much as the rest of the
    write. A job whose lease ran out (another worker holds it now) is not
    written, and its id is missing from the answer.

    The outcomes travel as one JSON parameter, unpacked by the database
    (``jsonb_to_recordset`` on PostgreSQL, ``json_each`` on SQLite), so the
    statement has one shape whatever the batch size: it is compiled and
    planned once, not once per batch.
    """
    if not outcomes:
        return set()
    dialect = session.bind.dialect
    if dialect.name == "postgresql":
        statement, rows = _FINISH_POSTGRESQL, [_plain_row(row) for row in outcomes]
    else:
        processors = _bind_processors(dialect)
        statement = _FINISH_SQLITE
        rows = [{name: processors[name](row[name]) if processors.get(name) else row[name] for name in ("id", *OUTCOME_COLUMNS)} for row in outcomes]
    result = await session.execute(
        statement, {"outcomes": dumps(rows), "worker": worker_id, "now": utcnow()}
    )
    return set(result.scalars())


def _plain_row(row: dict[str, Any]) -> dict[str, Any]:
    """Datetimes as ISO text (PostgreSQL reads them back as timestamptz); the rest as it is."""
    return {name: value.isoformat() if isinstance(value, datetime) else value for name, value in row.items()}


def _bind_processors(dialect: Any) -> dict[str, Any]:
    """How each outcome column's values are stored on this dialect (JSON text, datetime text)."""
    table = Job.__table__
    # The dialect's own type (SQLite's DATETIME writes "YYYY-MM-DD HH:MM:SS.ffffff",
    # which is what comparisons with run_at expect), not the generic one.
    return {name: table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in ("id", *OUTCOME_COLUMNS)}


_ASSIGNMENTS = ", ".join(f"{name} = v.{name}" for name in OUTCOME_COLUMNS)
_FINISH_POSTGRESQL = text(
    f"""UPDATE jobs SET {_ASSIGNMENTS}, updated_at = :now
    FROM jsonb_to_recordset(CAST(:outcomes AS jsonb)) AS v(
        id varchar, status varchar, run_at timestamptz, attempts integer, locked_until timestamptz,
        data jsonb, result jsonb, digest_key varchar, merged_into varchar, error_text text, handed_over integer)
    WHERE jobs.id = v.id AND {HELD.text} AND jobs.locked_by = :worker
    RETURNING jobs.id"""
).bindparams(bindparam("now", type_=Job.__table__.c.updated_at.type))
_FINISH_SQLITE = text(
    f"""WITH v AS (SELECT {", ".join(f"json_extract(value, '$.{name}') AS {name}" for name in ("id", *OUTCOME_COLUMNS))}
        FROM json_each(:outcomes))
    UPDATE jobs SET {_ASSIGNMENTS}, updated_at = :now
    FROM v
    WHERE jobs.id = v.id AND {HELD.text} AND jobs.locked_by = :worker
    RETURNING jobs.id"""
).bindparams(bindparam("now", type_=Job.__table__.c.updated_at.type))


def outcome_row(job: Job, **changes: Any) -> dict[str, Any]:
    """A :func:`finish_jobs` row: the job's outcome columns as they are, with ``changes`` made."""
    row = {"id": job.id, **{name: getattr(job, name) for name in OUTCOME_COLUMNS}}
    row["locked_until"] = None
    row.update(changes)
    return row


async def lock_job(session: AsyncSession, job_id: str) -> Job | None:
    result = await session.execute(select(Job).where(Job.id == job_id).with_for_update())
    return result.scalar_one_or_none()


async def lock_owned_job(session: AsyncSession, job_id: str, worker_id: str) -> Job:
    """Lock the job row and check ``worker_id`` still holds its lease; raises JobLost when not."""
    owned = await lock_job(session, job_id)
    if owned is None or owned.status != "running" or owned.locked_by != worker_id:
        raise JobLost(job_id)
    return owned


async def lock_held_jobs(session: AsyncSession, job_ids: Sequence[str], worker_id: str) -> set[str]:
    """Lock the jobs of ``job_ids`` that ``worker_id`` still holds; returns their ids.

    :func:`lock_owned_job` for many jobs at once, reading ids only (no row
    loaded into the session), found by the primary key (``HELD``), locked in
    id order so two writers never wait on each other in a cycle.
    """
    if not job_ids:
        return set()
    result = await session.execute(
        select(_JOBS.c.id)
        .where(any_of(session, _JOBS.c.id, job_ids), HELD, _JOBS.c.locked_by == worker_id)
        .order_by(_JOBS.c.id)
        .with_for_update()
    )
    return set(result.scalars())


async def record_handovers(session: AsyncSession, job_ids: Sequence[str], worker_id: str) -> set[str]:
    """Write, for the jobs of ``job_ids`` this worker still holds, that their current attempt hands its message over.

    ``handed_over`` takes the attempt's number (``attempts``, counted at the
    claim) in one statement guarded by the lease, as :func:`extend_leases` is;
    returns the ids written. A job missing from the answer was taken over by
    another worker, and its message must not be sent by this one.
    """
    if not job_ids:
        return set()
    connection = await session.connection()
    result = await connection.execute(_handover_statement(dialect_of(session)), {"ids": list(job_ids), "worker": worker_id})
    return set(result.scalars())


@cache
def _handover_statement(dialect: str) -> Any:
    """:func:`record_handovers`' statement, built once per dialect (it runs before every SMTP email)."""
    return (
        update(_JOBS)
        .where(any_of_parameter(dialect, _JOBS.c.id, "ids"), _JOBS.c.locked_by == bindparam("worker"), HELD)
        .values(handed_over=_JOBS.c.attempts)
        .returning(_JOBS.c.id)
    )


async def lock_jobs(session: AsyncSession, job_ids: Sequence[str]) -> Sequence[Job]:
    if not job_ids:
        return []
    result = await session.execute(select(Job).where(any_of(session, Job.id, job_ids)).order_by(Job.id).with_for_update())
    return result.scalars().all()


async def delete_owned_job(session: AsyncSession, job_id: str, worker_id: str) -> bool:
    """Delete a job this worker still holds (a job whose whole outcome is what it changed); whether it did."""
    result = await session.execute(
        delete(Job)
        .where(Job.id == job_id, Job.status == "running", Job.locked_by == worker_id)
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]

