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
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Text,
    and_,
    bindparam,
    case,
    delete,
    exists,
    false,
    func,
    literal,
    or_,
    select,
    true,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from herald.kit.db import dialect_of
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


def data_condition(dialect: str, expected: dict[str, Any]) -> ColumnElement[bool]:
    """The ``data`` filter as a condition the store evaluates on each message's data.

    Every key of the filter is in the data and its clause holds there: a
    scalar when the value is equal to it as JSON (``true`` is not ``1``, ``1``
    is ``1.0``, an array or object equals no scalar); a list, or ``{"or":
    [...]}``, when one of its clauses holds; ``{"and": [...]}`` when each
    does; any other object when the value is an object whose keys hold in
    turn. Within the bounds the service checks (herald.inbox.service), so the
    condition's size is bounded too.

    The messages are those of one subscriber, found by their index; this is
    the test each one is put to (it ran in Python over every message of the
    subscriber, on the event loop: three clients sending 20 filters a request
    stalled every other request for seconds).
    """
    if dialect == "postgresql":
        return _jsonb_object(type_coerce(Message.data, JSONB), expected)
    return _sqlite_object(_Place(Message.data), expected)


def _alternatives(clause: Any) -> tuple[str, list[Any]] | None:
    """("any", items) for a list or {"or": [...]}, ("all", items) for {"and": [...]}; None for another clause."""
    if isinstance(clause, list):
        return "any", clause
    if isinstance(clause, dict) and len(clause) == 1:
        [(operator, items)] = clause.items()
        if operator in ("or", "and") and isinstance(items, list):
            return ("any" if operator == "or" else "all"), items
    return None


def _combined(kind: str, conditions: list[ColumnElement[bool]]) -> ColumnElement[bool]:
    # An empty list holds for no value, an empty {"and": []} for any (the key still must be there).
    return or_(false(), *conditions) if kind == "any" else and_(true(), *conditions)


def _needs_the_value(clause: Any) -> bool:
    """Whether ``clause`` can hold only where there is a value to test.

    Then its test says the key is there (and that what holds it is an object:
    a key is looked up in objects only), and no test of its own is written
    for that. Only ``{"and": []}`` (alone or among alternatives) holds for
    any value, so it needs one.
    """
    alternatives = _alternatives(clause)
    if alternatives is None:
        return True
    kind, items = alternatives
    return all(map(_needs_the_value, items)) if kind == "any" else any(map(_needs_the_value, items))


# -- PostgreSQL: jsonb's -> (NULL for a key that is not there, or under a value that is no object).


def _jsonb_object(value: Any, expected: dict[str, Any]) -> ColumnElement[bool]:
    # {} asks for an object, any; keys are found in objects only.
    conditions: list[ColumnElement[bool]] = [] if expected else [func.jsonb_typeof(value) == "object"]
    for key, clause in expected.items():
        # Written out: SQLAlchemy's value[key] is jsonb subscripting on PostgreSQL 14+, which takes '0' for an index.
        member = value.op("->", return_type=JSONB)(bindparam(None, key, type_=Text))
        if not _needs_the_value(clause):
            conditions.append(member.is_not(None))
        conditions.append(_jsonb_clause(member, clause))
    return and_(*conditions)


def _jsonb_clause(value: Any, clause: Any) -> ColumnElement[bool]:
    alternatives = _alternatives(clause)
    if alternatives is not None:
        kind, items = alternatives
        return _combined(kind, [_jsonb_clause(value, item) for item in items])
    if isinstance(clause, dict):
        return _jsonb_object(value, clause)
    # jsonb equality is JSON's: numbers by value, booleans apart from numbers, strings by their characters.
    return value == bindparam(None, clause, type_=JSONB)


# -- SQLite: json_extract and json_type at a path; json_each where a key cannot be written in one.


