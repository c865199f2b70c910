"""The reads a change costs the process that holds its subscriber's sockets: one statement each.

A delivery reads the new message (with its workflow and subscriber) and both
counts; at 100 new messages a second to subscribers with a socket open, the
Inbox's own reads (three for the message, three for the counts) cost as much
CPU as the trigger's delivery, and on SQLite, whose one connection the API
and its worker share, held up both.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, case, delete, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.time import utcnow
from herald.models import Message, RealtimePresence, RealtimeProcess, Subscriber, Workflow

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


async def set_online(session: AsyncSession, environment_id: str, subscriber_ids: Sequence[str], online: bool) -> None:
    values: dict[str, Any] = {"is_online": online}
    if not online:
        values["last_online_at"] = utcnow()
    await session.execute(
        update(Subscriber)
        .where(Subscriber.id.in_(sorted(subscriber_ids)), Subscriber.environment_id == environment_id)
        .values(**values),
        execution_options={"synchronize_session": False},
    )


# -- presence across API processes ----------------------------------------------------------------
#
# Every check-and-set below locks the subscriber's row before it reads who
# else holds them (FOR UPDATE on PostgreSQL; SQLite has one writer, and each
# transaction here writes first, so it holds the write lock before it reads).


def _insert(session: AsyncSession) -> Any:
    return pg_insert if session.bind.dialect.name == "postgresql" else sqlite_insert


async def register_process(session: AsyncSession, process_id: str, now: datetime, expires_at: datetime) -> None:
    """Write this process's row (announced): when it starts, and when a sweep took it while it was alive."""
    statement = _insert(session)(RealtimeProcess).values(id=process_id, seen_at=now, expires_at=expires_at, announced=True)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=["id"], set_={"seen_at": now, "expires_at": expires_at, "announced": True}
        )
    )


async def keep_process(session: AsyncSession, process_id: str, now: datetime, expires_at: datetime) -> bool:
    """The heartbeat: push the row's expiry ahead. False when the row is gone or was put back unannounced (swept)."""
    result = await session.execute(
        update(RealtimeProcess)
        .where(RealtimeProcess.id == process_id, RealtimeProcess.announced.is_(True))
        .values(seen_at=now, expires_at=expires_at),
        execution_options={"synchronize_session": False},
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def ensure_process(session: AsyncSession, process_id: str, now: datetime, expires_at: datetime) -> None:
    """Put the process's row back if a sweep took it, unannounced, so no presence row outlives its process's row.

    ON CONFLICT DO NOTHING locks nothing: connects on one process do not queue on its row.
    """
    await session.execute(
        _insert(session)(RealtimeProcess)
        .values(id=process_id, seen_at=now, expires_at=expires_at, announced=False)
        .on_conflict_do_nothing()
    )


async def add_presence(session: AsyncSession, process_id: str, environment_id: str, subscriber_ids: Sequence[str]) -> None:
    await session.execute(
        _insert(session)(RealtimePresence)
        .values(
            [
                {"process_id": process_id, "environment_id": environment_id, "subscriber_id": subscriber_id}
                for subscriber_id in subscriber_ids
            ]
        )
        .on_conflict_do_nothing()
    )


async def remove_presence(session: AsyncSession, process_id: str, environment_id: str, subscriber_ids: Sequence[str]) -> None:
    await session.execute(
        delete(RealtimePresence).where(
            RealtimePresence.process_id == process_id,
            RealtimePresence.environment_id == environment_id,
            RealtimePresence.subscriber_id.in_(subscriber_ids),
        ),
        execution_options={"synchronize_session": False},
    )


async def lock_subscribers(session: AsyncSession, environment_id: str, subscriber_ids: Sequence[str]) -> None:
    """Row locks on the subscribers, in id order (two sweeps lock in the same order: no deadlock)."""
    await session.execute(
        select(Subscriber.id)
        .where(Subscriber.environment_id == environment_id, Subscriber.id.in_(subscriber_ids))
        .order_by(Subscriber.id)
        .with_for_update()
    )


async def held_elsewhere(session: AsyncSession, environment_id: str, subscriber_ids: Sequence[str], now: datetime) -> set[str]:
    """Which of the subscribers a live process (row not expired) still holds a socket of."""
    rows = await session.execute(
        select(RealtimePresence.subscriber_id)
        .join(RealtimeProcess, RealtimeProcess.id == RealtimePresence.process_id)
        .where(
            RealtimePresence.environment_id == environment_id,
            RealtimePresence.subscriber_id.in_(subscriber_ids),
            RealtimeProcess.expires_at > now,
        )
        .distinct()
    )
    return set(rows.scalars())


async def set_offline(
    session: AsyncSession, environment_id: str, subscriber_ids: Sequence[str], at: datetime, *, only_online: bool
) -> None:
    statement = update(Subscriber).where(Subscriber.environment_id == environment_id, Subscriber.id.in_(subscriber_ids))
    if only_online:
        statement = statement.where(Subscriber.is_online.is_(True))
    await session.execute(
        statement.values(is_online=False, last_online_at=at), execution_options={"synchronize_session": False}
    )


async def expired_processes(session: AsyncSession, now: datetime, limit: int) -> list[str]:
    rows = await session.execute(
        select(RealtimeProcess.id).where(RealtimeProcess.expires_at < now).order_by(RealtimeProcess.expires_at).limit(limit)
    )
    return list(rows.scalars())


async def take_process(session: AsyncSession, process_id: str, expired_before: datetime | None) -> datetime | None:
    """Delete a process's row (only if expired, when ``expired_before`` is given); its ``seen_at``, None when
    another sweep took it first or it came back. Whoever deletes the row sweeps its presence."""
    statement = delete(RealtimeProcess).where(RealtimeProcess.id == process_id)
    if expired_before is not None:
        statement = statement.where(RealtimeProcess.expires_at < expired_before)
    row = (await session.execute(statement.returning(RealtimeProcess.seen_at))).first()
    return None if row is None else row[0]


async def take_presence(session: AsyncSession, process_id: str) -> list[tuple[str, str]]:
    """Delete a process's presence rows; (environment id, subscriber id) of each."""
    rows = await session.execute(
        delete(RealtimePresence)
        .where(RealtimePresence.process_id == process_id)
        .returning(RealtimePresence.environment_id, RealtimePresence.subscriber_id)
    )
    return [(row[0], row[1]) for row in rows]
