"""Message queries.

The inbox queries (feed, unseen count, mark-all) filter on
``(subscriber_id, channel)`` and order by ``created_at``, so they are served by
the index ``ix_messages_subscriber_channel_created``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, bindparam, delete, func, or_, select, type_coerce, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from herald.kit.pagination import count_bound
from herald.models import Message

IN_APP = "in_app"

# Newest first; the id breaks ties between messages made in the same instant.
NEWEST_FIRST = (Message.created_at.desc(), Message.id.desc())


@dataclass(frozen=True)
class FeedFilter:
    """What narrows a subscriber's in-app feed."""

    read: bool | None = None
    seen: bool | None = None
    feed_ids: Sequence[str] | None = None
    # A partial payload: every leaf must equal the message payload's value at the same path.
    payload: dict[str, Any] | None = None


def payload_leaves(partial: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """``{"a": {"b": 1}, "c": [2]}`` -> ``[(("a", "b"), 1), (("c",), [2])]``.

    Objects are matched key by key; arrays and scalars are compared whole.
    An empty object at some path asks for an object there.
    """
    leaves: list[tuple[tuple[str, ...], Any]] = []
    for key, value in partial.items():
        path = (*prefix, str(key))
        if isinstance(value, dict) and value:
            leaves.extend(payload_leaves(value, path))
        else:
            leaves.append((path, value))
    return leaves


def _json_equal(actual: Any, expected: Any) -> bool:
    """JSON equality: booleans are not numbers, objects compare by keys, arrays by order."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and actual is expected
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return actual == expected
    if isinstance(expected, dict):
        if not expected:
            return isinstance(actual, dict)
        return isinstance(actual, dict) and actual.keys() == expected.keys() and all(
            _json_equal(actual[key], value) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(_json_equal(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return type(actual) is type(expected) and actual == expected


_MISSING = object()


def payload_matches(payload: Any, leaves: list[tuple[tuple[str, ...], Any]]) -> bool:
    for path, expected in leaves:
        actual: Any = payload
        for key in path:
            actual = actual.get(key, _MISSING) if isinstance(actual, dict) else _MISSING
            if actual is _MISSING:
                return False
        if isinstance(expected, dict) and not expected:
            if not isinstance(actual, dict):
                return False
        elif not _json_equal(actual, expected):
            return False
    return True


def _count(query: Select[Any], bound: int | None = None) -> Select[tuple[int]]:
    """How many rows ``query`` matches, counting no further than ``bound`` when given."""
    ids = query.order_by(None).with_only_columns(Message.id)
    if bound is not None:
        ids = ids.limit(bound)
    return select(func.count()).select_from(ids.subquery())


class MessageRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    @property
    def _dialect(self) -> str:
        return self.session.get_bind().dialect.name

    # -- single messages ------------------------------------------------------

    async def get(self, environment_id: str, message_id: str) -> Message | None:
        result = await self.session.execute(
            select(Message).where(Message.id == message_id, Message.environment_id == environment_id)
        )
        return result.scalar_one_or_none()

    async def of_notification(self, environment_id: str, transaction_id: str, notification_id: str, *, limit: int) -> list[Message]:
        """The messages one run made, oldest first (found through its transaction's index, then narrowed to the run)."""
        result = await self.session.execute(
            select(Message)
            .where(
                Message.environment_id == environment_id,
                Message.transaction_id == transaction_id,
                Message.notification_id == notification_id,
            )
            .order_by(Message.created_at, Message.id)
            .limit(limit)
        )
        return list(result.scalars())

    async def get_for_subscriber(
        self, environment_id: str, subscriber_id: str, message_id: str, *, for_update: bool = False
    ) -> Message | None:
        query = select(Message).where(
            Message.id == message_id,
            Message.environment_id == environment_id,
            Message.subscriber_id == subscriber_id,
        )
        if for_update:
            query = query.with_for_update()
        return (await self.session.execute(query)).scalar_one_or_none()

    async def delete(self, message: Message) -> None:
        await self.session.delete(message)
        await self.session.flush()

    # -- state changes ------------------------------------------------------------

    async def set_state(
        self,
        environment_id: str,
        subscriber_id: str,
        message_ids: Sequence[str],
        values: dict[str, Any],
    ) -> list[Message]:
        """One UPDATE of the subscriber's in-app messages among ``message_ids``; the updated rows, in the order given.

        Read and seen are inbox states (spec §4.3 names in-app messages): an
        email's or sms's id is ignored like an unknown one.
        """
        if not message_ids:
            return []
        scope = (
            Message.id.in_(message_ids),
            Message.subscriber_id == subscriber_id,
            Message.environment_id == environment_id,
            Message.channel == IN_APP,
        )
        await self.session.execute(
            update(Message).where(*scope).values(**values).execution_options(synchronize_session=False)
        )
        result = await self.session.execute(
            select(Message).where(*scope).execution_options(populate_existing=True)
        )
        by_id = {message.id: message for message in result.scalars()}
        return [by_id[message_id] for message_id in message_ids if message_id in by_id]

    async def set_flags_of_all(
        self,
        environment_id: str,
        subscriber_id: str,
        flags: dict[str, bool],
        stamps: dict[str, Any],
        *,
        feed_ids: Sequence[str] | None = None,
    ) -> int:
        """Set ``flags`` (and ``stamps``) on the subscriber's in-app messages; the number changed.

        Messages whose flags already hold these values are left alone and not counted.
        """
        differs = [getattr(Message, name) != value for name, value in flags.items()]
        query = update(Message).where(
            Message.subscriber_id == subscriber_id,
            Message.channel == IN_APP,
            Message.environment_id == environment_id,
            or_(*differs),
        )
        if feed_ids is not None:
            query = query.where(Message.feed_id.in_(feed_ids))
        result = await self.session.execute(
            query.values(**flags, **stamps).execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def update_cta(self, message: Message, cta: dict[str, Any], now: datetime) -> Message:
        message.cta = cta
        message.updated_at = now
        await self.session.flush()
        return message

    # -- lists --------------------------------------------------------------

    def _feed_conditions(self, environment_id: str, subscriber_id: str, filters: FeedFilter) -> list[ColumnElement[bool]]:
        conditions: list[ColumnElement[bool]] = [
            Message.subscriber_id == subscriber_id,
            Message.channel == IN_APP,
            Message.environment_id == environment_id,
        ]
        if filters.read is not None:
            conditions.append(Message.read == filters.read)
        if filters.seen is not None:
            conditions.append(Message.seen == filters.seen)
        if filters.feed_ids is not None:
            conditions.append(Message.feed_id.in_(filters.feed_ids))
        return conditions

    def _payload_conditions_postgres(self, partial: dict[str, Any]) -> list[ColumnElement[bool]]:
        """JSONB equality of each leaf: ``payload #> '{a,b}' = '1'::jsonb``."""
        document = type_coerce(Message.payload, JSONB)
        conditions: list[ColumnElement[bool]] = []
        for path, expected in payload_leaves(partial):
            actual = document[path]
            if isinstance(expected, dict):  # an empty object: any object there
                conditions.append(func.jsonb_typeof(actual) == "object")
            else:
                conditions.append(actual == bindparam(None, expected, type_=JSONB))
        return conditions

    def feed_query(self, environment_id: str, subscriber_id: str, filters: FeedFilter) -> Select[tuple[Message]]:
        """The feed's rows, newest first.

        On PostgreSQL the payload match is part of the query; elsewhere
        :meth:`feed` applies it to the rows this query returns.
        """
        conditions = self._feed_conditions(environment_id, subscriber_id, filters)
        if filters.payload and self._dialect == "postgresql":
            conditions.extend(self._payload_conditions_postgres(filters.payload))
        return select(Message).where(*conditions).order_by(*NEWEST_FIRST)

    async def feed(
        self, environment_id: str, subscriber_id: str, filters: FeedFilter, *, offset: int, limit: int
    ) -> tuple[list[Message], int]:
        """A page of the subscriber's in-app messages, newest first, and the total that match."""
        query = self.feed_query(environment_id, subscriber_id, filters)
        if filters.payload and self._dialect != "postgresql":
            return await self._feed_filtered_in_python(query, filters.payload, offset=offset, limit=limit)
        total = int((await self.session.execute(_count(query, count_bound(offset, limit)))).scalar_one())
        if offset >= total:
            return [], total
        rows = await self.session.execute(query.offset(offset).limit(limit))
        return list(rows.scalars()), total

    async def _feed_filtered_in_python(
        self, query: Select[tuple[Message]], partial: dict[str, Any], *, offset: int, limit: int
    ) -> tuple[list[Message], int]:
        # SQLite's JSON functions cannot compare nested values exactly as
        # JSON (true vs 1, arrays of objects), so the payload match runs here,
        # over the ids and payloads of the rows the other filters leave.
        leaves = payload_leaves(partial)
        candidates = await self.session.execute(query.with_only_columns(Message.id, Message.payload))
        matched = [message_id for message_id, payload in candidates if payload_matches(payload, leaves)]
        page_ids = matched[offset : offset + limit]
        if not page_ids:
            return [], len(matched)
        rows = await self.session.execute(select(Message).where(Message.id.in_(page_ids)))
        by_id = {message.id: message for message in rows.scalars()}
        return [by_id[message_id] for message_id in page_ids if message_id in by_id], len(matched)

    def count_query(
        self, environment_id: str, subscriber_id: str, *, seen: bool, limit: int, feed_ids: Sequence[str] | None = None
    ) -> Select[tuple[int]]:
        capped = (
            select(Message.id)
            .where(*self._feed_conditions(environment_id, subscriber_id, FeedFilter(seen=seen, feed_ids=feed_ids)))
            .limit(limit)
            .subquery()
        )
        return select(func.count()).select_from(capped)

    async def count_by_seen(
        self, environment_id: str, subscriber_id: str, *, seen: bool, limit: int, feed_ids: Sequence[str] | None = None
    ) -> int:
        """How many in-app messages of the subscriber have ``seen == seen``, counting no further than ``limit``."""
        query = self.count_query(environment_id, subscriber_id, seen=seen, limit=limit, feed_ids=feed_ids)
        return int((await self.session.execute(query)).scalar_one())

    def list_query(
        self,
        environment_id: str,
        *,
        subscriber_id: str | None,
        channel: str | None,
        transaction_ids: Sequence[str] | None,
    ) -> Select[tuple[Message]]:
        """GET /v1/messages: the environment's messages, newest first (ix_messages_environment_created)."""
        conditions: list[ColumnElement[bool]] = [Message.environment_id == environment_id]
        if subscriber_id is not None:
            conditions.append(Message.subscriber_id == subscriber_id)
        if channel is not None:
            conditions.append(Message.channel == channel)
        query = select(Message)
        if transaction_ids:
            conditions.append(Message.transaction_id.in_(transaction_ids))
            # A few transactions' messages, found by their index and sorted. SQLite,
            # with no statistics to tell how few, preferred the index that gives the
            # order and scanned the whole environment for them (a client polling for
            # its transactions held the event loop, and the worker with it).
            query = query.with_hint(Message, "INDEXED BY ix_messages_environment_transaction", "sqlite")
        return query.where(*conditions).order_by(*NEWEST_FIRST)

    async def list_messages(
        self,
        environment_id: str,
        *,
        subscriber_id: str | None,
        channel: str | None,
        transaction_ids: Sequence[str] | None,
        offset: int,
        limit: int,
    ) -> tuple[list[Message], int]:
        query = self.list_query(environment_id, subscriber_id=subscriber_id, channel=channel, transaction_ids=transaction_ids)
        # A subscriber's or a few transactions' messages are counted whole, through their own index: a
        # client following a broadcast by its transactionId reads its progress there. The others count
        # no further than count_bound past the page.
        narrowed = subscriber_id is not None or bool(transaction_ids)
        bound = None if narrowed else count_bound(offset, limit)
        total = int((await self.session.execute(_count(query, bound))).scalar_one())
        if offset >= total:
            return [], total
        rows = await self.session.execute(query.offset(offset).limit(limit))
        return list(rows.scalars()), total

    async def delete_by_transaction(self, environment_id: str, transaction_id: str, channel: str | None) -> int:
        query = delete(Message).where(
            Message.environment_id == environment_id, Message.transaction_id == transaction_id
        )
        if channel is not None:
            query = query.where(Message.channel == channel)
        result = await self.session.execute(query.execution_options(synchronize_session=False))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
