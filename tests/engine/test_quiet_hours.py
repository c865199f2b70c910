"""Quiet hours: the subscriber's delivery schedule holds email, sms, chat and push until its next open hour."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from herald.app import build_worker
from herald.engine import runner
from herald.engine.quiet_hours import DAYS, held_until, parse_time
from herald.engine.worker import Worker
from herald.kit.time import isoformat, utcnow
from herald.models import Job
from herald.realtime.held import HELD_RECEIVED_JOB
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, fast_forward, jobs_of, messages_of, trigger
from tests.fixtures import peers
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow
from tests.fixtures.peers import HttpPeer

SMS = {"name": "text", "template": {"type": "sms", "content": "Order {{payload.order}} shipped"}}
IN_APP = {"name": "inbox", "template": {"type": "in_app", "content": "Order {{payload.order}}"}}
TWILIO_PATH = "/2010-04-01/Accounts/AC1/Messages.json"


def weekly(**days: Any) -> dict[str, Any]:
    return {"isEnabled": True, "weeklySchedule": days}


def hours(start: str, end: str) -> dict[str, Any]:
    return {"isEnabled": True, "hours": [{"start": start, "end": end}]}


# --- the schedule, read at a given instant -------------------------------------------------


def test_times_of_day_as_the_client_writes_them() -> None:
    assert parse_time("09:00 AM").hour == 9 and parse_time("9 PM").hour == 21
    assert parse_time("12:00 AM").hour == 0 and parse_time("12:30 pm").hour == 12
    assert parse_time("17:45").minute == 45
    for bad in ("25:00", "9", "13:00 PM", "noon"):
        with pytest.raises(ValueError):
            parse_time(bad)


def test_inside_the_hours_nothing_is_held_and_outside_the_next_opening_is_found() -> None:
    schedule = weekly(wednesday=hours("09:00 AM", "05:00 PM"), friday=hours("10:00", "12:00"))
    wednesday = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    assert held_until(schedule, None, wednesday) is None
    # After Wednesday's hours: Friday at ten, UTC (no timezone).
    assert held_until(schedule, None, wednesday.replace(hour=17)) == datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
    # Before them: the same morning.
    assert held_until(schedule, None, wednesday.replace(hour=3)) == datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
    # In the subscriber's timezone: 09:00 in Tokyo is 00:00 UTC.
    assert held_until(schedule, "Asia/Tokyo", wednesday) == datetime(2026, 11, 27, 1, 0, tzinfo=UTC)
    # An unknown timezone is read as UTC.
    assert held_until(schedule, "Mars/Olympus", wednesday.replace(hour=17)) == datetime(2026, 11, 27, 10, 0, tzinfo=UTC)


def test_a_disabled_or_empty_schedule_holds_nothing_and_a_range_may_pass_midnight() -> None:
    now = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
    closed_days = weekly(**{day: {"isEnabled": False} for day in DAYS})
    assert held_until(closed_days, None, now) is None
    assert held_until({**weekly(monday=hours("09:00", "10:00")), "isEnabled": False}, None, now) is None
    # Tuesday 22:00 to Wednesday 06:00: open at 03:00 on Wednesday.
    assert held_until(weekly(tuesday=hours("10:00 PM", "06:00 AM")), None, now) is None
    # An enabled day without hours is open all day.
    assert held_until(weekly(wednesday={"isEnabled": True}), None, now) is None


def test_daylight_saving_changes_move_the_opening_in_utc() -> None:
    schedule = weekly(sunday=hours("09:00 AM", "05:00 PM"))
    # New York springs forward on Sunday 2026-03-08: 09:00 is EDT (UTC-4), not EST.
    assert held_until(schedule, "America/New_York", datetime(2026, 3, 8, 4, 0, tzinfo=UTC)) == datetime(2026, 3, 8, 13, 0, tzinfo=UTC)
    # And falls back on Sunday 2026-11-01: 09:00 is EST (UTC-5).
    assert held_until(schedule, "America/New_York", datetime(2026, 11, 1, 5, 0, tzinfo=UTC)) == datetime(2026, 11, 1, 14, 0, tzinfo=UTC)
    # A time that does not exist that day (02:30 in Paris on 2026-03-29) is read with the offset before the change.
    at_night = weekly(sunday=hours("02:30", "04:00"))
    assert held_until(at_night, "Europe/Paris", datetime(2026, 3, 28, 20, 0, tzinfo=UTC)) == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)


# --- the engine holds and releases deliveries ----------------------------------------------


class Clock:
    """The time the engine's steps see (runner.utcnow), set by the test; the queue keeps the real one."""

    def __init__(self) -> None:
        self.now: datetime | None = None

    def __call__(self) -> datetime:
        return self.now or utcnow()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    clock = Clock()
    monkeypatch.setattr(runner, "utcnow", clock)
    yield clock


