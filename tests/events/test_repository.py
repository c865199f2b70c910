"""The trigger write: the events and the jobs that expand them, as each store writes them."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from herald.events import repository
from herald.events.repository import event_job
from herald.events.schemas import TriggerEventRequest
from herald.events.service import Trigger, record_trigger_batch
from herald.events.targets import TriggerTargets
from herald.kit.auth import Principal
from herald.models import Event, Job, Workflow
from tests.conftest import Tenancy
from tests.fixtures.builders import create_workflow, unique


def _default(column: Any) -> Any:
    default = column.default
    if default is None:
        return None
    return default.arg(None) if default.is_callable else default.arg


def _columns(row: Any) -> dict[str, Any]:
    return {column.name: getattr(row, column.key) for column in row.__table__.columns}


async def _record(app: FastAPI, triggers: list[Trigger], targets: TriggerTargets | None) -> list[Any]:
    async with app.state.sessionmaker() as session:
        results = await record_trigger_batch(session, triggers, targets)
        await session.commit()
    return results


async def test_each_event_and_its_job_are_the_rows_both_stores_write(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    """Every column of the event's job is event_job's or the column's default, and the event keeps the workflow's steps.

    Twice on PostgreSQL: the first batch reads the workflow and sends its
    steps, the second takes it kept and the statement copies them from the
    workflow's row; its jobs are made in the statement (_EVENT_JOB).
    """
    workflow = await create_workflow(api)
    principal = Principal(tenancy.environment_id, tenancy.organization_id, "test")
    targets = None if app.state.settings.is_sqlite else TriggerTargets()
    transaction_ids = []
    for batch in range(2):
        triggers = [
            Trigger(
                principal,
                TriggerEventRequest(
                    name=workflow["triggers"][0]["identifier"],
                    to=[unique("jobs"), {"subscriberId": unique("jobs"), "email": "ada@example.com"}],
                    payload={"batch": batch, "n": n, "quote": "it's"},
                    transactionId=unique(f"jobs-{batch}-{n}"),
                ),
            )
            for n in range(3)
        ]
        results = await _record(app, triggers, targets)
        assert [result.status for result in results] == ["processed"] * 3
        transaction_ids += [trigger.request.transactionId for trigger in triggers]

    async with app.state.sessionmaker() as session:
        steps = (await session.execute(select(Workflow.steps).where(Workflow.id == workflow["_id"]))).scalar_one()
        events = (
            await session.execute(
                select(Event).where(Event.environment_id == tenancy.environment_id, Event.transaction_id.in_(transaction_ids))
            )
        ).scalars().all()
        jobs = (await session.execute(select(Job).where(Job.event_id.in_([event.id for event in events])))).scalars().all()
    assert len(events) == len(jobs) == 6
    by_event = {job.event_id: job for job in jobs}
    for event in events:
        assert event.steps == steps
        assert event.trigger_identifier == workflow["triggers"][0]["identifier"]
        job = by_event[event.id]
        made = event_job(_columns(event), job.id)
        expected = {column.name: made.get(column.name, _default(column)) for column in Job.__table__.columns}
        assert _columns(job) == expected


async def test_the_events_of_a_kept_workflow_are_sent_without_its_steps(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: the document holds each event's steps only where the statement does not check its workflow."""
    if app.state.settings.is_sqlite:
        pytest.skip("SQLite writes the events' rows as they are")
    sent: list[list[dict[str, Any]]] = []
    document = repository.postgres_document

    def kept_document(table: Any, rows: Any, **options: Any) -> str:
        made = document(table, rows, **options)
        sent.append(orjson.loads(made))
        return made

    monkeypatch.setattr(repository, "postgres_document", kept_document)
    workflow = await create_workflow(api)
    principal = Principal(tenancy.environment_id, tenancy.organization_id, "test")
    targets = TriggerTargets()
    for _ in range(2):
        trigger = Trigger(principal, TriggerEventRequest(name=workflow["triggers"][0]["identifier"], to=unique("sent")))
        [result] = await _record(app, [trigger], targets)
        assert result.status == "processed"
    [[read], [kept]] = sent
    assert "steps" not in read and "steps" not in kept
    assert [step["_id"] for step in read["workflow_steps"]] == [step["_id"] for step in workflow["steps"]]
    assert kept["workflow_steps"] is None
