from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, delete, func, literal_column, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from herald.kit.bulk import insert_rows
from herald.kit.db import each_of
from herald.kit.time import utcnow
from herald.models import Integration, Message, Subscriber, SubscriberImport, SubscriberPreference, TopicSubscriber

# Each column of the subscribers table with the attribute that maps it.
_COLUMNS = tuple((prop.key, prop.columns[0].name) for prop in Subscriber.__mapper__.column_attrs)

# Bound parameters per IN (...) list: far below SQLite's and asyncpg's limits.
LOOKUP_CHUNK = 1000

# Every route about one subscriber reads it first (the inbox, mark-as, preferences,
# the subscriber's own routes): built once, as building it per call cost more
# CPU than running it (kit.db.any_of_parameter).
_BY_SUBSCRIBER_ID = select(Subscriber).where(
    Subscriber.environment_id == bindparam("environment_id"), Subscriber.subscriber_id == bindparam("subscriber_id")
)


# The columns a CSV import sets (herald.subscribers.imports), and what an upsert's update does with them.
UPSERTED_COLUMNS = ("email", "first_name", "last_name", "phone", "locale", "avatar", "data")
_UPSERT_UPDATES = {
    **{column: f'COALESCE(excluded."{column}", subscribers."{column}")' for column in UPSERTED_COLUMNS},
    "version": "subscribers.version + 1",
    "updated_at": "excluded.updated_at",
}

# Past this many matches a search's totalCount stops counting (totalCountCapped), as Novu's does.
SEARCH_COUNT_CAP = 50_000


@dataclass(frozen=True)
class SubscriberSearch:
    """What narrows a search: each field given must be contained in the subscriber's (case-insensitive)."""

    email: str | None = None
    phone: str | None = None
    subscriber_id: str | None = None
    # Contained in "firstName lastName".
    name: str | None = None