@pytest.fixture(scope="module")
def _peer() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    yield server
    server.stop()


@pytest.fixture
def peer(_peer: HttpPeer) -> Iterator[HttpPeer]:
    _peer.reset()
    peers.install_twilio(_peer, account_sid="AC1", token="tok")
    yield _peer
    _peer.reset()


def only_tomorrow(now: datetime) -> tuple[dict[str, Any], datetime]:
    """A schedule open tomorrow 09:00-10:00 UTC only (so closed now), and when it opens."""
    tomorrow = (now + timedelta(days=1)).date()
    opens = datetime(tomorrow.year, tomorrow.month, tomorrow.day, 9, 0, tzinfo=UTC)
    return weekly(**{DAYS[tomorrow.weekday()]: hours("09:00", "10:00")}), opens


async def subscriber_with_schedule(api: httpx.AsyncClient, schedule: dict[str, Any]) -> dict[str, Any]:
    subscriber = await create_subscriber(api, phone="+15550001")
    response = await api.patch(f"/v2/subscribers/{subscriber['subscriberId']}/preferences", json={"schedule": schedule})
    assert response.status_code == 200, response.text
    return subscriber


async def sms_workflow(api: httpx.AsyncClient, peer: HttpPeer, **fields: Any) -> str:
    await create_integration(
        api, providerId="twilio", channel="sms", active=True, credentials={"accountSid": "AC1", "token": "tok", "from": "+100", "baseUrl": peer.url}
    )
    workflow = await create_workflow(api, steps=[IN_APP, SMS], **fields)
    return str(workflow["triggers"][0]["identifier"])


async def test_an_sms_outside_the_hours_waits_for_the_next_open_hour_and_survives_a_restart(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer, clock: Clock
) -> None:
    schedule, opens = only_tomorrow(utcnow())
    subscriber = await subscriber_with_schedule(api, schedule)
    name = await sms_workflow(api, peer)
    transaction = (await trigger(api, name, subscriber["subscriberId"], payload={"order": "A-1"}))["transactionId"]
    await worker.run_until_idle()

    # The in-app message is delivered at once; the sms is held, as a delayed job due at the opening.
    assert [m.channel for m in await messages_of(app, tenancy.environment_id, transaction_id=transaction)] == ["in_app"]
    assert peer.requests_to(TWILIO_PATH) == []
    held = [job for job in await jobs_of(app, transaction) if job.step_type == "sms"][0]
    assert held.status == "delayed" and held.run_at == opens
    texts = [detail.detail for detail in await details_of(app, transaction)]
    assert f"Held by the subscriber's delivery schedule until {isoformat(opens)} (UTC)" in texts, texts

    # A new worker (a restart), at the opening hour: the sms goes.
    clock.now = opens + timedelta(minutes=5)
    assert await fast_forward(app, transaction) == 1
    restarted = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    try:
        await restarted.run_until_idle()
    finally:
        await restarted.http.aclose()
    [request] = peer.requests_to(TWILIO_PATH)
    assert request.form_value("Body") == "Order A-1 shipped"
    assert {job.step_type: job.status for job in await jobs_of(app, transaction) if job.kind == "step"} == {"in_app": "completed", "sms": "completed"}


