"""The job queue's statements, on both stores."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from fastapi import FastAPI
from sqlalchemy import bindparam, delete, insert, select, text

from herald.engine import queue
from herald.kit.db import create_engine, create_sessionmaker
from herald.kit.db import dumps_json as dumps
from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.migrations import upgrade_async
from herald.models import Job


def running_job(locked_by: str | None, **fields: object) -> Job:
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


async def test_a_handover_is_recorded_only_for_the_jobs_this_worker_holds_and_finish_jobs_clears_it(app: FastAPI) -> None:
    """The record an SMTP send makes before it begins (steps.delivery.record_handover): its attempt, under the lease."""
    from herald.engine.steps.batch import record_handovers

    mine, theirs = running_job("me", attempts=3), running_job("another")
    async with app.state.sessionmaker() as session, session.begin():
        session.add_all([mine, theirs])

    recorded = await record_handovers(app.state.sessionmaker, [mine.id, theirs.id], "me")

    assert recorded == {mine.id}
    async with app.state.sessionmaker() as session:
        rows = {job.id: job for job in (await session.execute(select(Job).where(Job.id.in_([mine.id, theirs.id])))).scalars()}
    assert (rows[mine.id].handed_over, rows[theirs.id].handed_over) == (3, None)
    # The attempt's outcome writes what the job holds in memory: none, once the server answered.
    async with app.state.sessionmaker() as session, session.begin():
        await queue.finish_jobs(session, "me", [queue.outcome_row(rows[mine.id], status="completed", handed_over=None)])
    async with app.state.sessionmaker() as session:
        assert (await session.get(Job, mine.id)).handed_over is None


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


async def test_a_claim_takes_the_oldest_due_job_and_leases_it(app: FastAPI) -> None:
    """The claim's row comes back as a Job with every column read as the ORM reads it (JSON, times)."""
    long_ago = utcnow() - timedelta(days=365 * 20)
    due = running_job(None, status="queued", locked_until=None, attempts=0, run_at=long_ago, data={"n": 2**70, "phase": "x"})
    later = running_job(None, status="queued", locked_until=None, attempts=0, run_at=utcnow() + timedelta(hours=1))
    async with app.state.sessionmaker() as session, session.begin():
        session.add_all([due, later])

    before = utcnow()
    async with app.state.sessionmaker() as session, session.begin():
        [claimed] = await queue.claim_jobs(session, "claimer", 1, 30)

    assert claimed.id == due.id
    assert (claimed.status, claimed.locked_by, claimed.attempts) == ("running", "claimer", 1)
    assert claimed.run_at == long_ago
    assert claimed.data == {"n": 2**70, "phase": "x"}
    assert claimed.locked_until is not None
    assert before + timedelta(seconds=29) <= claimed.locked_until <= utcnow() + timedelta(seconds=31)
    assert (claimed.environment_id, claimed.transaction_id, claimed.max_attempts) == (due.environment_id, due.transaction_id, 5)
    async with app.state.sessionmaker() as session:
        stored = {job.id: job for job in (await session.execute(select(Job).where(Job.id.in_([due.id, later.id])))).scalars()}
    assert (stored[due.id].status, stored[due.id].locked_by) == ("running", "claimer")
    assert stored[later.id].status == "queued"  # not due yet


async def test_a_claim_passes_over_waiting_webhook_deliveries(app: FastAPI) -> None:
    """Webhook deliveries due long before a step are not the steps' claim's to take (their sender's, webhooks/sender.py).

    Claimed with the steps, oldest first, 18,000 deliveries for a slow
    endpoint held a trigger's step for 110 s.
    """
    long_ago = utcnow() - timedelta(days=365 * 20)
    deliveries = [
        running_job(None, kind="webhook", status="queued", locked_until=None, attempts=0, run_at=long_ago, data={"endpointId": "e"})
        for _ in range(300)
    ]
    step = running_job(None, status="queued", locked_until=None, attempts=0, run_at=long_ago + timedelta(seconds=1))
    async with app.state.sessionmaker() as session, session.begin():
        session.add_all([*deliveries, step])
    try:
        async with app.state.sessionmaker() as session, session.begin():
            claimed = await queue.claim_jobs(session, "steps", 1, 30)
        assert [job.id for job in claimed] == [step.id]
    finally:
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(delete(Job).where(Job.id.in_([job.id for job in deliveries])))