def _contains(column: Any, text: str, *, at_start: bool = False) -> ColumnElement[bool]:
    """``column`` contains ``text`` (starts with it, when ``at_start``), in any case."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return func.lower(column).like(f"{'' if at_start else '%'}{escaped}%", escape="\\")


class SubscriberRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        # Integrations found by this repository (one request's): a bulk upsert
        # of 500 subscribers naming one provider asks the store once, not 500 times.
        self._integrations: dict[tuple[str, str, str | None], Integration | None] = {}

    async def get_by_subscriber_id(self, environment_id: str, subscriber_id: str) -> Subscriber | None:
        """The subscriber the caller names by its own identifier (not Herald's ``_id``)."""
        result = await self.session.execute(_BY_SUBSCRIBER_ID, {"environment_id": environment_id, "subscriber_id": subscriber_id})
        return result.scalar_one_or_none()

    async def find_by_subscriber_ids(self, environment_id: str, subscriber_ids: Sequence[str]) -> list[Subscriber]:
        """The environment's subscribers among ``subscriber_ids`` (callers' identifiers), in no order."""
        found: list[Subscriber] = []
        unique_ids = list(dict.fromkeys(subscriber_ids))
        for start in range(0, len(unique_ids), LOOKUP_CHUNK):
            chunk = unique_ids[start : start + LOOKUP_CHUNK]
            # One index probe per id (kit.db.each_of): with IN and statistics
            # older than the environment's growth, PostgreSQL read the whole
            # environment for every batch (POST /v1/subscribers/bulk creating
            # 100,000 subscribers: 2,022 a second).
            query = select(Subscriber).where(Subscriber.environment_id == environment_id)
            result = await self.session.execute(each_of(self.session, query, Subscriber.subscriber_id, chunk))
            found.extend(result.scalars())
        return found

    async def get_by_ids(self, environment_id: str, ids: Sequence[str]) -> list[Subscriber]:
        """The environment's subscribers with these internal ids (as ``iter_member_ids`` yields), ordered by id."""
        found: list[Subscriber] = []
        unique_ids = list(dict.fromkeys(ids))
        for start in range(0, len(unique_ids), LOOKUP_CHUNK):
            result = await self.session.execute(
                select(Subscriber).where(
                    Subscriber.environment_id == environment_id,
                    Subscriber.id.in_(unique_ids[start : start + LOOKUP_CHUNK]),
                )
            )
            found.extend(result.scalars())
        return sorted(found, key=lambda subscriber: subscriber.id)

    async def insert_new(self, subscribers: Sequence[Subscriber]) -> set[str]:
        """Insert new subscribers in one statement; returns the subscriberIds inserted.

        A subscriberId taken meanwhile (by a concurrent create) is skipped by
        the unique index and missing from the answer; the caller updates that
        subscriber instead. The objects stay out of the session: a create is
        one INSERT, with no savepoint around it and no flush of the unit of
        work (an ORM insert in a savepoint cost three round trips and most of
        a create's CPU).
        """
        rows = [{column: getattr(subscriber, attribute) for attribute, column in _COLUMNS} for subscriber in subscribers]
        written = await insert_rows(
            self.session,
            Subscriber.__table__,
            rows,
            skip_conflicts_on=("environment_id", "subscriber_id"),
            returning=("subscriber_id",),
        )
        return {subscriber_id for (subscriber_id,) in written}

    async def existing_subscriber_ids(self, environment_id: str, subscriber_ids: Sequence[str]) -> set[str]:
        """Which of ``subscriber_ids`` (callers' identifiers) the environment has."""
        found: set[str] = set()
        unique_ids = list(dict.fromkeys(subscriber_ids))
        for start in range(0, len(unique_ids), LOOKUP_CHUNK):
            query = select(Subscriber.subscriber_id).where(Subscriber.environment_id == environment_id)
            chunk = unique_ids[start : start + LOOKUP_CHUNK]
            result = await self.session.execute(each_of(self.session, query, Subscriber.subscriber_id, chunk))
            found.update(result.scalars())
        return found

    async def upsert_attributes(self, environment_id: str, organization_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Create or update subscribers by subscriberId, many rows a statement (INSERT ... ON CONFLICT DO UPDATE).

        Each row holds ``subscriber_id`` and some columns of
        :data:`UPSERTED_COLUMNS`; a column left out (or None) keeps the stored
        value. An update bumps ``version`` and ``updated_at``. Every
        subscriberId appears once.
        """
        now = utcnow()
        values = [
            {
                "environment_id": environment_id,
                "organization_id": organization_id,
                "created_at": now,
                "updated_at": now,
                # Left out rather than None: SQL NULL (not JSON's null), which COALESCE passes over.
                **{column: value for column, value in row.items() if value is not None},
            }
            for row in rows
        ]
        await insert_rows(
            self.session,
            Subscriber.__table__,
            values,
            skip_conflicts_on=("environment_id", "subscriber_id"),
            update_on_conflict=_UPSERT_UPDATES,
        )

    async def list_page(self, environment_id: str, *, offset: int, limit: int) -> Sequence[Subscriber]:
        """Oldest first: pages stay put while new subscribers are added at the end."""
        result = await self.session.execute(
            select(Subscriber)
            .where(Subscriber.environment_id == environment_id)
            .order_by(Subscriber.created_at, Subscriber.id)
            .offset(offset)
            .limit(limit)
        )
        return result.scalars().all()

    async def count(self, environment_id: str) -> int:
        result = await self.session.execute(
            select(func.count()).select_from(Subscriber).where(Subscriber.environment_id == environment_id)
        )
        return int(result.scalar_one())

    def _search_conditions(self, environment_id: str, search: SubscriberSearch) -> list[ColumnElement[bool]]:
        conditions: list[ColumnElement[bool]] = [Subscriber.environment_id == environment_id, Subscriber.deleted.is_(False)]
        if search.email:
            conditions.append(_contains(Subscriber.email, search.email))
        if search.phone:
            conditions.append(_contains(Subscriber.phone, search.phone))
        if search.subscriber_id:
            conditions.append(_contains(Subscriber.subscriber_id, search.subscriber_id))
        if search.name:
            # Written with constants, not parameters: PostgreSQL uses an expression index only for its own
            # text (migration 0031 indexes each of these lowered).
            empty, space = literal_column("''"), literal_column("' '")
            full_name = func.coalesce(Subscriber.first_name, empty).op("||")(space).op("||")(func.coalesce(Subscriber.last_name, empty))
            conditions.append(_contains(full_name, search.name))
        return conditions

    async def search_sort_value(self, environment_id: str, subscriber_id: str, column: Any) -> tuple[bool, Any]:
        """Whether the subscriber with Herald's id ``subscriber_id`` is in the environment, and its value of ``column``."""
        result = await self.session.execute(
            select(column).where(Subscriber.environment_id == environment_id, Subscriber.id == subscriber_id)
        )
        row = result.first()
        return (row is not None, row[0] if row is not None else None)

    async def search_page(
        self,
        environment_id: str,
        search: SubscriberSearch,
        *,
        column: Any,
        ascending: bool,
        cursor: tuple[Any, str] | None,
        inclusive: bool,
        limit: int,
    ) -> list[Subscriber]:
        """Up to ``limit`` subscribers in (column, id) order, ascending or not, from the cursor on (keyset)."""
        conditions = self._search_conditions(environment_id, search)
        if cursor is not None:
            value, cursor_id = cursor
            id_after = Subscriber.id >= cursor_id if inclusive else Subscriber.id > cursor_id
            id_before = Subscriber.id <= cursor_id if inclusive else Subscriber.id < cursor_id
            if column is Subscriber.id:
                conditions.append(id_after if ascending else id_before)
            elif ascending:
                conditions.append(or_(column > value, and_(column == value, id_after)))
            else:
                conditions.append(or_(column < value, and_(column == value, id_before)))
        order = (column, Subscriber.id) if ascending else (column.desc(), Subscriber.id.desc())
        if column is Subscriber.id:
            order = order[:1]
        result = await self.session.execute(select(Subscriber).where(*conditions).order_by(*order).limit(limit))
        return list(result.scalars())

    async def search_count(self, environment_id: str, search: SubscriberSearch) -> tuple[int, bool]:
        """How many match, up to SEARCH_COUNT_CAP; and whether there are more than that."""
        capped = (
            select(Subscriber.id).where(*self._search_conditions(environment_id, search)).limit(SEARCH_COUNT_CAP + 1)
        ).subquery()
        total = int((await self.session.execute(select(func.count()).select_from(capped))).scalar_one())
        return min(total, SEARCH_COUNT_CAP), total > SEARCH_COUNT_CAP

    async def find_page(self, environment_id: str, text: str | None, *, before_id: str | None, limit: int) -> list[Subscriber]:
        """Newest first, up to ``limit``, older than the subscriber ``before_id`` (keyset on ``_id``).

        ``text`` narrows to the subscribers whose subscriberId, email, phone,
        first name, last name or "first last" starts with it (any case).
        """
        conditions = [Subscriber.environment_id == environment_id, Subscriber.deleted.is_(False)]
        if text:
            # Written with constants, not parameters: PostgreSQL uses an expression index only for its own
            # text (migration 0031 indexes each of these lowered).
            empty, space = literal_column("''"), literal_column("' '")
            full_name = func.coalesce(Subscriber.first_name, empty).op("||")(space).op("||")(func.coalesce(Subscriber.last_name, empty))
            # "first last" starting with the text covers the first name starting with it.
            columns = (Subscriber.subscriber_id, Subscriber.email, Subscriber.phone, Subscriber.last_name, full_name)
            conditions.append(or_(*(_contains(column, text, at_start=True) for column in columns)))
        if before_id:
            conditions.append(Subscriber.id < before_id)
        result = await self.session.execute(select(Subscriber).where(*conditions).order_by(Subscriber.id.desc()).limit(limit))
        return list(result.scalars())

    async def topic_keys_of(self, environment_id: str, subscriber: Subscriber) -> list[str]:
        result = await self.session.execute(
            select(TopicSubscriber.topic_key)
            .where(TopicSubscriber.environment_id == environment_id, TopicSubscriber.subscriber_id == subscriber.id)
            .distinct()
            .order_by(TopicSubscriber.topic_key)
        )
        return list(result.scalars())

    async def delete_with_memberships_and_messages(self, subscriber: Subscriber) -> None:
        """Remove the subscriber, its topic memberships, its messages and its preferences (in the caller's transaction)."""
        await self.session.execute(
            delete(TopicSubscriber).where(
                TopicSubscriber.environment_id == subscriber.environment_id,
                TopicSubscriber.subscriber_id == subscriber.id,
            )
        )
        await self.session.execute(
            delete(Message).where(
                Message.environment_id == subscriber.environment_id, Message.subscriber_id == subscriber.id
            )
        )
        await self.session.execute(
            delete(SubscriberPreference).where(
                SubscriberPreference.environment_id == subscriber.environment_id,
                SubscriberPreference.subscriber_id == subscriber.id,
            )
        )
        await self.session.delete(subscriber)
        await self.session.flush()

    async def find_active_integration(
        self, environment_id: str, provider_id: str, identifier: str | None = None
    ) -> Integration | None:
        """The environment's newest active integration of a provider (and identifier, when given)."""
        key = (environment_id, provider_id, identifier)
        if key not in self._integrations:
            self._integrations[key] = await self._newest_active_integration(environment_id, provider_id, identifier)
        return self._integrations[key]

    async def _newest_active_integration(self, environment_id: str, provider_id: str, identifier: str | None) -> Integration | None:
        query = select(Integration).where(
            Integration.environment_id == environment_id,
            Integration.provider_id == provider_id,
            Integration.active.is_(True),
            Integration.deleted.is_(False),
        )
        if identifier is not None:
            query = query.where(Integration.identifier == identifier)
        result = await self.session.execute(
            query.order_by(Integration.created_at.desc(), Integration.id.desc()).limit(1)
        )
        return result.scalar_one_or_none()


class SubscriberImportRepository:
    """The ``subscriber_imports`` rows (herald.subscribers.imports), always read within their environment."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, row: SubscriberImport) -> None:
        self.session.add(row)
        await self.session.flush()

    async def get(self, environment_id: str, import_id: str) -> SubscriberImport | None:
        result = await self.session.execute(
            select(SubscriberImport).where(SubscriberImport.environment_id == environment_id, SubscriberImport.id == import_id)
        )
        return result.scalar_one_or_none()

    async def get_for_update(self, import_id: str) -> SubscriberImport | None:
        """The row by id alone: for the import's own task, which was handed the id by a scoped request."""
        result = await self.session.execute(select(SubscriberImport).where(SubscriberImport.id == import_id))
        return result.scalar_one_or_none()

    async def newest(self, environment_id: str, limit: int) -> list[SubscriberImport]:
        """The environment's newest imports, without their files (``source`` is not read)."""
        result = await self.session.execute(
            select(SubscriberImport)
            .options(defer(SubscriberImport.source))
            .where(SubscriberImport.environment_id == environment_id)
            .order_by(SubscriberImport.created_at.desc(), SubscriberImport.id.desc())
            .limit(limit)
        )
        return list(result.scalars())

    async def progress_of(self, environment_id: str, import_id: str) -> tuple[str, int] | None:
        """(status, processed_rows) of the import: what its progress page watches."""
        result = await self.session.execute(
            select(SubscriberImport.status, SubscriberImport.processed_rows).where(
                SubscriberImport.environment_id == environment_id, SubscriberImport.id == import_id
            )
        )
        row = result.first()
        return (row[0], row[1]) if row is not None else None

    async def stalled(self, heartbeat_before: Any, limit: int) -> list[SubscriberImport]:
        """Imports of any environment not finished whose heartbeat is older than ``heartbeat_before`` (the workers' sweep)."""
        result = await self.session.execute(
            select(SubscriberImport)
            .options(defer(SubscriberImport.source))
            .where(SubscriberImport.status.in_(("queued", "running")), SubscriberImport.updated_at < heartbeat_before)
            .order_by(SubscriberImport.updated_at)
            .limit(limit)
        )
        return list(result.scalars())

    async def claim(self, import_id: str, seen_updated_at: Any, now: Any) -> bool:
        """Take up an import whose heartbeat was ``seen_updated_at``; False when another process did first."""
        result = await self.session.execute(
            update(SubscriberImport)
            .where(SubscriberImport.id == import_id, SubscriberImport.updated_at == seen_updated_at)
            .values(updated_at=now)
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]
