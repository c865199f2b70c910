"""Retention: finished activity and old messages are deleted by age; nothing still waiting is touched."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, func, select

from herald.app import create_app
from herald.config import SettingsError, load_settings
from herald.engine import retention
from herald.engine.retention import Retention, purge_history
from herald.engine.worker import Worker
from herald.kit.time import utcnow
from herald.migrations import upgrade_async
from herald.models import DeliveryEventKey, Event, ExecutionDetail, Job, Message, Notification, SpentSignatureToken
from tests.conftest import Tenancy
from tests.engine.conftest import jobs_of, trigger
from tests.fixtures import stores
from tests.fixtures.builders import create_subscriber, create_workflow

DIGEST = {"name": "digest", "template": {"type": "digest"}, "metadata": {"type": "regular", "amount": 5, "unit": "minutes"}}
SUMMARY = {"name": "summary", "template": {"type": "in_app", "content": "{{step.total_count}} events"}}
MONTH = Retention(notification_days=30, message_days=365)


@pytest.fixture
async def app(empty_database: stores.TestDatabase, tmp_path: Path) -> AsyncIterator[FastAPI]:
    """A store of this test's own: a purge deletes by age across every environment."""
    await upgrade_async(empty_database.url)
    application = create_app(
        load_settings(data_dir=tmp_path, database_url=empty_database.url, secret_key="test-secret-key")
    )
    yield application
    await application.state.engine.dispose()


async def rows(app: FastAPI) -> dict[str, int]:
    async with app.state.sessionmaker() as session:
        return {
            model.__tablename__: int((await session.execute(select(func.count()).select_from(model))).scalar_one())
            for model in (Event, Notification, Job, ExecutionDetail, Message)
        }


async def delivered_in_app(api: httpx.AsyncClient, worker: Worker, **body: object) -> dict[str, object]:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api)
    result = await trigger(api, workflow["triggers"][0]["identifier"], subscriber["subscriberId"], payload={"name": "Ada"}, **body)
    await worker.run_until_idle()
    return result