async def test_ring_on_commit_rings_for_commits_that_wrote_jobs(app: FastAPI) -> None:
    signal = queue.JobSignal()
    sessions = create_sessionmaker(app.state.engine, after_commit=queue.ring_on_commit(signal))

    async def rung(webhooks: bool = False) -> bool:
        try:
            await asyncio.wait_for(signal.wait_webhooks(60) if webhooks else signal.wait(60), 0.05)
        except TimeoutError:
            return False
        return True

    async with sessions() as session, session.begin():
        await session.execute(select(1))
    assert not await rung()

    async with sessions() as session, session.begin():
        queue.mark_jobs_written(session)
    assert await rung()

    async with sessions() as session, session.begin():
        await session.execute(select(1))
    assert not await rung()  # the flag went with the commit that rang

    # Webhook deliveries ring their senders' bell alone: the steps' loop would claim for nothing.
    async with sessions() as session, session.begin():
        await queue.wake_webhook_senders(session)
    assert not await rung()
    assert await rung(webhooks=True)


async def test_the_queue_statements_read_the_partial_indexes(app: FastAPI) -> None:
    """Statuses written as the partial indexes' own predicates let the store use them.

    With the statuses as bound parameters SQLite scanned and sorted the whole
    jobs table on every claim. Checked on SQLite, whose planner decides per
    statement text (PostgreSQL's custom plans see the values).
    """
    if app.state.engine.dialect.name != "sqlite":
        pytest.skip("SQLite's query plans")
    jobs = Job.__table__
    statements = [
        ("ix_jobs_due", queue._CLAIM),
        ("ix_jobs_leased", select(jobs.c.id).where(queue.LEASED, jobs.c.locked_until < utcnow()).order_by(jobs.c.locked_until)),
        # The sweep's read of abandoned jobs: its LIMIT is a parameter (see abandoned_statement).
        ("ix_jobs_leased", queue.abandoned_statement(utcnow(), 100)),
        (
            "uq_jobs_open_digest",
            select(jobs.c.id).where(
                jobs.c.workflow_id == "w", jobs.c.step_id == "s", jobs.c.subscriber_id == "u", jobs.c.digest_key == "k", queue.OPEN_DIGEST
            ),
        ),
    ]
    async with app.state.engine.connect() as connection:
        for index, statement in statements:
            compiled = statement.compile(dialect=app.state.engine.dialect)
            values = compiled.construct_params({"now": "2030-01-01", "until": "2030-01-01", "limit": 10, "worker": "w"})
            parameters = tuple(values[name] for name in compiled.positiontup or ())
            plan = (await connection.exec_driver_sql("EXPLAIN QUERY PLAN " + compiled.string, parameters)).all()
            details = " / ".join(str(row[-1]) for row in plan)
            assert f"USING INDEX {index}" in details, details
            assert "SCAN jobs" not in details, details