@dataclass(frozen=True)
class _Place:
    """A value within a message's data on SQLite: ``path`` into the JSON text ``document``, or, with ``row``
    set and no path, the value of a ``json_each`` row (whose scalars are SQL values, not JSON texts)."""

    document: Any
    path: tuple[str, ...] = ()
    row: Any = None

    @property
    def json_path(self) -> str:
        return "$" + "".join(f'."{key}"' for key in self.path)

    def type(self) -> Any:
        return self.row.c.type if self.row is not None and not self.path else func.json_type(self.document, self.json_path)

    def atom(self) -> Any:
        return self.row.c.atom if self.row is not None and not self.path else func.json_extract(self.document, self.json_path)


def _plain_key(key: str) -> bool:
    """Whether ``key`` can be written in a JSON path as ``."key"`` and found there by any SQLite since 3.38.

    Printable ASCII other than the double quote and the backslash: a key SQLite compares as it is
    stored (before 3.45 it compares the stored text with its escapes, and a
    row written by json.dumps, for integers past 64 bits, escapes every
    character past ASCII). Others are found by json_each, which decodes them.
    """
    return bool(key) and all(" " <= character <= "~" and character not in '"\\' for character in key)


def _sqlite_member(place: _Place, key: str, clause: Any) -> ColumnElement[bool]:
    if _plain_key(key):
        member = replace(place, path=(*place.path, key))
        if _needs_the_value(clause):
            return _sqlite_clause(member, clause)
        return and_(member.type().is_not(None), _sqlite_clause(member, clause))
    # The members of the object at this place (none for anything else; an array's keys are numbers).
    members = func.json_each(place.document, place.json_path).table_valued("key", "value", "type", "atom").alias()
    row = _Place(case((members.c.type.in_(("object", "array")), members.c.value)), row=members)
    return exists(select(literal(1)).select_from(members).where(members.c.key == key, _sqlite_clause(row, clause)))


def _sqlite_object(place: _Place, expected: dict[str, Any]) -> ColumnElement[bool]:
    # {} asks for an object, any; keys are found in objects only.
    conditions = [] if expected else [place.type() == "object"]
    conditions += [_sqlite_member(place, key, clause) for key, clause in expected.items()]
    return and_(*conditions)


def _sqlite_clause(place: _Place, clause: Any) -> ColumnElement[bool]:
    alternatives = _alternatives(clause)
    if alternatives is not None:
        kind, items = alternatives
        return _combined(kind, [_sqlite_clause(place, item) for item in items])
    if isinstance(clause, dict):
        return _sqlite_object(place, clause)
    kind = place.type()
    if clause is None:
        return kind == "null"
    if isinstance(clause, bool):
        return kind == ("true" if clause else "false")
    # The value first: most messages differ there, and the type is then not looked up (SQLite stops at the
    # first false term). json_extract answers true as 1 and an object as its text: the type tells them apart.
    if isinstance(clause, str):
        return and_(place.atom() == clause, kind == "text")
    return and_(place.atom() == clause, kind.in_(("integer", "real")))


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
        if filters.data:
            conditions.append(data_condition(dialect_of(self.session), filters.data))
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
        query = select(Message).where(*conditions).order_by(*NEWEST_FIRST).offset(offset).limit(limit + 1)
        found = list((await self.session.execute(query)).scalars())
        return found[:limit], len(found) > limit

    async def counts(self, filters: Sequence[InboxFilter], now: datetime) -> list[int]:
        """How many notifications each filter keeps: one pass over the subscriber's notifications for them all."""
        scope = self._scope()
        columns = []
        for item in filters:
            narrowing = self._conditions(item, now)[len(scope) :]
            columns.append(func.count().filter(and_(*narrowing)) if narrowing else func.count())
        row = (await self.session.execute(select(*columns).where(*scope))).one()
        return [int(count) for count in row]

    async def count_by_workflow(self, filters: InboxFilter, now: datetime) -> dict[str | None, int]:
        result = await self.session.execute(
            select(Message.workflow_id, func.count()).where(*self._conditions(filters, now)).group_by(Message.workflow_id)
        )
        return {workflow_id: int(count) for workflow_id, count in result.all()}

    async def ids_matching(self, filters: InboxFilter, now: datetime) -> list[str]:
        query = select(Message.id).where(*self._conditions(filters, now))
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

