"""The Analytics page: messages by day, channel and status, top workflows, provider error rates, active subscribers."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import delete, select, update

from herald.analytics import service
from herald.analytics.repository import AnalyticsRepository
from herald.kit.auth import Principal
from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.models import AnalyticsCount, Message
from tests.conftest import Tenancy
from tests.fixtures.builders import create_workflow, unique
from tests.fixtures.console import ConsoleAs


async def _messages(app: FastAPI, environment_id: str, organization_id: str, rows: list[dict]) -> None:
    """Messages written straight to the store as the engine writes them (channel, status, provider, when)."""
    async with app.state.sessionmaker() as session:
        for row in rows:
            session.add(
                Message(
                    environment_id=environment_id,
                    organization_id=organization_id,
                    notification_id=new_id(),
                    subscriber_id=row.get("subscriber", "sub-1"),
                    workflow_id=row.get("workflow"),
                    transaction_id=f"txn_{new_id()}",
                    channel=row["channel"],
                    status=row.get("status", "sent"),
                    provider_id=row.get("provider"),
                    created_at=row["at"],
                    updated_at=row["at"],
                )
            )
        await session.commit()


def _table(page: str, caption: str) -> list[list[str]]:
    """The rows of the table captioned ``caption``: each row's header and cells, as text."""
    found = re.search(rf"<caption[^>]*>{re.escape(caption)}: the numbers</caption>(.*?)</table>", page, re.S)
    assert found, f"no table {caption!r}"
    rows = re.findall(r"<tr>(.*?)</tr>", found.group(1), re.S)
    return [[html.unescape(cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)] for row in rows]


