"""The webhook deliveries' queue: its statements read ix_jobs_webhook_due, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import FastAPI

from herald.engine import queue as steps
from herald.webhooks import queue as deliveries


async def _plan(app: FastAPI, statement: object) -> str:
    engine = app.state.engine
    compiled = statement.compile(dialect=engine.dialect)  # type: ignore[attr-defined]
    moment = datetime(2030, 1, 1, tzinfo=UTC)
    values = compiled.construct_params({"now": moment, "until": moment, "limit": 10, "worker": "w", "endpoint": "e"})
    parameters = tuple(values[name] for name in compiled.positiontup or ())
    async with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            rows = await connection.exec_driver_sql("EXPLAIN QUERY PLAN " + compiled.string, parameters)
            return " / ".join(str(row[-1]) for row in rows)
        # As the workers' connections read (kit.db.create_engine(index_reads=True)): the test's tables are
        # small, and the question is whether the index can serve the statement.
        await connection.exec_driver_sql("SET enable_seqscan = off")
        rows = await connection.exec_driver_sql("EXPLAIN " + compiled.string, parameters)
        return "\n".join(str(row[0]) for row in rows)


async def test_the_webhook_claims_are_ranges_of_their_own_index(app: FastAPI) -> None:
    """The endpoints with deliveries waiting, and one endpoint's due deliveries, are read from ix_jobs_webhook_due alone."""
    for statement in (deliveries._WAITING_ENDPOINTS, deliveries._CLAIM):
        plan = await _plan(app, statement)
        assert "ix_jobs_webhook_due" in plan, plan
        assert "ix_jobs_due" not in plan.replace("ix_jobs_webhook_due", ""), plan
        if app.state.engine.dialect.name == "sqlite":
            assert "SCAN jobs" not in plan, plan
        else:
            assert "Seq Scan on jobs" not in plan, plan


async def test_the_steps_claim_reads_an_index_without_webhook_deliveries(app: FastAPI) -> None:
    """The claim of workflow jobs reads ix_jobs_due, which holds no webhook delivery (migration 0022)."""
    plan = await _plan(app, steps._CLAIM)
    assert "ix_jobs_due" in plan and "ix_jobs_webhook_due" not in plan, plan
    async with app.state.engine.connect() as connection:
        if app.state.engine.dialect.name == "sqlite":
            sql = (await connection.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'ix_jobs_due'")).scalar_one()
        else:
            sql = (await connection.exec_driver_sql("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_jobs_due'")).scalar_one()
    assert "<> 'webhook'" in str(sql), sql
