"""Quiet hours and the Inbox's socket: an in-app message is stored at once, its notification_received waits.

A running server with its in-process worker, on each store (SQLite: the event
reaches the socket from the worker's commit; PostgreSQL: through
LISTEN/NOTIFY), and a socket connected as @novu/js connects it. The schedule is
open tomorrow only, so the trigger falls in the subscriber's quiet hours; the
held job is then made due now (the open hour, without waiting for it) and the
server's own worker runs it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from herald.engine.quiet_hours import DAYS
from herald.kit.time import utcnow
from herald.models import Environment, Job
from herald.realtime.held import HELD_RECEIVED_JOB
from tests.conftest import Tenancy
from tests.engine.test_quiet_hours import hours, only_tomorrow, weekly
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.fixtures.processes import wait_until
from tests.realtime.helpers import InboxSocket, session_token


async def inbox_with_schedule(
    app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket], schedule: dict[str, Any]
) -> tuple[dict[str, Any], InboxSocket, httpx.AsyncClient]:
    """A subscriber with this delivery schedule, a socket open, and an inbox client of their session."""
    subscriber = await create_subscriber(herald)
    response = await herald.patch(f"/v2/subscribers/{subscriber['subscriberId']}/preferences", json={"schedule": schedule})
    assert response.status_code == 200, response.text
    async with app.state.sessionmaker() as session:
        identifier = (await session.execute(select(Environment.identifier).where(Environment.id == tenancy.environment_id))).scalar_one()
    token = (await session_token(served, identifier, subscriber["subscriberId"]))["token"]
    socket = InboxSocket()
    sockets.append(socket)
    await socket.connect(served, token)
    inbox = httpx.AsyncClient(base_url=served, headers={"Authorization": f"Bearer {token}"})
    return subscriber, socket, inbox


async def trigger(herald: httpx.AsyncClient, workflow: dict[str, Any], subscriber_id: str) -> None:
    response = await herald.post(
        "/v1/events/trigger", json={"name": workflow["triggers"][0]["identifier"], "to": subscriber_id, "payload": {"name": "Ada"}}
    )
    assert response.status_code == 201, response.text


async def held_jobs(app: FastAPI, subscriber: dict[str, Any]) -> list[Job]:
    async with app.state.sessionmaker() as session:
        rows = await session.execute(select(Job).where(Job.kind == HELD_RECEIVED_JOB, Job.subscriber_id == subscriber["_id"]))
        return list(rows.scalars())


async def _none_left(app: FastAPI, subscriber: dict[str, Any]) -> bool:
    return await held_jobs(app, subscriber) == []


async def stored_and_held(app: FastAPI, inbox: httpx.AsyncClient, socket: InboxSocket, subscriber: dict[str, Any], opens: datetime) -> str:
    """The message is listed and counted at once, its event waits in a job due at ``opens``; the message's id."""
    # The counts are true at once and go at once.
    unread = await socket.next("unread_count_changed")
    assert unread["unreadCount"] == 1
    listed = (await inbox.get("/v1/inbox/notifications")).json()
    [notification] = listed["data"]
    assert notification["body"] == "Hello Ada" and notification["isRead"] is False
    [job] = await wait_until(lambda: held_jobs(app, subscriber), timeout=10, what="the held event's job")
    assert job.status == "queued" and job.run_at == opens and job.event_id == notification["id"]
    # Nothing more arrives before the open hour: no notification_received.
    assert [name for name, _ in await socket.nothing_within(1.0)] == []
    return str(notification["id"])


async def open_hour(app: FastAPI, subscriber: dict[str, Any]) -> None:
    """The subscriber's next open hour comes: the held job is due now, and the server's worker takes it."""
    async with app.state.sessionmaker() as session:
        await session.execute(update(Job).where(Job.kind == HELD_RECEIVED_JOB, Job.subscriber_id == subscriber["_id"]).values(run_at=utcnow()))
        await session.commit()