async def test_due_again_while_still_closed_the_sms_waits_again(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer, clock: Clock
) -> None:
    schedule, opens = only_tomorrow(utcnow())
    subscriber = await subscriber_with_schedule(api, schedule)
    name = await sms_workflow(api, peer)
    transaction = (await trigger(api, name, subscriber["subscriberId"], payload={"order": "B-2"}))["transactionId"]
    await worker.run_until_idle()
    # Due early (the subscriber's hours were moved, say): evaluated again, and held again.
    clock.now = opens - timedelta(hours=2)
    await fast_forward(app, transaction)
    await worker.run_until_idle()
    assert peer.requests_to(TWILIO_PATH) == []
    held = [job for job in await jobs_of(app, transaction) if job.step_type == "sms"][0]
    assert held.status == "delayed" and held.run_at == opens


async def test_a_critical_workflow_ignores_the_schedule(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer, clock: Clock
) -> None:
    schedule, _ = only_tomorrow(utcnow())
    subscriber = await subscriber_with_schedule(api, schedule)
    name = await sms_workflow(api, peer, critical=True)
    transaction = (await trigger(api, name, subscriber["subscriberId"], payload={"order": "C-3"}))["transactionId"]
    await worker.run_until_idle()
    [request] = peer.requests_to(TWILIO_PATH)
    assert request.form_value("Body") == "Order C-3 shipped"
    assert all(job.status == "completed" for job in await jobs_of(app, transaction) if job.kind == "step")


async def held_events(app: FastAPI, transaction_id: str) -> list[Job]:
    return [job for job in await jobs_of(app, transaction_id) if job.kind == HELD_RECEIVED_JOB]


async def test_an_in_app_message_is_stored_at_once_and_its_socket_event_waits_in_a_job_that_survives_a_restart(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, clock: Clock
) -> None:
    """Two in-app steps: the first is settled in its expansion, the second runs as a step; both are held alike."""
    schedule, opens = only_tomorrow(utcnow())
    subscriber = await subscriber_with_schedule(api, schedule)
    second = {"name": "inbox again", "template": {"type": "in_app", "content": "Again {{payload.order}}"}}
    workflow = await create_workflow(api, steps=[IN_APP, second])
    transaction = (await trigger(api, workflow["triggers"][0]["identifier"], subscriber["subscriberId"], payload={"order": "D-4"}))["transactionId"]
    await worker.run_until_idle()

    # Both messages are in the inbox at once; each one's event waits for the opening, in a job of the queue.
    messages = await messages_of(app, tenancy.environment_id, transaction_id=transaction)
    assert sorted(m.content for m in messages) == ["Again D-4", "Order D-4"]
    held = await held_events(app, transaction)
    assert sorted(job.event_id for job in held) == sorted(m.id for m in messages)
    assert all(job.status == "queued" and job.run_at == opens and job.subscriber_id == subscriber["_id"] for job in held)
    assert {job.step_type: job.status for job in await jobs_of(app, transaction) if job.kind == "step"} == {"in_app": "completed"}
    texts = [detail.detail for detail in await details_of(app, transaction)]
    assert texts.count(f"Real-time notification held by the subscriber's delivery schedule until {isoformat(opens)} (UTC)") == 2, texts

    # A new worker (a restart), at the opening hour: it takes the jobs and is done with them.
    clock.now = opens + timedelta(minutes=5)
    async with app.state.sessionmaker() as session:
        await session.execute(update(Job).where(Job.kind == HELD_RECEIVED_JOB, Job.transaction_id == transaction).values(run_at=utcnow()))
        await session.commit()
    restarted = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    try:
        await restarted.run_until_idle()
    finally:
        await restarted.http.aclose()
    assert await held_events(app, transaction) == []


async def test_a_critical_workflow_s_in_app_event_is_not_held(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    schedule, _ = only_tomorrow(utcnow())
    subscriber = await subscriber_with_schedule(api, schedule)
    workflow = await create_workflow(api, steps=[IN_APP], critical=True)
    transaction = (await trigger(api, workflow["triggers"][0]["identifier"], subscriber["subscriberId"], payload={"order": "E-5"}))["transactionId"]
    await worker.run_until_idle()
    assert [m.channel for m in await messages_of(app, tenancy.environment_id, transaction_id=transaction)] == ["in_app"]
    assert await held_events(app, transaction) == []
