"""Inbox queries: the only place that reads or changes a subscriber's inbox.

:class:`InboxRepository` is bound to one environment and one subscriber, and
every query it makes names both (and the in-app channel): another subscriber's
notification ids are unknown here. The feed's index
``ix_messages_subscriber_channel_created`` serves the lists and counts.

A snooze is a time, not a state: a message is snoozed while ``snoozed_until``
is in the future, and comes back by itself once it has passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from herald.models import ApiKey, Environment, Integration, Job, Message, Subscriber, Workflow

# The job that brings a snoozed notification back when its time comes (herald.inbox.snooze).
UNSNOOZE_JOB = "unsnooze"

IN_APP = "in_app"
NEWEST_FIRST = (Message.created_at.desc(), Message.id.desc())


@dataclass(frozen=True)
class InboxFilter:
    """What narrows a subscriber's inbox. ``workflow_ids`` is what tags and severity came to (None: any)."""

    read: bool | None = None
    seen: bool | None = None
    archived: bool | None = None
    # True: only those snoozed now; false: none of them (the Inbox's tabs ask for false); None: either, as Novu.
    snoozed: bool | None = None
    workflow_ids: frozenset[str] | None = None
    data: dict[str, Any] | None = None
    created_gte: datetime | None = None
    created_lte: datetime | None = None
    ids: Sequence[str] | None = field(default=None)


def _matches_value(actual: Any, expected: Any) -> bool:
    """One ``data`` clause: a scalar (equal), a list or ``{"or": [...]}`` (any), ``{"and": [{"or": [...]}]}`` (all groups)."""
    if isinstance(expected, list):
        return any(_matches_value(actual, item) for item in expected)
    if isinstance(expected, dict):
        if set(expected) == {"or"} and isinstance(expected["or"], list):
            return any(_matches_value(actual, item) for item in expected["or"])
        if set(expected) == {"and"} and isinstance(expected["and"], list):
            return all(_matches_value(actual, group) for group in expected["and"])
        # A nested object: its keys follow the same rules.
        return isinstance(actual, dict) and data_matches(actual, expected)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual is expected
    return actual == expected


def data_matches(data: Any, expected: dict[str, Any]) -> bool:
    """Whether a message's ``data`` meets the filter: every key's clause holds (@novu/js's NotificationFilter.data)."""
    if not isinstance(data, dict):
        return not expected
    return all(key in data and _matches_value(data[key], value) for key, value in expected.items())


class SessionRepository:
    """What a session needs before it knows its subscriber."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def environment_by_identifier(self, identifier: str) -> Environment | None:
        result = await self.session.execute(select(Environment).where(Environment.identifier == identifier))
        return result.scalar_one_or_none()

    async def active_in_app_integration(self, environment_id: str, provider_id: str) -> Integration | None:
        result = await self.session.execute(
            select(Integration)
            .where(
                Integration.environment_id == environment_id,
                Integration.channel == IN_APP,
                Integration.provider_id == provider_id,
                Integration.active.is_(True),
                Integration.deleted.is_(False),
            )
            .order_by(Integration.created_at)
            .limit(1)
        )
        return result.scalar_one_or_none()

    async def subscriber(self, environment_id: str, subscriber_id: str) -> Subscriber | None:
        result = await self.session.execute(
            select(Subscriber).where(
                Subscriber.environment_id == environment_id,
                Subscriber.subscriber_id == subscriber_id,
                Subscriber.deleted.is_(False),
            )
        )
        return result.scalar_one_or_none()

    async def sealed_api_keys(self, environment_id: str) -> list[str]:
        """The sealed keys of the environment's live API keys (keys made before they were kept have none)."""
        result = await self.session.execute(
            select(ApiKey.sealed_key)
            .where(ApiKey.environment_id == environment_id, ApiKey.revoked_at.is_(None), ApiKey.sealed_key.is_not(None))
            .order_by(ApiKey.created_at)
        )
        return [value for value in result.scalars() if value]


