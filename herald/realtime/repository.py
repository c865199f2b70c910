"""The reads a change costs the process that holds its subscriber's sockets: one statement each.

A delivery reads the new message (with its workflow and subscriber) and both
counts; at 100 new messages a second to subscribers with a socket open, the
Inbox's own reads (three for the message, three for the counts) cost as much
CPU as the trigger's delivery, and on SQLite, whose one connection the API
and its worker share, held up both.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, case, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.time import utcnow
from herald.models import Message, Subscriber, Workflow

_SHOWN = and_(
    Message.environment_id == bindparam("environment"),
    Message.subscriber_id == bindparam("subscriber"),
    Message.channel == "in_app",
    Message.archived.is_(False),
    or_(Message.snoozed_until.is_(None), Message.snoozed_until <= bindparam("now", type_=Message.snoozed_until.type)),
)
# Unread and unseen of the subscriber's Inbox (not archived, not snoozed), by their workflow's severity.
_COUNTS = (
    select(
        Workflow.severity,
        func.sum(case((Message.read.is_(False), 1), else_=0)),
        func.sum(case((Message.seen.is_(False), 1), else_=0)),
    )
    .select_from(Message)
    .outerjoin(Workflow, Workflow.id == Message.workflow_id)
    .where(_SHOWN)
    .group_by(Workflow.severity)
)
_MESSAGE = (
    select(Message, Workflow, Subscriber)
    .outerjoin(Workflow, Workflow.id == Message.workflow_id)
    .outerjoin(Subscriber, and_(Subscriber.id == Message.subscriber_id, Subscriber.deleted.is_(False)))
    .where(
        Message.id == bindparam("message"),
        Message.environment_id == bindparam("environment"),
        Message.subscriber_id == bindparam("subscriber"),
        Message.channel == "in_app",
    )
)


async def counts(session: AsyncSession, environment_id: str, subscriber_id: str, now: datetime) -> tuple[dict[str, int], int]:
    """Unread by severity (high, medium, low, none) and unseen, in one statement."""
    rows = await session.execute(_COUNTS, {"environment": environment_id, "subscriber": subscriber_id, "now": now})
    unread = {"high": 0, "medium": 0, "low": 0, "none": 0}
    unseen = 0
    for severity, unread_count, unseen_count in rows:
        key = severity if severity in unread else "none"
        unread[key] += int(unread_count or 0)
        unseen += int(unseen_count or 0)
    return unread, unseen


async def message(session: AsyncSession, environment_id: str, subscriber_id: str, message_id: str) -> tuple[Message, Workflow | None, Subscriber | None] | None:
    row = (
        await session.execute(_MESSAGE, {"message": message_id, "environment": environment_id, "subscriber": subscriber_id})
    ).first()
    return None if row is None else (row[0], row[1], row[2])


async def set_online(session: AsyncSession, environment_id: str, subscriber_id: str, online: bool) -> None:
    values: dict[str, Any] = {"is_online": online}
    if not online:
        values["last_online_at"] = utcnow()
    await session.execute(
        update(Subscriber)
        .where(Subscriber.id == subscriber_id, Subscriber.environment_id == environment_id)
        .values(**values),
        execution_options={"synchronize_session": False},
    )