async def test_the_look_ups_by_notification_and_by_digest_read_indexes_that_hold_only_jobs_with_one(app: FastAPI) -> None:
    """ix_jobs_notification and ix_jobs_merged_into leave out the jobs without a value, and still serve every look-up.

    Most jobs have no merged_into, and an expansion's job no notification: left
    out, their writes (insert, claim, finish) add nothing to these indexes.
    A look-up that names a value implies the index's condition on both stores.
    """
    jobs = Job.__table__
    statements = {
        "ix_jobs_notification": [
            select(jobs.c.id).where(jobs.c.notification_id == "n"),
            select(jobs.c.id).where(jobs.c.notification_id.in_(["n", "m"]), jobs.c.step_index > 0),
        ],
        "ix_jobs_merged_into": [select(jobs.c.id).where(jobs.c.merged_into == "d", jobs.c.status == "merged")],
    }
    async with app.state.engine.connect() as connection:
        if app.state.engine.dialect.name == "sqlite":
            definitions = dict((await connection.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'index'")).all())
        else:
            await connection.exec_driver_sql("SET enable_seqscan = off")  # the tables are small: ask whether the index can serve
            definitions = dict((await connection.exec_driver_sql("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'jobs'")).all())
        for index, looks in statements.items():
            column = "notification_id" if index == "ix_jobs_notification" else "merged_into"
            assert f"WHERE {column} IS NOT NULL" in definitions[index].replace("(", "").replace(")", ""), definitions[index]
            for statement in looks:
                compiled = statement.compile(dialect=app.state.engine.dialect, compile_kwargs={"literal_binds": True})
                explain = "EXPLAIN QUERY PLAN " if app.state.engine.dialect.name == "sqlite" else "EXPLAIN "
                plan = " / ".join(str(row[-1]) for row in await connection.exec_driver_sql(explain + str(compiled)))
                assert index in plan, plan


async def test_finish_jobs_finds_its_jobs_by_primary_key_however_many_have_run(empty_database) -> None:
    """The finish's lease guard must not let PostgreSQL answer it from ix_jobs_leased.

    That partial index keeps an entry for every job that has been running
    since the last vacuum. With statistics that show few jobs running (true
    of live rows, and the state right after an ANALYZE), the guard written as
    the index's own predicate had the planner read the whole index and the
    heap behind it for each batch (17 ms a finish after a minute of sustained
    delivery), where the primary key finds the batch's rows directly.
    """
    if empty_database.kind != "postgres":
        pytest.skip("PostgreSQL's planner and its dead index entries")
    await upgrade_async(empty_database.url)
    engine = create_engine(empty_database.url, index_reads=True)  # as the workers' engines
    try:
        held = [running_job("me") for _ in range(100)]
        async with engine.begin() as connection:
            # Jobs run since (a table the size a minute of delivery leaves), then statistics that see none running.
            await connection.exec_driver_sql(
                "INSERT INTO jobs (id, environment_id, organization_id, kind, status, event_id, transaction_id,"
                " run_at, attempts, max_attempts, locked_by, data, created_at, updated_at)"
                " SELECT 'done-' || n, 'env-queue-test', 'org', 'step', 'completed', 'event', 'txn-' || n,"
                " now(), 1, 5, 'earlier', '{}', now(), now() FROM generate_series(1, 50000) AS n"
            )
            await connection.exec_driver_sql("ANALYZE jobs")
            await connection.execute(insert(Job.__table__), [_row(job) for job in held])
        outcomes = [queue._plain_row(queue.outcome_row(job, status="completed")) for job in held]
        explain = text("EXPLAIN " + queue._FINISH_POSTGRESQL.text).bindparams(
            bindparam("now", type_=Job.__table__.c.updated_at.type)
        )
        async with engine.connect() as connection:
            rows = await connection.execute(explain, {"outcomes": dumps(outcomes), "worker": "me", "now": utcnow()})
            plan = "\n".join(row[0] for row in rows)
        assert "Index Cond: ((id)::text = (v.id)::text)" in plan, plan
        assert "ix_jobs_leased" not in plan, plan
        async with create_sessionmaker(engine)() as session, session.begin():
            assert len(await queue.finish_jobs(session, "me", [queue.outcome_row(job, status="completed") for job in held])) == 100
    finally:
        await engine.dispose()


def _row(job: Job) -> dict[str, object]:
    return {column.key: getattr(job, column.key) for column in Job.__table__.columns if column.key in job.__dict__}
