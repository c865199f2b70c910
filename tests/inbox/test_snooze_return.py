"""A snooze ends by itself: a job of the engine's queue, written with the snooze, delivers the notification again.

Short snoozes and the engine's own worker, on both stores. The snooze route refuses a time that is not in the
future; on a loaded machine a request can take longer than a short snooze, so the route's clock is set a minute
behind while it is called (``snooze``), and the times given are then due whenever the test says.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from herald.app import build_worker
from herald.engine import queue
from herald.engine.worker import Worker
from herald.inbox import service as inbox_service
from herald.inbox.repository import UNSNOOZE_JOB
from herald.kit.time import isoformat, utcnow
from herald.models import Job, Message
from tests.fixtures.builders import create_subscriber, insert_in_app_message


@pytest.fixture
async def worker(app: FastAPI) -> AsyncIterator[Worker]:
    engine_worker = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    yield engine_worker
    if engine_worker.http is not None:
        await engine_worker.http.aclose()


async def return_jobs(app: FastAPI, message_id: str) -> list[Job]:
    async with app.state.sessionmaker() as session:
        rows = await session.execute(select(Job).where(Job.kind == UNSNOOZE_JOB, Job.event_id == message_id))
        return list(rows.scalars())


async def message_row(app: FastAPI, message_id: str) -> Message:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Message).where(Message.id == message_id))).scalar_one()


async def snooze(api: httpx.AsyncClient, subscriber_id: str, message_id: str, until: datetime) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(inbox_service, "utcnow", lambda: utcnow() - timedelta(minutes=1))
        response = await api.patch(
            f"/v2/subscribers/{subscriber_id}/notifications/{message_id}/snooze", json={"snoozeUntil": isoformat(until)}
        )
    assert response.status_code == 200, response.text


async def sleep_until(moment: datetime) -> None:
    await asyncio.sleep(max(0.0, (moment - utcnow()).total_seconds()) + 0.05)


async def test_the_notification_comes_back_when_its_time_comes(app: FastAPI, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    message = await insert_in_app_message(app, subscriber)
    until = utcnow() + timedelta(seconds=2)
    await snooze(api, subscriber["subscriberId"], message.id, until)
    [job] = await return_jobs(app, message.id)
    assert job.status == "queued" and abs(job.run_at - until) < timedelta(milliseconds=2)
    assert job.subscriber_id == subscriber["_id"] and job.environment_id == subscriber["_environmentId"]
    await sleep_until(until)
    # Another worker than the one that saw it written (as after a restart): the job is in the store.
    fresh = build_worker(app.state.settings, app.state.sessionmaker)
    try:
        await fresh.run_until_idle()
    finally:
        if fresh.http is not None:
            await fresh.http.aclose()
    row = await message_row(app, message.id)
    assert row.snoozed_until is None and len(row.delivered_at) == 2
    assert await return_jobs(app, message.id) == []
    listed = await api.get(f"/v2/subscribers/{subscriber['subscriberId']}/notifications", params={"snoozed": "false"})
    [item] = listed.json()["data"]
    assert item["id"] == message.id and item["isSnoozed"] is False and item["deliveredAt"][-1] == row.delivered_at[-1]


async def test_a_new_snooze_replaces_the_return(app: FastAPI, api: httpx.AsyncClient, worker: Worker) -> None:
    subscriber = await create_subscriber(api)
    message = await insert_in_app_message(app, subscriber)
    soon = utcnow() + timedelta(seconds=2)
    await snooze(api, subscriber["subscriberId"], message.id, soon)
    later = utcnow() + timedelta(hours=1)
    await snooze(api, subscriber["subscriberId"], message.id, later)
    [job] = await return_jobs(app, message.id)
    assert abs(job.run_at - later) < timedelta(milliseconds=2)
    # A job not yet due is left be.
    await worker.run_until_idle()
    assert len(await return_jobs(app, message.id)) == 1
    await sleep_until(soon)
    await worker.run_until_idle()
    row = await message_row(app, message.id)
    assert row.snoozed_until is not None and abs(row.snoozed_until - later) < timedelta(milliseconds=2)
    assert len(row.delivered_at) == 1


async def test_unsnooze_cancels_the_return(app: FastAPI, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    message = await insert_in_app_message(app, subscriber)
    await snooze(api, subscriber["subscriberId"], message.id, utcnow() + timedelta(hours=1))
    assert len(await return_jobs(app, message.id)) == 1
    response = await api.patch(f"/v2/subscribers/{subscriber['subscriberId']}/notifications/{message.id}/unsnooze")
    assert response.status_code == 200, response.text
    assert await return_jobs(app, message.id) == []
    assert len((await message_row(app, message.id)).delivered_at) == 2


async def test_a_return_that_no_longer_matches_changes_nothing(app: FastAPI, api: httpx.AsyncClient, worker: Worker) -> None:
    """A job already claimed when the snooze changed (so not deleted): it re-reads the message and leaves it."""
    subscriber = await create_subscriber(api)
    message = await insert_in_app_message(app, subscriber)
    until = utcnow() + timedelta(seconds=2)
    await snooze(api, subscriber["subscriberId"], message.id, until)
    other = utcnow() + timedelta(hours=2)
    async with app.state.sessionmaker() as session:
        await session.execute(update(Message).where(Message.id == message.id).values(snoozed_until=other))
        await session.commit()
    await sleep_until(until)
    await worker.run_until_idle()
    row = await message_row(app, message.id)
    assert row.snoozed_until is not None and abs(row.snoozed_until - other) < timedelta(milliseconds=2)
    assert len(row.delivered_at) == 1
    # Done with, all the same: nothing is left to run.
    assert await return_jobs(app, message.id) == []


async def test_a_deleted_notification_s_return_is_harmless(app: FastAPI, api: httpx.AsyncClient, worker: Worker) -> None:
    subscriber = await create_subscriber(api)
    message = await insert_in_app_message(app, subscriber)
    until = utcnow() + timedelta(seconds=2)
    await snooze(api, subscriber["subscriberId"], message.id, until)
    response = await api.delete(f"/v2/subscribers/{subscriber['subscriberId']}/notifications/{message.id}")
    assert response.status_code == 204, response.text
    await sleep_until(until)
    await worker.run_until_idle()
    assert await return_jobs(app, message.id) == []
    async with app.state.sessionmaker() as session:
        assert (await session.execute(select(Message).where(Message.id == message.id))).scalar_one_or_none() is None


async def test_a_worker_that_dies_holding_the_return_loses_nothing(app: FastAPI, api: httpx.AsyncClient) -> None:
    """Claimed by a worker that stopped before running it: once its lease is over another worker brings it back."""
    subscriber = await create_subscriber(api)
    message = await insert_in_app_message(app, subscriber)
    until = utcnow() + timedelta(seconds=2)
    await snooze(api, subscriber["subscriberId"], message.id, until)
    await sleep_until(until)
    async with app.state.sessionmaker() as session:
        claimed = await queue.claim_jobs(session, "a-worker-that-dies", 100, lease_seconds=0.2)
        await session.commit()
    assert message.id in [job.event_id for job in claimed]
    await asyncio.sleep(0.3)
    survivor = build_worker(app.state.settings, app.state.sessionmaker)
    try:
        await survivor.run_until_idle()
    finally:
        if survivor.http is not None:
            await survivor.http.aclose()
    row = await message_row(app, message.id)
    assert row.snoozed_until is None and len(row.delivered_at) == 2
    assert await return_jobs(app, message.id) == []