async def test_the_page_counts_the_environments_messages_of_7_or_30_days(
    app: FastAPI, console_as: ConsoleAs, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    welcome = await create_workflow(api, name=unique("Welcome"))
    receipt = await create_workflow(api, name=unique("Receipt"))
    now = utcnow()
    env, org = tenancy.environment_id, tenancy.organization_id
    await _messages(app, env, org, [
        {"channel": "email", "provider": "sendgrid", "workflow": welcome["_id"], "at": now, "subscriber": "a"},
        {"channel": "email", "provider": "sendgrid", "workflow": welcome["_id"], "at": now, "status": "error", "subscriber": "b"},
        {"channel": "in_app", "workflow": receipt["_id"], "at": now, "subscriber": "a"},
        {"channel": "sms", "provider": "twilio", "workflow": welcome["_id"], "at": now - timedelta(days=3), "subscriber": "c"},
        {"channel": "email", "provider": "sendgrid", "workflow": receipt["_id"], "at": now - timedelta(days=10), "status": "error"},
        {"channel": "email", "provider": "sendgrid", "workflow": receipt["_id"], "at": now - timedelta(days=40)},
    ])
    # Production's messages are not Development's.
    await _messages(app, tenancy.production_environment_id, org, [{"channel": "push", "provider": "fcm", "at": now}])
    viewer = await console_as("viewer")
    week = await viewer.get("/console/analytics", params={"days": "7"})
    assert week.status_code == 200
    assert week.text.count('<svg class="chart"') == 6
    today, three_days_ago = f"{now:%b} {now.day}", f"{now - timedelta(days=3):%b} {(now - timedelta(days=3)).day}"
    by_day = _table(week.text, "Messages by day and channel")
    assert by_day[0] == ["Day", "email", "in_app", "sms"] and len(by_day) == 8
    assert by_day[-1] == [today, "2", "1", "0"]
    assert [row[0] for row in by_day[1:] if row[1:] != ["0", "0", "0"]] == [three_days_ago, today]
    assert _table(week.text, "Messages by channel and status") == [
        ["Channel", "error", "sent"], ["email", "1", "1"], ["in_app", "0", "1"], ["sms", "0", "1"]
    ]
    assert _table(week.text, "Top workflows by messages") == [
        ["Workflow", "messages", "errors"], [welcome["name"], "3", "1"], [receipt["name"], "1", "0"]
    ]
    assert _table(week.text, "Provider error rates (% of messages)") == [
        ["Provider (errors of messages)", "error rate %"], ["sendgrid (1 of 2)", "50"], ["twilio (0 of 1)", "0"]
    ]
    # Subscribers are counted for the days that ended: one on the day of the sms.
    assert [three_days_ago, "1"] in _table(week.text, "Active subscribers by day (sent at least one message)")
    assert "fcm" not in week.text and "push" not in week.text
    month = await viewer.get("/console/analytics", params={"days": "30"})
    assert len(_table(month.text, "Messages by day and status")) == 31
    assert _table(month.text, "Provider error rates (% of messages)")[1] == ["sendgrid (2 of 3)", "66.67"]
    # Anything but 7 or 30 is the last 7 days.
    odd = await viewer.get("/console/analytics", params={"days": "9999"})
    assert odd.status_code == 200 and len(_table(odd.text, "Messages by day and channel")) == 8


async def test_minutes_are_counted_once_they_settled_and_kept(app: FastAPI, tenancy: Tenancy) -> None:
    env, org = tenancy.environment_id, tenancy.organization_id
    principal = Principal(env, org, api_key_id="")
    now = datetime(2026, 11, 20, 2, 30, tzinfo=UTC)
    await _messages(app, env, org, [
        {"channel": "in_app", "at": datetime(2026, 11, 14, 5, tzinfo=UTC), "subscriber": "w"},
        {"channel": "email", "provider": "ses", "at": datetime(2026, 11, 18, 12, tzinfo=UTC), "subscriber": "x"},
        {"channel": "email", "provider": "ses", "at": datetime(2026, 11, 19, 12, tzinfo=UTC), "status": "error", "subscriber": "y"},
        {"channel": "sms", "provider": "twilio", "at": datetime(2026, 11, 20, 0, 30, tzinfo=UTC), "subscriber": "z"},
        {"channel": "email", "provider": "ses", "at": datetime(2026, 11, 20, 1, 30, tzinfo=UTC), "subscriber": "z"},
    ])
    async with app.state.sessionmaker() as session:
        first = await service.analytics(session, principal, 7, now=now)
        await session.commit()
    assert first.by_day_channel == {"email": [0, 0, 0, 0, 1, 1, 1], "in_app": [1, 0, 0, 0, 0, 0, 0], "sms": [0, 0, 0, 0, 0, 0, 1]}
    assert first.errors == 1 and [(item.provider_id, item.messages, item.errors) for item in first.providers] == [
        ("ses", 3, 1), ("twilio", 1, 0)
    ]
    # Subscribers are counted for the days that ended; Nov 20 is not over.
    assert {day.day: value for day, value in first.active_subscribers.items()} == {14: 1, 15: 0, 16: 0, 17: 0, 18: 1, 19: 1}
    async with app.state.sessionmaker() as session:
        # Ten minutes are kept from the time they ended half an hour ago (up to 02:00); a day that ended as one.
        assert await AnalyticsRepository(session).counted_until(env) == datetime(2026, 11, 20, 2, tzinfo=UTC)
        periods = (await session.execute(select(AnalyticsCount.period).where(AnalyticsCount.environment_id == env))).scalars().all()
        assert sorted(periods) == ["2026-11-14", "2026-11-18", "2026-11-19", "2026-11-20 00:3", "2026-11-20 01:3"]
        # Retention deletes the messages kept: the page's numbers stay.
        await session.execute(delete(Message).where(Message.environment_id == env, Message.created_at < datetime(2026, 11, 20, 2, tzinfo=UTC)))
        await session.commit()
    # A message of the last half hour, not kept yet, fails on a retry: counted as it is now.
    await _messages(app, env, org, [{"channel": "email", "provider": "ses", "at": datetime(2026, 11, 20, 2, 10, tzinfo=UTC), "subscriber": "z"}])
    async with app.state.sessionmaker() as session:
        await session.execute(update(Message).where(Message.environment_id == env).values(status="error"))
        await session.commit()
    async with app.state.sessionmaker() as session:
        again = await service.analytics(session, principal, 7, now=now)
        await session.commit()
    assert again.by_day_channel == {**first.by_day_channel, "email": [0, 0, 0, 0, 1, 1, 2]}
    assert again.active_subscribers == first.active_subscribers
    assert again.by_channel_status == {"email": {"sent": 2, "error": 2}, "in_app": {"sent": 1}, "sms": {"sent": 1}}
    async with app.state.sessionmaker() as session:
        later = await service.analytics(session, principal, 7, now=now + timedelta(days=1))
        assert await AnalyticsRepository(session).counted_until(env) == datetime(2026, 11, 21, 2, tzinfo=UTC)
        # Nov 20 ended: its slots kept before are folded into the day.
        periods = (await session.execute(select(AnalyticsCount.period).where(AnalyticsCount.environment_id == env))).scalars().all()
        assert sorted(periods) == ["2026-11-14", "2026-11-18", "2026-11-19", "2026-11-20", "2026-11-20", "2026-11-20"]
    assert later.by_day_channel == {"email": [0, 0, 0, 1, 1, 2, 0], "sms": [0, 0, 0, 0, 0, 1, 0]}
    assert later.by_channel_status == {"email": {"sent": 2, "error": 2}, "sms": {"sent": 1}}
    assert {day.day: value for day, value in later.active_subscribers.items()}[20] == 1
    # Another environment's counts are its own.
    async with app.state.sessionmaker() as session:
        other = await service.analytics(session, Principal(tenancy.production_environment_id, org, api_key_id=""), 7, now=now)
    assert other.total == 0 and other.by_day_channel == {}