async def test_finished_activity_past_its_retention_goes_and_its_messages_stay(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    result = await delivered_in_app(api, worker)
    before = await rows(app)
    assert before == {"events": 1, "notifications": 1, "jobs": 2, "execution_details": before["execution_details"], "messages": 1}
    assert before["execution_details"] > 0

    kept = await purge_history(app.state.sessionmaker, MONTH, now=utcnow() + timedelta(days=29))
    assert not kept
    assert await rows(app) == before

    purged = await purge_history(app.state.sessionmaker, MONTH, now=utcnow() + timedelta(days=31))
    assert (purged.events, purged.notifications, purged.jobs, purged.execution_details, purged.messages) == (
        1,
        1,
        2,
        before["execution_details"],
        0,
    )
    assert await rows(app) == {"events": 0, "notifications": 0, "jobs": 0, "execution_details": 0, "messages": 1}
    assert (await api.get("/v1/notifications")).json()["data"] == []
    listed = (await api.get("/v1/messages", params={"transactionId": result["transactionId"]})).json()["data"]
    assert len(listed) == 1


async def test_messages_past_their_retention_go(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    await delivered_in_app(api, worker)
    assert (await purge_history(app.state.sessionmaker, MONTH, now=utcnow() + timedelta(days=364))).messages == 0
    purged = await purge_history(app.state.sessionmaker, MONTH, now=utcnow() + timedelta(days=366))
    assert purged.messages == 1
    assert await rows(app) == {"events": 0, "notifications": 0, "jobs": 0, "execution_details": 0, "messages": 0}


async def test_an_event_still_waiting_is_kept_whatever_its_age(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[DIGEST, SUMMARY])
    name = workflow["triggers"][0]["identifier"]
    transactions = []
    for n in (1, 2):
        transactions.append((await trigger(api, name, subscriber["subscriberId"], payload={"n": n}))["transactionId"])
        await worker.run_until_idle()
    # The first event holds the open digest; the second is merged into it.
    statuses = [[job.status for job in await jobs_of(app, t) if job.kind == "step"] for t in transactions]
    assert statuses == [["delayed", "pending"], ["merged", "merged"]]
    before = await rows(app)

    assert not await purge_history(app.state.sessionmaker, MONTH, now=utcnow() + timedelta(days=400))
    assert await rows(app) == before


async def test_with_zero_days_nothing_is_deleted(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    await delivered_in_app(api, worker)
    before = await rows(app)
    assert not await purge_history(app.state.sessionmaker, Retention(0, 0), now=utcnow() + timedelta(days=4000))
    assert await rows(app) == before


async def test_a_transaction_id_can_be_used_again_once_its_event_is_gone(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    await delivered_in_app(api, worker, transactionId="order-1")
    workflow = await create_workflow(api)
    body = {"name": workflow["triggers"][0]["identifier"], "to": "someone", "transactionId": "order-1"}
    refused = (await api.post("/v1/events/trigger", json=body)).json()["data"]
    assert (refused["status"], refused["acknowledged"]) == ("error", True)

    await purge_history(app.state.sessionmaker, MONTH, now=utcnow() + timedelta(days=31))
    accepted = (await api.post("/v1/events/trigger", json=body)).json()["data"]
    assert (accepted["status"], accepted["transactionId"]) == ("processed", "order-1")


async def test_the_keys_of_delivery_events_go_with_the_activity(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider's event is recorded once per key; the keys are swept after notification_days, in bounded transactions."""
    now = utcnow()
    ages = {"fresh": 1, "month": 29, "old-1": 31, "old-2": 40, "old-3": 400}
    async with app.state.sessionmaker() as session, session.begin():
        session.add_all(
            DeliveryEventKey(
                environment_id="environment",
                integration_id="integration",
                event_key=key,
                created_at=now - timedelta(days=days),
            )
            for key, days in ages.items()
        )

    async def kept() -> list[str]:
        async with app.state.sessionmaker() as session:
            return sorted((await session.execute(select(DeliveryEventKey.event_key))).scalars())

    assert not await purge_history(app.state.sessionmaker, Retention(0, 0), now=now)
    assert await kept() == sorted(ages)
    monkeypatch.setattr(retention, "DELIVERY_EVENT_KEYS_PER_TRANSACTION", 2)
    purged = await purge_history(app.state.sessionmaker, MONTH, now=now)
    assert purged.delivery_event_keys == 3 and purged.rows == 3
    assert await kept() == ["fresh", "month"]


async def test_spent_signature_tokens_go_once_their_signatures_are_out_of_the_tolerance(app: FastAPI) -> None:
    """A token is kept only while its signature could still be taken, whatever the retention settings."""
    now = utcnow()
    expiring = {"expired": -1, "long-expired": -600, "fresh": 1, "fresh-longest": 600}
    async with app.state.sessionmaker() as session, session.begin():
        session.add_all(
            SpentSignatureToken(
                token=token, environment_id="environment", integration_id="integration",
                expires_at=now + timedelta(seconds=seconds),
            )
            for token, seconds in expiring.items()
        )

    async def kept() -> list[str]:
        async with app.state.sessionmaker() as session:
            return sorted((await session.execute(select(SpentSignatureToken.token))).scalars())

    purged = await purge_history(app.state.sessionmaker, Retention(0, 0), now=now)
    assert purged.signature_tokens == 2 and purged.rows == 2
    assert await kept() == ["fresh", "fresh-longest"]


async def test_the_worker_purges_with_the_retention_of_its_settings(app: FastAPI, worker: Worker) -> None:
    assert worker.retention == Retention(notification_days=30, message_days=365)
    assert (await worker.purge_old_history()).events == 0


def test_retention_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HERALD_NOTIFICATION_RETENTION_DAYS", "7")
    monkeypatch.setenv("HERALD_MESSAGE_RETENTION_DAYS", "0")
    settings = load_settings(data_dir=tmp_path, secret_key="k")
    assert (settings.notification_retention_days, settings.message_retention_days) == (7, 0)
    monkeypatch.setenv("HERALD_MESSAGE_RETENTION_DAYS", "-1")
    with pytest.raises(SettingsError, match="HERALD_MESSAGE_RETENTION_DAYS"):
        load_settings(data_dir=tmp_path, secret_key="k")


async def event_to_two_subscribers(api: httpx.AsyncClient, app: FastAPI, worker: Worker) -> None:
    """One event delivered: two notifications, three jobs (its expansion and two in-app steps)."""
    workflow = await create_workflow(api)
    subscribers = [(await create_subscriber(api))["subscriberId"] for _ in range(2)]
    await trigger(api, workflow["triggers"][0]["identifier"], subscribers, payload={"name": "Ada"})
    await worker.run_until_idle()
    assert {k: v for k, v in (await rows(app)).items() if k != "execution_details"} == {
        "events": 1,
        "notifications": 2,
        "jobs": 3,
        "messages": 2,
    }


async def test_a_large_event_is_deleted_over_several_transactions_and_finished_by_the_next_purge(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One event with two notifications and three jobs; a transaction may delete one job and one notification.
    await event_to_two_subscribers(api, app, worker)
    monkeypatch.setattr(retention, "ROWS_PER_TRANSACTION", 1)
    monkeypatch.setattr(retention, "TRANSACTIONS_PER_PURGE", 2)
    later = utcnow() + timedelta(days=31)

    first = await purge_history(app.state.sessionmaker, MONTH, now=later)
    # Two transactions of one job and one notification each: the event is kept until nothing of it is left.
    assert (first.events, first.jobs, first.notifications) == (0, 2, 2)
    assert (await rows(app))["events"] == 1
    second = await purge_history(app.state.sessionmaker, MONTH, now=later)
    assert (second.events, second.jobs, second.notifications) == (1, 1, 0)
    assert await rows(app) == {
        "events": 0,
        "notifications": 0,
        "jobs": 0,
        "execution_details": 0,
        "messages": 2,
    }


async def test_a_purge_reads_an_events_history_once_for_all_the_transactions_deleting_it(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await event_to_two_subscribers(api, app, worker)
    monkeypatch.setattr(retention, "ROWS_PER_TRANSACTION", 1)
    reads: list[str] = []

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().startswith("SELECT"):
            reads.append(statement)

    event.listen(app.state.engine.sync_engine, "before_cursor_execute", record)
    try:
        purged = await purge_history(app.state.sessionmaker, MONTH, now=utcnow() + timedelta(days=31))
    finally:
        event.remove(app.state.engine.sync_engine, "before_cursor_execute", record)
    # Three transactions deleted it (three jobs, one a transaction); each read the
    # finished events and the event's remaining ids again before.
    assert (purged.events, purged.jobs, purged.notifications) == (1, 3, 2)
    assert sum("FROM events" in statement for statement in reads) == 1, reads
    assert sum(statement.lstrip().startswith("SELECT jobs.id") for statement in reads) == 1, reads
    assert sum(statement.lstrip().startswith("SELECT notifications.id") for statement in reads) == 1, reads
    assert (await rows(app))["events"] == 0


async def test_a_purge_stops_at_its_row_budget_and_the_next_goes_on(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(2):
        await delivered_in_app(api, worker)
    monkeypatch.setattr(retention, "EVENTS_PER_TRANSACTION", 1)
    monkeypatch.setattr(retention, "ROWS_PER_PURGE", 1)
    later = utcnow() + timedelta(days=400)

    assert [(await purge_history(app.state.sessionmaker, MONTH, now=later)).events for _ in range(3)] == [1, 1, 0]
    # Messages wait for a purge with budget left; the third had it.
    assert (await rows(app))["messages"] == 0


def test_a_worker_says_at_start_what_it_keeps() -> None:
    assert Retention().describe() == (
        "the activity is kept 30 days (HERALD_NOTIFICATION_RETENTION_DAYS), messages 365 days (HERALD_MESSAGE_RETENTION_DAYS)"
    )
    assert Retention(7.5, 0).describe() == (
        "the activity is kept 7.5 days (HERALD_NOTIFICATION_RETENTION_DAYS), messages for ever (HERALD_MESSAGE_RETENTION_DAYS=0)"
    )


async def test_a_worker_logs_its_retention_when_it_starts(worker: Worker, caplog: pytest.LogCaptureFixture) -> None:
    stop = asyncio.Event()
    stop.set()
    with caplog.at_level(logging.INFO, logger="herald.worker"):
        await worker.run_forever(stop)
    assert f"worker {worker.worker_id}: the activity is kept 30 days" in caplog.text


async def test_the_purge_of_webhook_deliveries_reads_their_index_not_the_jobs_table(app: FastAPI) -> None:
    """Every minute, before its next claim, each worker deletes the finished webhook jobs: read from the whole
    table, that took 0.3-0.55 s on a store of 1.3 million jobs, and delayed every delivery meanwhile."""
    from herald.engine.repository import HistoryRepository

    statements: list[str] = []

    def record(conn: object, cursor: object, statement: str, *rest: object) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM JOBS"):
            statements.append(statement)

    engine = app.state.engine
    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        async with app.state.sessionmaker() as session, session.begin():
            await HistoryRepository(session).delete_finished_webhook_jobs(utcnow())
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)
    [statement] = statements
    sqlite = engine.dialect.name == "sqlite"
    async with engine.connect() as connection:
        if not sqlite:
            await connection.exec_driver_sql("SET enable_seqscan = off")  # the table is empty: may the index serve?
        explain = "EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN "
        # The statement as sent, its values bound as a generic plan binds them: none of them says the kind.
        parameters = ("completed", "failed", "canceled", utcnow()) if sqlite else None
        if sqlite:
            rows = await connection.exec_driver_sql(explain + statement, parameters)
        else:
            await connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
            await connection.exec_driver_sql("PREPARE purge_webhooks AS " + statement)
            casts = dict(re.findall(r"\$(\d+)::(\w+)", statement))
            statuses = iter(("'completed'", "'failed'", "'canceled'"))
            values = [next(statuses) if casts[str(n)] == "VARCHAR" else "now()" for n in range(1, len(casts) + 1)]
            rows = await connection.exec_driver_sql(explain + f"EXECUTE purge_webhooks({', '.join(values)})")
        plan = " / ".join(str(row[-1]) for row in rows)
    assert "ix_jobs_webhook_updated" in plan, plan