async def test_in_quiet_hours_the_message_is_stored_at_once_and_its_event_waits_for_the_open_hour(
    app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket]
) -> None:
    schedule, opens = only_tomorrow(utcnow())
    subscriber, socket, inbox = await inbox_with_schedule(app, served, tenancy, herald, sockets, schedule)
    async with inbox:
        workflow = await create_workflow(herald)
        await trigger(herald, workflow, subscriber["subscriberId"])
        message_id = await stored_and_held(app, inbox, socket, subscriber, opens)
        counted = await inbox.get("/v1/inbox/notifications/count", params={"filters": '[{"read": false}]'})
        assert counted.json()["data"][0]["count"] == 1, counted.text

        await open_hour(app, subscriber)
        received = await socket.next("notification_received")
        assert received["message"]["_id"] == message_id and received["message"]["content"] == "Hello Ada"
        assert (await socket.next("unread_count_changed"))["unreadCount"] == 1
        await wait_until(lambda: _none_left(app, subscriber), timeout=10, what="the held job to be done with")


@pytest.mark.parametrize("action", ["read", "archive", "delete", "snooze"])
async def test_a_held_event_is_not_sent_for_a_message_dealt_with_before_the_open_hour(
    app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket], action: str
) -> None:
    schedule, opens = only_tomorrow(utcnow())
    subscriber, socket, inbox = await inbox_with_schedule(app, served, tenancy, herald, sockets, schedule)
    async with inbox:
        workflow = await create_workflow(herald)
        await trigger(herald, workflow, subscriber["subscriberId"])
        message_id = await stored_and_held(app, inbox, socket, subscriber, opens)
        if action == "delete":
            response = await inbox.delete(f"/v1/inbox/notifications/{message_id}/delete")
            assert response.status_code == 204, response.text
        elif action == "snooze":
            # Past the opening: the snooze's own return tells the sockets when it ends (herald.inbox.snooze).
            until = opens + timedelta(hours=1)
            response = await inbox.patch(f"/v1/inbox/notifications/{message_id}/snooze", json={"snoozeUntil": until.isoformat()})
            assert response.status_code == 200, response.text
        else:
            response = await inbox.patch(f"/v1/inbox/notifications/{message_id}/{action}")
            assert response.status_code == 200, response.text
        assert (await socket.next("unread_count_changed"))["unreadCount"] == 0

        await open_hour(app, subscriber)
        await wait_until(lambda: _none_left(app, subscriber), timeout=10, what="the held job to be done with")
        assert [name for name, _ in await socket.nothing_within(0.5)] == []


async def test_a_critical_workflow_s_event_goes_at_once(
    app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket]
) -> None:
    schedule, _ = only_tomorrow(utcnow())
    subscriber, socket, inbox = await inbox_with_schedule(app, served, tenancy, herald, sockets, schedule)
    async with inbox:
        workflow = await create_workflow(herald, critical=True)
        await trigger(herald, workflow, subscriber["subscriberId"])
        received = await socket.next("notification_received")
        assert received["message"]["content"] == "Hello Ada"
        assert await held_jobs(app, subscriber) == []


async def test_inside_the_hours_the_event_goes_at_once(
    app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket]
) -> None:
    # Open all of today and tomorrow (UTC: the subscriber has no timezone), so open now whenever the test runs.
    today = datetime.now(UTC).date()
    days = {DAYS[(today + timedelta(days=offset)).weekday()]: hours("00:00", "00:00") for offset in (0, 1)}
    subscriber, socket, inbox = await inbox_with_schedule(app, served, tenancy, herald, sockets, weekly(**days))
    async with inbox:
        workflow = await create_workflow(herald)
        await trigger(herald, workflow, subscriber["subscriberId"])
        received = await socket.next("notification_received")
        assert received["message"]["content"] == "Hello Ada"
        assert await held_jobs(app, subscriber) == []