class InboxRepository:
    def __init__(self, session: AsyncSession, environment_id: str, subscriber_id: str) -> None:
        self.session = session
        self.environment_id = environment_id
        self.subscriber_id = subscriber_id

    def _scope(self) -> list[ColumnElement[bool]]:
        return [
            Message.subscriber_id == self.subscriber_id,
            Message.channel == IN_APP,
            Message.environment_id == self.environment_id,
        ]

    def _conditions(self, filters: InboxFilter, now: datetime) -> list[ColumnElement[bool]]:
        conditions = self._scope()
        if filters.read is not None:
            conditions.append(Message.read.is_(filters.read))
        if filters.seen is not None:
            conditions.append(Message.seen.is_(filters.seen))
        if filters.archived is not None:
            conditions.append(Message.archived.is_(filters.archived))
        if filters.snoozed is True:
            conditions.append(and_(Message.snoozed_until.is_not(None), Message.snoozed_until > now))
        elif filters.snoozed is False:
            conditions.append(or_(Message.snoozed_until.is_(None), Message.snoozed_until <= now))
        if filters.workflow_ids is not None:
            conditions.append(Message.workflow_id.in_(sorted(filters.workflow_ids)))
        if filters.created_gte is not None:
            conditions.append(Message.created_at >= filters.created_gte)
        if filters.created_lte is not None:
            conditions.append(Message.created_at <= filters.created_lte)
        if filters.ids is not None:
            conditions.append(Message.id.in_(list(filters.ids)))
        return conditions

    async def subscriber(self) -> Subscriber | None:
        result = await self.session.execute(
            select(Subscriber).where(
                Subscriber.id == self.subscriber_id,
                Subscriber.environment_id == self.environment_id,
                Subscriber.deleted.is_(False),
            )
        )
        return result.scalar_one_or_none()

    async def workflows(self, ids: Sequence[str] | None = None) -> list[Workflow]:
        """The environment's workflows (deleted ones too: their messages stay), or those among ``ids``."""
        query = select(Workflow).where(Workflow.environment_id == self.environment_id)
        if ids is not None:
            if not ids:
                return []
            query = query.where(Workflow.id.in_(sorted(set(ids))))
        return list((await self.session.execute(query)).scalars())

    async def get(self, message_id: str) -> Message | None:
        result = await self.session.execute(
            select(Message).where(Message.id == message_id, *self._scope()).execution_options(populate_existing=True)
        )
        return result.scalar_one_or_none()

    async def _matching_ids(self, query: Select[Any], data: dict[str, Any]) -> list[str]:
        # The data filter (any, or, and, nested) runs here, over the ids and data the other filters leave.
        rows = await self.session.execute(query.with_only_columns(Message.id, Message.data))
        return [message_id for message_id, value in rows if data_matches(value, data)]

    async def page(
        self, filters: InboxFilter, now: datetime, *, after: Message | None, offset: int, limit: int
    ) -> tuple[list[Message], bool]:
        """Up to ``limit`` notifications, newest first, after the cursor and ``offset``; and whether more follow."""
        conditions = self._conditions(filters, now)
        if after is not None:
            conditions.append(
                or_(
                    Message.created_at < after.created_at,
                    and_(Message.created_at == after.created_at, Message.id < after.id),
                )
            )
        query = select(Message).where(*conditions).order_by(*NEWEST_FIRST)
        if filters.data:
            ids = (await self._matching_ids(query, filters.data))[offset : offset + limit + 1]
            if not ids:
                return [], False
            rows = await self.session.execute(select(Message).where(Message.id.in_(ids), *self._scope()))
            by_id = {row.id: row for row in rows.scalars()}
            found = [by_id[message_id] for message_id in ids if message_id in by_id]
        else:
            found = list((await self.session.execute(query.offset(offset).limit(limit + 1))).scalars())
        return found[:limit], len(found) > limit

    async def count(self, filters: InboxFilter, now: datetime) -> int:
        query = select(Message.id).where(*self._conditions(filters, now))
        if filters.data:
            return len(await self._matching_ids(query, filters.data))
        return int((await self.session.execute(select(func.count()).select_from(query.subquery()))).scalar_one())

    async def count_by_workflow(self, filters: InboxFilter, now: datetime) -> dict[str | None, int]:
        result = await self.session.execute(
            select(Message.workflow_id, func.count()).where(*self._conditions(filters, now)).group_by(Message.workflow_id)
        )
        return {workflow_id: int(count) for workflow_id, count in result.all()}

    async def ids_matching(self, filters: InboxFilter, now: datetime) -> list[str]:
        query = select(Message.id).where(*self._conditions(filters, now))
        if filters.data:
            return await self._matching_ids(query, filters.data)
        return list((await self.session.execute(query)).scalars())

    async def update(self, message_ids: Sequence[str], values: dict[str, Any]) -> int:
        """One UPDATE of the subscriber's notifications among ``message_ids``; how many."""
        if not message_ids:
            return 0
        result = await self.session.execute(
            update(Message)
            .where(Message.id.in_(list(message_ids)), *self._scope())
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def delete(self, message_ids: Sequence[str]) -> int:
        if not message_ids:
            return 0
        result = await self.session.execute(
            delete(Message).where(Message.id.in_(list(message_ids)), *self._scope()).execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def save(self, message: Message) -> Message:
        await self.session.flush()
        return message

    # -- the snooze's return (herald.inbox.snooze) ------------------------------------------------

    def add_return_job(self, message: Message, until: datetime, data: dict[str, Any]) -> Job:
        """A job due at ``until`` that brings ``message`` back; written with the snooze, in its transaction.

        ``event_id`` holds the message's id (no event has it) and the job stays "queued" (a trigger's
        cancel touches delayed and merged jobs only), with no notification: no chain or feed reads it.
        """
        job = Job(
            kind=UNSNOOZE_JOB,
            status="queued",
            environment_id=self.environment_id,
            organization_id=message.organization_id,
            event_id=message.id,
            transaction_id=message.transaction_id,
            subscriber_id=self.subscriber_id,
            run_at=until,
            data=data,
        )
        self.session.add(job)
        return job

    async def drop_return_jobs(self, message: Message) -> int:
        """Delete the message's return jobs still waiting (one running re-checks the message and does nothing)."""
        result = await self.session.execute(
            delete(Job)
            .where(
                Job.environment_id == self.environment_id,
                Job.transaction_id == message.transaction_id,
                Job.kind == UNSNOOZE_JOB,
                Job.event_id == message.id,
                Job.status == "queued",
            )
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def update_if_snoozed_until(self, message_id: str, snoozed_until: datetime, values: dict[str, Any]) -> int:
        """Change the message only while it is still snoozed until exactly ``snoozed_until`` (as read)."""
        result = await self.session.execute(
            update(Message)
            .where(Message.id == message_id, *self._scope(), Message.snoozed_until == snoozed_until)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

