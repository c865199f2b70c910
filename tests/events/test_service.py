"""The trigger batch of the group commit, below the route."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from herald.engine.queue import BUSY, PRESSURE_REQUESTS, WAKE_CHANNEL
from herald.events.schemas import TriggerEventRequest
from herald.events.service import Trigger, record_trigger_batch
from herald.kit.auth import Principal
from herald.models import Event
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_workflow, unique


@pytest.mark.parametrize("size", [1, PRESSURE_REQUESTS - 1, PRESSURE_REQUESTS])
async def test_a_batch_that_many_callers_wait_on_tells_the_workers_the_api_is_busy(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, size: int
) -> None:
    """The wake-up of a batch of PRESSURE_REQUESTS triggers carries BUSY; a smaller batch's carries nothing."""
    if app.state.settings.is_sqlite:
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's; on SQLite the worker counts its own process's requests")
    import asyncpg
    from sqlalchemy.engine import make_url

    workflow = await create_workflow(api)
    principal = Principal(tenancy.environment_id, tenancy.organization_id, "test")
    triggers = [
        Trigger(principal, TriggerEventRequest(name=workflow["triggers"][0]["identifier"], to=unique("busy")))
        for _ in range(size)
    ]
    url = make_url(app.state.settings.database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    listener = await asyncpg.connect(url)
    heard: asyncio.Queue[str] = asyncio.Queue()
    try:
        await listener.add_listener(WAKE_CHANNEL, lambda _c, _p, _ch, payload: heard.put_nowait(payload))
        async with app.state.sessionmaker() as session:
            results = await record_trigger_batch(session, triggers)
            await session.commit()
        assert [getattr(result, "status", result) for result in results] == ["processed"] * size
        assert await asyncio.wait_for(heard.get(), 10) == (BUSY if size >= PRESSURE_REQUESTS else "")
    finally:
        await listener.close()


def _count_workflow_reads(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    from herald.workflows.repository import WorkflowRepository

    reads: list[set[str]] = []
    trigger_targets = WorkflowRepository.trigger_targets

    async def counted(self: WorkflowRepository, environment_id: str, identifiers: Any) -> Any:
        reads.append(set(identifiers))
        return await trigger_targets(self, environment_id, identifiers)

    monkeypatch.setattr(WorkflowRepository, "trigger_targets", counted)
    return reads


async def _steps_of_event(app: FastAPI, tenancy: Tenancy, transaction_id: str) -> list[dict[str, Any]]:
    async with app.state.sessionmaker() as session:
        event = (
            await session.execute(
                select(Event).where(Event.environment_id == tenancy.environment_id, Event.transaction_id == transaction_id)
            )
        ).scalar_one()
        return event.steps


async def _trigger(api: httpx.AsyncClient, name: str) -> httpx.Response:
    return await api.post("/v1/events/trigger", json={"name": name, "to": unique("kept")})


async def test_a_known_workflow_is_not_read_again_and_a_changed_one_is(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: triggers of a kept workflow skip the read; the write notices an update and the batch is judged again."""
    if app.state.settings.is_sqlite:
        pytest.skip("SQLite reads the workflows of every batch (no round trip to save)")
    workflow = await create_workflow(api)
    name = workflow["triggers"][0]["identifier"]
    reads = _count_workflow_reads(monkeypatch)

    first = await _trigger(api, name)
    second = await _trigger(api, name)
    assert (first.status_code, second.status_code) == (201, 201)
    assert reads == [{name}]  # the second batch used the kept workflow

    [step] = workflow["steps"]
    changed = {"_id": step["_id"], "name": step["name"], "template": {"type": "in_app", "content": "changed"}}
    assert (await api.put(f"/v1/workflows/{workflow['_id']}", json={"steps": [changed]})).status_code == 200
    third = await _trigger(api, name)
    assert third.status_code == 201, third.text
    assert reads == [{name}, {name}]  # the write refused the kept one; the batch read it again
    [used] = await _steps_of_event(app, tenancy, third.json()["data"]["transactionId"])
    assert used["template"]["content"] == "changed"
    assert (await _trigger(api, name)).status_code == 201
    assert reads == [{name}, {name}]  # and kept it


@pytest.mark.parametrize("change", ["deactivate", "delete", "activate"])
async def test_a_trigger_of_a_kept_workflow_sees_it_deactivated_deleted_or_activated(
    api: httpx.AsyncClient, app: FastAPI, change: str
) -> None:
    workflow = await create_workflow(api)
    name = workflow["triggers"][0]["identifier"]
    if change == "activate":
        # Kept while inactive: a batch refused on it writes nothing, and is still checked.
        assert (await api.put(f"/v1/workflows/{workflow['_id']}/status", json={"active": False})).status_code == 200
        refused = await _trigger(api, name)
        assert refused.json()["data"]["status"] == "trigger_not_active"
        assert (await api.put(f"/v1/workflows/{workflow['_id']}/status", json={"active": True})).status_code == 200
        response = await _trigger(api, name)
        assert response.status_code == 201, response.text
        assert response.json()["data"]["status"] == "processed"
        return
    assert (await _trigger(api, name)).status_code == 201  # kept (on PostgreSQL)

    if change == "deactivate":
        assert (await api.put(f"/v1/workflows/{workflow['_id']}/status", json={"active": False})).status_code == 200
        response = await _trigger(api, name)
        assert response.status_code == 201, response.text
        assert response.json()["data"]["status"] == "trigger_not_active"
    else:
        assert (await api.delete(f"/v1/workflows/{workflow['_id']}")).status_code == 200
        response = await _trigger(api, name)
        assert_error(response, 422)
        assert response.json()["message"] == "workflow_not_found"
