"""Engine tests run the real worker against the test store and drain it between steps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, select, update

from herald.app import build_worker
from herald.engine.worker import Worker
from herald.kit.time import utcnow
from herald.models import ExecutionDetail, Job, Message


@pytest.fixture
async def worker(app: FastAPI) -> AsyncIterator[Worker]:
    settings = app.state.settings
    from dataclasses import replace

    engine_worker = build_worker(replace(settings, retry_base_seconds=0.01), app.state.sessionmaker)
    yield engine_worker
    if engine_worker.http is not None:
        await engine_worker.http.aclose()


async def trigger(api: httpx.AsyncClient, name: str, to: Any, **body: Any) -> dict[str, Any]:
    response = await api.post("/v1/events/trigger", json={"name": name, "to": to, **body})
    assert response.status_code == 201, response.text
    data = response.json()["data"]
    assert data["status"] == "processed", data
    return data


async def fast_forward(app: FastAPI, transaction_id: str) -> int:
    """Make the transaction's delayed jobs due now (instead of waiting for the clock)."""
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            update(Job)
            .where(Job.transaction_id == transaction_id, Job.status == "delayed")
            .values(run_at=utcnow())
        )
        await session.commit()
        return int(result.rowcount or 0)


async def jobs_of(app: FastAPI, transaction_id: str) -> list[Job]:
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            select(Job).where(Job.transaction_id == transaction_id).order_by(Job.subscriber_id, Job.step_index)
        )
        return list(result.scalars())


async def messages_of(app: FastAPI, environment_id: str, **filters: Any) -> list[Message]:
    async with app.state.sessionmaker() as session:
        query = select(Message).where(Message.environment_id == environment_id)
        for name, value in filters.items():
            query = query.where(getattr(Message, name) == value)
        return list((await session.execute(query.order_by(Message.created_at, Message.id))).scalars())


async def details_of(app: FastAPI, transaction_id: str) -> list[ExecutionDetail]:
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            select(ExecutionDetail).where(ExecutionDetail.transaction_id == transaction_id).order_by(ExecutionDetail.created_at)
        )
        return list(result.scalars())


async def set_aside_other_jobs(app: FastAPI, environment_id: str) -> None:
    """Push the unfinished jobs of every other environment a day forward.

    The store is shared by the tests a pytest worker runs in turn: a retry or a
    delay an earlier test left behind can come due while this test counts the
    statements of a drain, and its round would be counted too.
    """
    later = utcnow() + timedelta(days=1)
    async with app.state.sessionmaker() as session, session.begin():
        others = Job.environment_id != environment_id
        await session.execute(update(Job).where(others, Job.status.in_(("queued", "delayed"))).values(run_at=later))
        await session.execute(update(Job).where(others, Job.status == "running").values(locked_until=later))


async def statements_while(app: FastAPI, work: Awaitable[Any], wanted: Callable[[str], bool]) -> list[str]:
    """The statements sent to the app's store while ``work`` runs that ``wanted`` keeps."""
    _, sent = await sent_while(app, work, wanted)
    return [statement for statement, _ in sent]


async def sent_while(
    app: FastAPI, work: Awaitable[Any], wanted: Callable[[str], bool] = lambda _: True
) -> tuple[Any, list[tuple[str, Any]]]:
    """What ``work`` returns, and the statements (with their parameters) sent to the store meanwhile that ``wanted`` keeps."""
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if wanted(statement):
            sent.append((statement, parameters))

    event.listen(app.state.engine.sync_engine, "before_cursor_execute", record)
    try:
        result = await work
    finally:
        event.remove(app.state.engine.sync_engine, "before_cursor_execute", record)
    return result, sent
