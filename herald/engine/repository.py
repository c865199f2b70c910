"""Every query the engine makes, apart from the queue's own (herald/engine/queue.py)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache, partial
from typing import Any

from sqlalchemy import (
    CompoundSelect,
    Select,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    literal,
    or_,
    select,
    text,
    tuple_,
    union_all,
    update,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased, with_expression

from herald.engine.preferences import Preference
from herald.engine.queue import DIGEST_ARRIVING, DUE, LEASED, OPEN_DIGEST
from herald.kit.bulk import insert_rows
from herald.kit.db import any_of, any_of_parameter, dialect_of, each_of_parameter
from herald.kit.ids import new_id
from herald.kit.metrics import messages as messages_total
from herald.kit.time import utcnow
from herald.models import (
    DeliveryEventKey,
    EnvironmentVariable,
    Event,
    ExecutionDetail,
    Integration,
    IntegrationHealth,
    Job,
    Message,
    Notification,
    SpentSignatureToken,
    Subscriber,
    SubscriberPreference,
    Tenant,
    ThrottleWindow,
    Topic,
    TopicSubscriber,
    Workflow,
)
from herald.models.base import UTCDateTime
from herald.realtime.held import held_received_job
from herald.realtime.signals import COUNTS, RECEIVED, Change, announce, announce_activity
from herald.subscribers.channels import merge_requested_channels
from herald.webhooks.events import columns_of, emit_messages

# Fields a trigger may set on a subscriber (inline subscriber objects and actors).
SUBSCRIBER_COLUMNS = {
    "email": "email",
    "firstName": "first_name",
    "lastName": "last_name",
    "phone": "phone",
    "avatar": "avatar",
    "locale": "locale",
    "timezone": "timezone",
    "data": "data",
    "channels": "channels",
}


# Rows per multi-row INSERT and values per IN list: PostgreSQL (asyncpg) takes
# at most 32,767 parameters per statement, and a subscriber row has about ten.
CHUNK_ROWS = 1000


# The look-ups every expansion makes, built once per dialect and given their
# values at execution (kit.db.any_of_parameter says why).
@cache
def _events_by_id(dialect: str) -> Select[Any]:
    # With the workflow's critical and preferenceSettings as they are now, which
    # a channel step's preferences are judged by (engine/preferences.py): read
    # with the event, they cost no statement of their own.
    return (
        select(Event)
        .outerjoin(Workflow, Workflow.id == Event.workflow_id)
        .options(
            with_expression(Event.workflow_critical, Workflow.critical),
            with_expression(Event.workflow_preference_settings, Workflow.preference_settings),
            with_expression(Event.workflow_translation_enabled, Workflow.is_translation_enabled),
        )
        .where(any_of_parameter(dialect, Event.id, "ids"))
    )


@cache
def _preferences_of(dialect: str) -> Select[Any]:
    preference = SubscriberPreference
    return select(
        preference.subscriber_id, preference.workflow_id, preference.enabled, preference.channels, preference.schedule
    ).where(
        any_of_parameter(dialect, preference.subscriber_id, "subscriber_ids"),
        or_(preference.workflow_id.is_(None), any_of_parameter(dialect, preference.workflow_id, "workflow_ids")),
    )


def _with_preference_flag(query: Select[Any]) -> Select[Any]:
    """The subscribers ``query`` reads, each with whether they have set any preference.

    Most subscribers never set one: for them the read of preferences before a
    channel step is left out (runner._read_preferences), and a trigger
    delivered alone costs no statement more than before preferences existed.
    The question is one probe of ``uq_subscriber_preferences_subscriber_workflow``
    per subscriber, inside the read that was made anyway.
    """
    subscriber = query.column_descriptions[0]["entity"]
    return query.add_columns(exists().where(SubscriberPreference.subscriber_id == subscriber.id).label("has_preferences"))


@cache
def _subscribers_by_id(dialect: str) -> Select[Any]:
    return _with_preference_flag(select(Subscriber).where(any_of_parameter(dialect, Subscriber.id, "ids")))


@cache
def _subscribers_by_subscriber_id(dialect: str) -> Select[Any]:
    scope = select(Subscriber).where(Subscriber.environment_id == bindparam("environment_id"))
    return _with_preference_flag(each_of_parameter(dialect, scope, Subscriber.subscriber_id, "subscriber_ids"))


@cache
def _subscriber_ids_by_subscriber_id(dialect: str) -> Select[Any]:
    scope = select(Subscriber.subscriber_id, Subscriber.id).where(Subscriber.environment_id == bindparam("environment_id"))
    return each_of_parameter(dialect, scope, Subscriber.subscriber_id, "subscriber_ids")


class EngineRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        # Subscribers this repository read whole, by internal id: get_subscribers
        # answers from here before it asks the store (upsert_subscribers, whole=True).
        self.subscribers_read: dict[str, Subscriber] = {}
        # Those of the subscribers read (by internal id) who had set no preference
        # when read: their preferences need no read (_with_preference_flag).
        self.without_preferences: set[str] = set()

    def _insert(self, table: Any) -> Any:
        return (pg_insert if self.session.bind.dialect.name == "postgresql" else sqlite_insert)(table)

    # Throttles ----------------------------------------------------------------

    async def count_throttle_run(
        self, environment_id: str, scope: str, now: datetime, ends_at: datetime
    ) -> tuple[int, datetime]:
        """Count one run into the scope's window (opening a new one, to close at ``ends_at``, when none is open).

        Returns the run's number in its window and when the window closes. One
        statement: an insert that, on the scope's row, either counts up or
        starts over when the window has closed; concurrent runs queue on the
        row and each gets its own number.
        """
        table = ThrottleWindow.__table__
        closed = table.c.window_ends_at <= bindparam("now", now, type_=table.c.window_ends_at.type)
        statement = self._insert(table).values(environment_id=environment_id, scope=scope, window_ends_at=ends_at, count=1)
        statement = statement.on_conflict_do_update(
            index_elements=[table.c.environment_id, table.c.scope],
            set_={
                "count": case((closed, 1), else_=table.c.count + 1),
                "window_ends_at": case((closed, statement.excluded.window_ends_at), else_=table.c.window_ends_at),
            },
        ).returning(table.c.count, table.c.window_ends_at)
        count, closes_at = (await self.session.execute(statement)).one()
        return int(count), closes_at

    # Events and subscribers -------------------------------------------------

    async def environment_variables(self, organization_ids: Iterable[str]) -> Sequence[EnvironmentVariable]:
        """The variables of these organizations (values of every environment; secrets still sealed)."""
        result = await self.session.execute(
            select(EnvironmentVariable).where(EnvironmentVariable.organization_id.in_(set(organization_ids)))
        )
        return result.scalars().all()

    async def get_event(self, event_id: str) -> Event | None:
        return await self.session.get(Event, event_id)

    async def get_events(self, event_ids: Iterable[str]) -> dict[str, Event]:
        ids = list(dict.fromkeys(event_ids))
        result = await self.session.execute(_events_by_id(dialect_of(self.session)), {"ids": ids})
        return {event.id: event for event in result.scalars()}

    async def get_subscribers(self, subscriber_ids: Iterable[str]) -> dict[str, Subscriber]:
        ids = list(dict.fromkeys(subscriber_ids))
        found = {id_: self.subscribers_read[id_] for id_ in ids if id_ in self.subscribers_read}
        unread = [id_ for id_ in ids if id_ not in found]
        if unread:
            result = await self.session.execute(_subscribers_by_id(dialect_of(self.session)), {"ids": unread})
            found.update((subscriber.id, subscriber) for subscriber in self._note_preferences(result.all()))
        return found

    def _note_preferences(self, rows: Iterable[Any]) -> list[Subscriber]:
        """The subscribers of rows read with their preference flag (``_with_preference_flag``), noting who has none."""
        subscribers = []
        for subscriber, has_preferences in rows:
            if not has_preferences:
                self.without_preferences.add(subscriber.id)
            subscribers.append(subscriber)
        return subscribers

    async def preferences_of(
        self, subscriber_ids: Iterable[str], workflow_ids: Iterable[str]
    ) -> dict[tuple[str, str | None], Preference]:
        """The subscribers' global preferences (workflow None) and their preferences for these workflows, in one read."""
        result = await self.session.execute(
            _preferences_of(dialect_of(self.session)),
            {"subscriber_ids": list(dict.fromkeys(subscriber_ids)), "workflow_ids": list(dict.fromkeys(workflow_ids))},
        )
        return {
            (subscriber_id, workflow_id): Preference(bool(enabled), channels or {}, schedule)
            for subscriber_id, workflow_id, enabled, channels, schedule in result.all()
        }

    async def get_subscriber(self, subscriber_id: str) -> Subscriber | None:
        return await self.session.get(Subscriber, subscriber_id)

    async def upsert_subscribers(
        self,
        environment_id: str,
        organization_id: str,
        entries: Sequence[dict[str, Any]],
        left_out: dict[str, list[str]] | None = None,
        *,
        whole: bool = False,
    ) -> dict[str, str]:
        """Create the subscribers that do not exist; set only the given fields on those that do.

        ``channels`` are merged into the subscriber's own, each resolved to an
        active integration of the environment as ``PATCH
        /v1/subscribers/{id}/credentials`` does; a channel that cannot be is
        left out and why is added to ``left_out[subscriberId]``.

        ``whole``: the caller will want the subscribers' rows (to run their
        first steps at once): those that exist are read whole, and
        get_subscribers answers with them instead of reading them again.

        Returns subscriberId → internal id for every entry.
        """
        if not entries:
            return {}
        wanted = {entry["subscriberId"]: entry for entry in entries}
        # Subscribers whose fields change are read whole; for the others (a
        # plain subscriberId, the common case) the internal id is all it takes,
        # unless the caller wants them whole too.
        changing = [subscriber_id for subscriber_id, entry in wanted.items() if any(field in entry for field in SUBSCRIBER_COLUMNS)]
        changing_ids = set(changing)
        plain = [subscriber_id for subscriber_id in wanted if subscriber_id not in changing_ids]
        existing = await self._read_whole(environment_id, changing + plain if whole else changing)
        if whole:
            self.subscribers_read.update((row.id, row) for row in existing.values())
        ids = {subscriber_id: row.id for subscriber_id, row in existing.items()}
        if not whole:
            await self._add_subscriber_ids(environment_id, plain, ids)
        integrations = await self._channel_integrations(environment_id, entries)

        def channels_of(subscriber_id: str, current: list[dict[str, Any]]) -> list[dict[str, Any]]:
            channels, reasons = merge_requested_channels(current, wanted[subscriber_id].get("channels") or [], integrations)
            if reasons and left_out is not None:
                left_out.setdefault(subscriber_id, []).extend(reasons)
            return channels

        now = utcnow()
        for subscriber_id, row in existing.items():
            entry = wanted[subscriber_id]
            changes = {column: entry[field] for field, column in SUBSCRIBER_COLUMNS.items() if field in entry}
            if entry.get("channels"):
                changes["channels"] = channels_of(subscriber_id, list(row.channels or []))
            else:
                changes.pop("channels", None)
            if changes:
                for column, value in changes.items():
                    setattr(row, column, value)
                row.updated_at = now
                row.version += 1
        missing = [entry for subscriber_id, entry in wanted.items() if subscriber_id not in ids]
        if missing:
            rows = [
                {
                    "id": new_id(),
                    "environment_id": environment_id,
                    "organization_id": organization_id,
                    "subscriber_id": entry["subscriberId"],
                    "created_at": now,
                    "updated_at": now,
                    "deleted": False,
                    "version": 0,
                    **{column: entry[field] for field, column in SUBSCRIBER_COLUMNS.items() if field in entry},
                    "channels": channels_of(entry["subscriberId"], []),
                }
                for entry in missing
            ]
            table = Subscriber.__table__
            for chunk in _chunks(_uniform(rows), CHUNK_ROWS):
                result = await self.session.execute(
                    self._insert(table).on_conflict_do_nothing().returning(table.c.subscriber_id, table.c.id), chunk
                )
                ids.update((subscriber_id, internal_id) for subscriber_id, internal_id in result.all())
            # Another worker created some of them at the same moment: theirs are the ones.
            await self._add_subscriber_ids(environment_id, [e["subscriberId"] for e in missing if e["subscriberId"] not in ids], ids)
        await self.session.flush()
        return ids

    async def _read_whole(self, environment_id: str, subscriber_ids: list[str]) -> dict[str, Subscriber]:
        """The environment's subscribers among ``subscriber_ids`` (unique), by subscriberId."""
        found: dict[str, Subscriber] = {}
        for chunk in _chunks(subscriber_ids, CHUNK_ROWS):
            result = await self.session.execute(
                _subscribers_by_subscriber_id(dialect_of(self.session)), {"environment_id": environment_id, "subscriber_ids": chunk}
            )
            found.update((row.subscriber_id, row) for row in self._note_preferences(result.all()))
        return found

    async def _add_subscriber_ids(self, environment_id: str, subscriber_ids: list[str], ids: dict[str, str]) -> None:
        """Add subscriberId -> internal id of those of ``subscriber_ids`` that exist to ``ids``."""
        for chunk in _chunks(subscriber_ids, CHUNK_ROWS):
            result = await self.session.execute(
                _subscriber_ids_by_subscriber_id(dialect_of(self.session)), {"environment_id": environment_id, "subscriber_ids": chunk}
            )
            ids.update((subscriber_id, internal_id) for subscriber_id, internal_id in result.all())

    async def _channel_integrations(self, environment_id: str, entries: Sequence[dict[str, Any]]) -> list[Integration]:
        """The active integrations (newest first) of the providers the entries' channels name."""
        providers = {channel.get("providerId") for entry in entries for channel in entry.get("channels") or []}
        if not providers:
            return []
        result = await self.session.execute(
            select(Integration)
            .where(
                Integration.environment_id == environment_id,
                Integration.provider_id.in_(providers),
                Integration.active.is_(True),
                Integration.deleted.is_(False),
            )
            .order_by(Integration.created_at.desc(), Integration.id.desc())
        )
        return list(result.scalars())

    async def upsert_tenant(self, environment_id: str, organization_id: str, tenant: dict[str, Any]) -> Tenant | None:
        row = (
            await self.session.execute(
                select(Tenant).where(Tenant.environment_id == environment_id, Tenant.identifier == tenant["identifier"])
            )
        ).scalar_one_or_none()
        if row is not None and ("name" in tenant or "data" in tenant):
            if "name" in tenant:
                row.name = tenant["name"]
            if "data" in tenant:
                row.data = tenant["data"]
            row.updated_at = utcnow()
        return row

    async def get_tenant(self, environment_id: str, identifier: str) -> Tenant | None:
        return (
            await self.session.execute(
                select(Tenant).where(Tenant.environment_id == environment_id, Tenant.identifier == identifier)
            )
        ).scalar_one_or_none()

    async def topics_by_key(self, environment_id: str, keys: Iterable[str]) -> dict[str, str]:
        """Topic key → topic id, for the keys that name a topic of the environment."""
        keys = list(keys)
        if not keys:
            return {}
        result = await self.session.execute(
            select(Topic.key, Topic.id).where(Topic.environment_id == environment_id, Topic.key.in_(keys))
        )
        return {key: topic_id for key, topic_id in result.all()}

    async def topic_members_after(
        self, excluded_by_topic: dict[str, Sequence[str]], after: str, limit: int, through: str | None = None
    ) -> list[tuple[str, str]]:
        """(internal id, subscriberId) of the members of these topics, in id order, after a cursor.

        ``excluded_by_topic`` maps each topic id to the subscriberIds its
        ``exclude`` list leaves out of that topic only: a member left out of
        one topic is still reached through another that does not exclude it.
        A member of several topics comes once. ``through``: the last id of the
        range read, when it has one (a part of an expansion).
        """
        if not excluded_by_topic:
            return []
        statement = topic_members_statement(excluded_by_topic, after, limit, through)
        rows = await self._read_in_index_order(statement) if through is None else (await self.session.execute(statement)).all()
        members = dict(sorted((row[0], row[1]) for row in rows))
        return list(members.items())[:limit]

    async def environment_subscribers_after(
        self, environment_id: str, after: str, limit: int, through: str | None = None
    ) -> list[tuple[str, str]]:
        statement = select(Subscriber.id, Subscriber.subscriber_id).where(
            Subscriber.environment_id == environment_id, Subscriber.id > after
        )
        if through is not None:
            statement = statement.where(Subscriber.id <= through)
            return [(row[0], row[1]) for row in (await self.session.execute(statement.order_by(Subscriber.id).limit(limit))).all()]
        return [(row[0], row[1]) for row in await self._read_in_index_order(statement.order_by(Subscriber.id).limit(limit))]

    async def _read_in_index_order(self, statement: Any) -> Sequence[Any]:
        """Rows of a ``... ORDER BY <index> LIMIT n`` read open-ended after a cursor, with PostgreSQL's bitmap scans off.

        Without statistics of the table (a topic filled since the last
        ANALYZE, or a server without autovacuum), PostgreSQL guesses a couple
        of hundred rows and answers with a bitmap scan of every row after the
        cursor and a sort: 0.55 s for a page of a million-member topic, the
        whole topic read again for each page. With bitmap scans off for this
        one statement it walks the index in order and stops at the limit
        (tests/engine/test_fanout_paging.py). A range closed at both ends (an
        expansion's part) needs none of this: what it reads is bounded anyway.
        """
        if dialect_of(self.session) != "postgresql":
            return (await self.session.execute(statement)).all()
        # For this transaction only (is_local), and back to the server's setting right after.
        await self.session.execute(_BITMAP_SCANS_OFF)
        try:
            return (await self.session.execute(statement)).all()
        finally:
            await self.session.execute(_BITMAP_SCANS_BACK)

    async def recipient_counts(self, event_ids: Collection[str]) -> dict[str, int]:
        """How many recipients each event's ``to`` names (a topic counts one), read without the list itself."""
        length = func.jsonb_array_length if dialect_of(self.session) == "postgresql" else func.json_array_length
        result = await self.session.execute(
            select(Event.id, length(Event.recipients)).where(any_of(self.session, Event.id, list(event_ids)))
        )
        return {row[0]: int(row[1] or 0) for row in result.all()}

    async def lock_job_fresh(self, job_id: str) -> Job | None:
        """The job's row, locked, as it is now (not as this session may have read it before)."""
        result = await self.session.execute(
            select(Job).where(Job.id == job_id).with_for_update().execution_options(populate_existing=True)
        )
        return result.scalar_one_or_none()

    async def expansion_parts_left(self, event_id: str, due_by: datetime) -> int:
        """The event's expansion jobs not yet finished: its event job and the parts it queued.

        Read from ``ix_jobs_leased`` and from ``ix_jobs_due`` up to
        ``due_by``, when its parts are due (just after the trigger was
        accepted), so the steps of a large fan-out, queued later, are not read.
        """
        running = select(Job.id).where(LEASED, Job.kind == "event", Job.event_id == event_id)
        waiting = select(Job.id).where(DUE, Job.run_at <= due_by, Job.kind == "event", Job.event_id == event_id)
        return len((await self.session.execute(running.union_all(waiting))).all())

    async def count_event_notifications(self, event_id: str) -> int:
        """How many notifications the event has (from ``uq_notifications_event_subscriber``)."""
        return int(await self.session.scalar(select(func.count()).where(Notification.event_id == event_id)) or 0)

    # Notifications and jobs --------------------------------------------------

    async def insert_notifications(self, rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        """Insert notifications, skipping subscribers an event already has; returns (id, subscriber_id, event_id) inserted."""
        written = await insert_rows(
            self.session,
            Notification.__table__,
            rows,
            skip_conflicts_on=(),
            returning=("id", "subscriber_id", "event_id"),
        )
        if written:
            # New runs on the console's Activity page (herald/console).
            await announce_activity(self.session, {row["environment_id"] for row in rows})
        return [(row[0], row[1], row[2]) for row in written]

    async def insert_jobs(self, rows: list[dict[str, Any]]) -> None:
        await insert_rows(self.session, Job.__table__, rows)

    async def add_details(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write execution details (rows made by :func:`detail_row`) with one statement.

        Details are only ever written here and read by the activity feed, so
        they skip the ORM: a step writes several, and building mapped objects
        for them was a large share of a worker's time per message.
        """
        await insert_rows(self.session, ExecutionDetail.__table__, rows)
        if rows:
            # A step's outcome, live on the console's Activity page (herald/console).
            await announce_activity(self.session, {row["environment_id"] for row in rows})

    async def digest_result_before(self, notification_id: str, step_index: int) -> dict[str, Any] | None:
        """What the nearest digest step before this one collected (events, total_count).

        A closed digest is ``completed``; a backoff digest that let its event
        straight through is ``skipped`` with that one event as its result (a
        digest skipped by its filters has none).
        """
        return await self.session.scalar(
            select(Job.result)
            .where(
                Job.notification_id == notification_id,
                Job.step_type == "digest",
                Job.step_index < step_index,
                Job.status.in_(("completed", "skipped")),
            )
            .order_by(Job.step_index.desc())
            .limit(1)
        )

    # Digest -------------------------------------------------------------------

    async def open_digest(self, job: Job, digest_key: str) -> Job | None:
        return (
            await self.session.execute(
                select(Job).where(
                    Job.workflow_id == job.workflow_id,
                    Job.step_id == job.step_id,
                    Job.subscriber_id == job.subscriber_id,
                    Job.digest_key == digest_key,
                    OPEN_DIGEST,
                )
            )
        ).scalar_one_or_none()

    async def digest_payloads(self, master_id: str) -> list[dict[str, Any]]:
        """The payloads of a digest: its own event's and every event merged into it, oldest trigger first."""
        result = await self.session.execute(
            select(Event.payload)
            .join(Job, Job.event_id == Event.id)
            .where(or_(Job.id == master_id, (Job.merged_into == master_id) & (Job.status == "merged")))
            .order_by(Event.created_at, Event.id)
        )
        return [row[0] for row in result.all()]

    async def digest_events(self, master_id: str) -> list[tuple[str, datetime, dict[str, Any]]]:
        """A digest's events as a bridge reads them: each job's id, its trigger's time and payload, oldest first."""
        result = await self.session.execute(
            select(Job.id, Event.created_at, Event.payload)
            .join(Job, Job.event_id == Event.id)
            .where(or_(Job.id == master_id, (Job.merged_into == master_id) & (Job.status == "merged")))
            .order_by(Event.created_at, Event.id)
        )
        return [(job_id, created_at, payload or {}) for job_id, created_at, payload in result.all()]

    async def earlier_step_jobs(self, notification_id: str, step_index: int) -> list[Job]:
        """The jobs of a notification's steps before ``step_index``, in order (what a bridge's ``state`` is made of)."""
        result = await self.session.execute(
            select(Job)
            .where(Job.notification_id == notification_id, Job.kind == "step", Job.step_index < step_index)
            .order_by(Job.step_index)
        )
        return list(result.scalars())

    async def in_app_states(self, job_ids: Collection[str]) -> dict[str, Message]:
        """The in-app messages of these jobs, by job id (their seen and read flags go to a bridge's ``state``)."""
        if not job_ids:
            return {}
        result = await self.session.execute(
            select(Message).where(Message.job_id.in_(list(job_ids)), Message.channel == "in_app")
        )
        return {message.job_id or "": message for message in result.scalars()}

    async def digest_arrivals(self, master: Job, window_end: datetime) -> list[dict[str, Any]]:
        """Payloads of events triggered by ``window_end`` whose job is at this digest's step and not yet run.

        Queued for a worker or being run by one (``ix_jobs_digest_arriving``);
        the digest's own job and other digests closing (their digest_key is
        set) are not arrivals. The caller keeps those of its digest key.
        """
        result = await self.session.execute(
            select(Event.payload)
            .join(Job, Job.event_id == Event.id)
            .where(
                DIGEST_ARRIVING,
                Job.workflow_id == master.workflow_id,
                Job.step_id == master.step_id,
                Job.subscriber_id == master.subscriber_id,
                Job.digest_key.is_(None),
                Job.id != master.id,
                Event.created_at <= window_end,
            )
        )
        return [row[0] or {} for row in result.all()]

    async def triggers_being_expanded(self, workflow_id: str | None, triggered_by: datetime) -> int:
        """Triggers of the workflow accepted by ``triggered_by`` and not yet turned into their subscribers' jobs.

        Their subscribers are not known until they are expanded. Those a
        worker runs are read from ``ix_jobs_leased``; those waiting for one
        from ``ix_jobs_due``, up to ``triggered_by`` (a trigger waits from when
        it was accepted), a range the queue, claiming oldest first, has
        already emptied when a digest due then is claimed.
        """
        running = select(Job.id).where(LEASED, Job.kind == "event", Job.workflow_id == workflow_id, Job.created_at <= triggered_by)
        waiting = select(Job.id).where(DUE, Job.run_at <= triggered_by, Job.kind == "event", Job.workflow_id == workflow_id)
        return len((await self.session.execute(running.union_all(waiting))).all())

    async def closing_digests(self, job: Job, digest_key: str) -> Sequence[Job]:
        """Digests of this step, subscriber and key that a worker is closing now (read from ``ix_jobs_leased``)."""
        result = await self.session.execute(
            select(Job).where(
                LEASED,
                Job.step_type == "digest",
                Job.workflow_id == job.workflow_id,
                Job.step_id == job.step_id,
                Job.subscriber_id == job.subscriber_id,
                Job.digest_key == digest_key,
                Job.id != job.id,
            )
        )
        return result.scalars().all()

    async def recent_digest_jobs(self, job: Job, digest_key: str, since: datetime) -> int:
        """Other jobs of this digest step for the subscriber and key created since ``since``."""
        return int(
            await self.session.scalar(
                select(func.count())
                .select_from(Job)
                .where(
                    Job.workflow_id == job.workflow_id,
                    Job.step_id == job.step_id,
                    Job.subscriber_id == job.subscriber_id,
                    Job.digest_key == digest_key,
                    Job.id != job.id,
                    Job.created_at >= since,
                )
            )
            or 0
        )

    async def promote_merged(self, master: Job) -> tuple[Job, int] | None:
        """Hand a canceled digest's role to the oldest job merged into it (Novu's ``assignNextDigestJob``).

        The heir opens the digest in the master's place: delayed until the
        same time, with the other merged jobs now merged into it and its own
        later steps (merged along with it) waiting again. The master must
        already be canceled (one open digest per key). Returns the heir and
        how many other jobs merge into it, or None when nothing was merged.
        """
        heir = (
            await self.session.execute(
                select(Job)
                .where(Job.merged_into == master.id, Job.status == "merged")
                .order_by(Job.created_at, Job.id)
                .limit(1)
                .with_for_update()
            )
        ).scalar_one_or_none()
        if heir is None:
            return None
        moved = await self.session.execute(
            update(Job)
            .where(Job.merged_into == master.id, Job.status == "merged", Job.id != heir.id)
            .values(merged_into=heir.id),
            execution_options={"synchronize_session": False},
        )
        now = utcnow()
        heir.status = "delayed"
        heir.run_at = master.run_at
        heir.merged_into = None
        heir.locked_until = None
        heir.attempts = 0
        heir.data = {**(heir.data or {}), "digest_open": True, "window_end": (master.data or {}).get("window_end")}
        heir.updated_at = now
        await self.session.flush()  # the open-digest index speaks here
        await self.session.execute(
            update(Job)
            .where(Job.notification_id == heir.notification_id, Job.step_index > heir.step_index, Job.status == "merged")
            .values(status="pending", updated_at=now),
            execution_options={"synchronize_session": False},
        )
        return heir, int(moved.rowcount or 0)  # type: ignore[attr-defined]

    # Integrations and messages --------------------------------------------------

    async def active_integrations(self, environment_id: str, channel: str) -> Sequence[Integration]:
        result = await self.session.execute(
            select(Integration)
            .where(
                Integration.environment_id == environment_id,
                Integration.channel == channel,
                Integration.active.is_(True),
                Integration.deleted.is_(False),
            )
            .order_by(Integration.primary.desc(), Integration.priority.desc(), Integration.created_at.desc())
        )
        return result.scalars().all()

    async def active_integrations_with_health(
        self, environment_id: str, channel: str
    ) -> list[tuple[Integration, IntegrationHealth | None]]:
        """The channel's active integrations in failover order (primary, then priority), with their breaker's row."""
        result = await self.session.execute(
            select(Integration, IntegrationHealth)
            .outerjoin(IntegrationHealth, IntegrationHealth.integration_id == Integration.id)
            .where(
                Integration.environment_id == environment_id,
                Integration.channel == channel,
                Integration.active.is_(True),
                Integration.deleted.is_(False),
            )
            .order_by(Integration.primary.desc(), Integration.priority.desc(), Integration.created_at.desc())
        )
        return [(integration, health) for integration, health in result.tuples()]

    async def claim_probe(self, integration_id: str, now: datetime, until: datetime) -> bool:
        """Take the one probe of a half-open breaker; False when it is not half-open or another message has it."""
        result = await self.session.execute(
            update(IntegrationHealth)
            .where(
                IntegrationHealth.integration_id == integration_id,
                IntegrationHealth.skipped_until.is_not(None),
                IntegrationHealth.skipped_until <= now,
                or_(IntegrationHealth.probe_until.is_(None), IntegrationHealth.probe_until <= now),
            )
            .values(probe_until=until, updated_at=now)
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount)

    async def record_integration_failure(
        self,
        integration_id: str,
        environment_id: str,
        *,
        now: datetime,
        failures: int,
        window_start: datetime,
        open_until: datetime,
        probing: bool,
        error: str,
    ) -> IntegrationHealth:
        """Count a transient failure and open the breaker when it reaches ``failures`` in the window: one statement.

        The failures in the window and the decision to open are worked out by
        the store from the row as it is, so concurrent workers' failures all
        count and the breaker opens once. A failed probe opens it again.
        """
        table = IntegrationHealth.__table__
        stamp = lambda value: literal(value, UTCDateTime())  # noqa: E731
        in_window = and_(table.c.window_started_at.is_not(None), table.c.window_started_at > stamp(window_start))
        counted = case((in_window, table.c.failures + 1), else_=1)
        if probing:
            skipped_until: Any = stamp(open_until)
        else:
            skipped_until = case(
                (and_(table.c.skipped_until.is_(None), counted >= failures), stamp(open_until)), else_=table.c.skipped_until
            )
        error = error[:1000]
        statement = (
            self._insert(table)
            .values(
                integration_id=integration_id,
                environment_id=environment_id,
                failures=1,
                window_started_at=now,
                consecutive_failures=1,
                failing_since=now,
                skipped_until=open_until if failures <= 1 else None,
                probe_until=None,
                last_error=error,
                updated_at=now,
            )
        )
        statement = statement.on_conflict_do_update(
            index_elements=[table.c.integration_id],
            set_={
                "failures": counted,
                "window_started_at": case((in_window, table.c.window_started_at), else_=stamp(now)),
                "consecutive_failures": table.c.consecutive_failures + 1,
                "failing_since": func.coalesce(table.c.failing_since, stamp(now)),
                "skipped_until": skipped_until,
                "probe_until": None if probing else table.c.probe_until,
                "last_error": error,
                "updated_at": stamp(now),
            },
        ).returning(*table.c)
        row = (await self.session.execute(statement)).one()
        health = IntegrationHealth()
        health.__dict__.update(row._asdict())
        return health

    async def clear_integration_health(self, integration_id: str) -> None:
        """A success: the breaker closes and the integration is healthy again."""
        await self.session.execute(
            delete(IntegrationHealth)
            .where(IntegrationHealth.integration_id == integration_id)
            .execution_options(synchronize_session=False)
        )

    async def messages_of_job(self, job_id: str) -> dict[str, Message]:
        result = await self.session.execute(select(Message).where(Message.job_id == job_id))
        return {message.delivery_key: message for message in result.scalars()}

    async def messages_of_jobs(self, job_ids: Sequence[str]) -> dict[str, dict[str, Message]]:
        """The messages of several jobs, by job and delivery key (one statement)."""
        if not job_ids:
            return {}
        result = await self.session.execute(select(Message).where(any_of(self.session, Message.job_id, job_ids)))
        found: dict[str, dict[str, Message]] = {}
        for message in result.scalars():
            found.setdefault(message.job_id or "", {})[message.delivery_key] = message
        return found

    async def save_messages(self, messages: Sequence[Message], held_received: Mapping[str, datetime] | None = None) -> None:
        """Store step messages, one per (job, delivery key), in the session's transaction.

        New messages go in with one statement that says which it wrote. A
        retried step meets the messages it stored before: a ``sent`` row is
        kept as it is (it is the provider's answer, stored right after the
        send by ``steps.delivery``, and a message is never sent twice); an
        earlier row of another status (an error) that a delivery has now
        succeeded for takes the new outcome, so the row always says what
        finally happened.
        """
        if not messages:
            return
        rows = [_insert_row(message) for message in messages]
        written = set(
            await insert_rows(
                self.session,
                Message.__table__,
                rows,
                skip_conflicts_on=("job_id", "delivery_key"),
                returning=("job_id", "delivery_key"),
            )
        )
        # A new in-app message reaches its subscriber's sockets once this commits (herald/realtime).
        # ``held_received`` (by job id): the in-app messages created in the
        # subscriber's quiet hours, whose notification_received waits for the
        # next open hour in a job written here (herald.realtime.held); their
        # counts, true at once, go now.
        held = held_received or {}
        changes: list[Change] = []
        held_jobs: list[dict[str, Any]] = []
        for row in rows:
            if row["channel"] != "in_app" or (row["job_id"], row["delivery_key"]) not in written:
                continue
            until = held.get(row["job_id"] or "")
            if until is None:
                changes.append(Change(row["environment_id"], row["subscriber_id"], RECEIVED, row["id"]))
            else:
                changes.append(Change(row["environment_id"], row["subscriber_id"], COUNTS))
                held_jobs.append(_insert_row(held_received_job(row, until)))
        await announce(self.session, changes)
        await insert_rows(self.session, Job.__table__, held_jobs)
        new_rows = [row for row in rows if (row["job_id"], row["delivery_key"]) in written]
        for row in new_rows:
            messages_total.labels(row["channel"], row["status"]).inc()
        await _emit_outcomes(self.session, new_rows)
        earlier = [m for m, row in zip(messages, rows, strict=True) if (row["job_id"], row["delivery_key"]) not in written]
        if not earlier:
            return
        result = await self.session.execute(select(Message).where(any_of(self.session, Message.job_id, (m.job_id for m in earlier))))
        stored = {(row.job_id, row.delivery_key): row for row in result.scalars()}
        for message in earlier:
            row = stored.get((message.job_id, message.delivery_key or ""))
            if row is not None and row is not message and row.status != "sent" and message.status == "sent":
                for field in ("status", "provider_id", "provider_message_id", "delivered_at", "error_id", "error_text"):
                    setattr(row, field, getattr(message, field))
                row.updated_at = utcnow()
                await _emit_outcomes(self.session, [columns_of(row)])
        await self.session.flush()


async def _emit_outcomes(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """``message.sent`` and ``message.failed`` to the environment's webhook endpoints (herald/webhooks)."""
    sent = [row for row in rows if row.get("status") == "sent"]
    failed = [row for row in rows if row.get("status") in ("error", "warning")]
    if sent:
        await emit_messages(session, "message.sent", sent)
    if failed:
        await emit_messages(session, "message.failed", failed)


def detail_row(
    job: Job,
    status: str,
    detail: str,
    *,
    provider_id: str | None = None,
    raw: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One execution detail of ``job``: status is Success, Warning, Failed, Pending or Queued."""
    return {
        "id": new_id(),
        "environment_id": job.environment_id,
        "organization_id": job.organization_id,
        "job_id": job.id,
        "notification_id": job.notification_id,
        "subscriber_id": job.subscriber_id,
        "transaction_id": job.transaction_id,
        "channel": job.step_type,
        "provider_id": provider_id,
        "status": status,
        "detail": detail,
        "source": "Internal",
        "raw": raw,
        "is_retry": (job.attempts or 0) > 1,
        "created_at": utcnow(),
    }


def _insert_row(obj: Any) -> dict[str, Any]:
    """A new mapped object as an insert row: what was set on it, column defaults for the rest (as a flush would)."""
    values = obj.__dict__
    row: dict[str, Any] = {}
    for key, column_key, default in _insert_plan(type(obj)):
        if key in values:
            row[column_key] = values[key]
        else:
            row[column_key] = default() if default is not None else None
    return row


# Per mapped class: (attribute, column, default maker) for each column. Read from
# the mapper once, not for every row (a tenth of the cost of saving a message).
_insert_plans: dict[type, tuple[tuple[str, str, Callable[[], Any] | None], ...]] = {}


def _insert_plan(cls: type) -> tuple[tuple[str, str, Callable[[], Any] | None], ...]:
    plan = _insert_plans.get(cls)
    if plan is None:
        entries = []
        for attribute in sa_inspect(cls).column_attrs:
            column = attribute.columns[0]
            entries.append((attribute.key, column.key, _default_maker(column.default)))
        plan = _insert_plans[cls] = tuple(entries)
    return plan


def _default_maker(default: Any) -> Callable[[], Any] | None:
    if default is None:
        return None
    if default.is_callable:
        return partial(default.arg, None)
    value = default.arg
    return lambda: value


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def _uniform(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Multi-row inserts need every row to name the same columns."""
    keys = set().union(*(row.keys() for row in rows))
    return [{key: row.get(key) for key in keys} for row in rows]


# Job statuses that still have work ahead of them (a merged job waits on its digest).
UNFINISHED = ("queued", "delayed", "running", "pending")
# The predicate of ix_jobs_webhook_updated, as the index spells it.
WEBHOOK_JOBS = text("jobs.kind = 'webhook'")


class HistoryRepository:
    """The statements of retention (engine/retention.py): finished history and old messages, deleted by age.

    Age is read from ids, which begin with their creation second (kit.ids.id_floor):
    "made before" is a range of each table's primary key.
    """

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def finished_events_before(self, floor: str, limit: int) -> list[tuple[str, str, str]]:
        """Up to ``limit`` events made before ``floor`` whose jobs have all finished: (id, environment, transactionId).

        An event with a job still queued, delayed, running or pending, or
        merged into a digest that has not closed, is kept whatever its age.
        """
        job, master = aliased(Job), aliased(Job)
        waiting_digest = (
            select(master.id).where(master.id == job.merged_into, master.status.in_(UNFINISHED)).exists()
        )
        unfinished = (
            select(job.id)
            .where(
                job.environment_id == Event.environment_id,
                job.transaction_id == Event.transaction_id,
                or_(job.status.in_(UNFINISHED), (job.status == "merged") & waiting_digest),
            )
            .exists()
        )
        result = await self.session.execute(
            select(Event.id, Event.environment_id, Event.transaction_id)
            .where(Event.id < floor, ~unfinished)
            .order_by(Event.id)
            .limit(limit)
        )
        return [(row[0], row[1], row[2]) for row in result.all()]

    async def history_of(self, events: Sequence[tuple[str, str, str]]) -> tuple[list[str], list[str]]:
        """The ids of the events' jobs and notifications, all of them: (jobs, notifications).

        Read whole and cut by the caller: with a LIMIT PostgreSQL chose a slower
        plan (bench.retention, 20,000 events: 19.1 s against 4.1 s).
        """
        by_environment: dict[str, list[str]] = {}
        for _, environment_id, transaction_id in events:
            by_environment.setdefault(environment_id, []).append(transaction_id)
        jobs: list[str] = []
        notifications: list[str] = []
        for environment_id, transaction_ids in by_environment.items():
            jobs += await self._ids(Job, environment_id, transaction_ids)
            notifications += await self._ids(Notification, environment_id, transaction_ids)
        return jobs, notifications

    async def delete_history(self, job_ids: Sequence[str], notification_ids: Sequence[str]) -> dict[str, int]:
        """Delete these jobs (with their execution details) and notifications; returns how many rows of each went.

        Every execution detail belongs to a job (``detail_row``), so the details
        go by ``job_id``. Ids already deleted (by another worker's purge) count nothing.
        """
        counts = {"notifications": 0, "jobs": 0, "executionDetails": 0}
        for chunk in _chunks(list(job_ids), 500):
            counts["executionDetails"] += await self._delete(ExecutionDetail, ExecutionDetail.job_id.in_(chunk))
            counts["jobs"] += await self._delete(Job, Job.id.in_(chunk))
        for chunk in _chunks(list(notification_ids), 500):
            counts["notifications"] += await self._delete(Notification, Notification.id.in_(chunk))
        return counts

    async def delete_events(self, event_ids: Sequence[str]) -> int:
        """Delete these events (once nothing of their history is left); returns how many went."""
        deleted = 0
        for chunk in _chunks(list(event_ids), 500):
            deleted += await self._delete(Event, Event.id.in_(chunk))
        return deleted

    async def _ids(self, model: Any, environment_id: str, transaction_ids: list[str]) -> list[str]:
        result = await self.session.execute(
            select(model.id).where(model.environment_id == environment_id, model.transaction_id.in_(transaction_ids))
        )
        return list(result.scalars())

    async def delete_messages_before(self, floor: str, limit: int) -> int:
        """Delete up to ``limit`` messages made before ``floor``, oldest first; returns how many went."""
        oldest = select(Message.id).where(Message.id < floor).order_by(Message.id).limit(limit)
        ids = list((await self.session.execute(oldest)).scalars())
        deleted = 0
        for chunk in _chunks(ids, 500):
            deleted += await self._delete(Message, Message.id.in_(chunk))
        return deleted

    async def delete_finished_webhook_jobs(self, before: datetime) -> int:
        """Delete webhook deliveries that ended (sent, given up, canceled) before ``before``.

        The kind is written as ``ix_jobs_webhook_updated``'s own predicate, so
        the store reads that index (the webhook jobs alone) whatever the plan:
        with the kind a bound parameter, PostgreSQL's generic plan read every
        job (0.3–0.55 s on a store of 1.3 million, every minute per worker,
        before its next claim).
        """
        return await self._delete(
            Job, WEBHOOK_JOBS & Job.status.in_(("completed", "failed", "canceled")) & (Job.updated_at < before)
        )

    async def delete_delivery_event_keys_before(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` of the delivery events' keys claimed before ``before``, oldest first."""
        oldest = (
            select(DeliveryEventKey.environment_id, DeliveryEventKey.integration_id, DeliveryEventKey.event_key)
            .where(DeliveryEventKey.created_at < before)
            .order_by(DeliveryEventKey.created_at)
            .limit(limit)
        )
        keys = [tuple(row) for row in (await self.session.execute(oldest)).all()]
        deleted = 0
        for chunk in _chunks(keys, 500):
            deleted += await self._delete(
                DeliveryEventKey,
                tuple_(DeliveryEventKey.environment_id, DeliveryEventKey.integration_id, DeliveryEventKey.event_key).in_(
                    chunk
                ),
            )
        return deleted

    async def delete_expired_signature_tokens(self, now: datetime) -> int:
        """Delete the spent signature tokens whose signatures are out of the tolerance: they are refused anyway."""
        return await self._delete(SpentSignatureToken, SpentSignatureToken.expires_at < now)

    async def delete_closed_throttle_windows(self, now: datetime) -> int:
        """Delete throttle windows that closed before ``now``: the next run opens a new one anyway."""
        return await self._delete(ThrottleWindow, ThrottleWindow.window_ends_at < now)

    async def _delete(self, model: type, condition: Any) -> int:
        result = await self.session.execute(delete(model).where(condition))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]


_BITMAP_SCANS_OFF = text("SELECT set_config('enable_bitmapscan', 'off', true)")
_BITMAP_SCANS_BACK = text("SELECT set_config('enable_bitmapscan', reset_val, true) FROM pg_settings WHERE name = 'enable_bitmapscan'")


def topic_members_statement(
    excluded_by_topic: Mapping[str, Sequence[str]], after: str, limit: int, through: str | None = None
) -> Select[Any] | CompoundSelect:
    """One page of a fan-out: each topic's next ``limit`` members after the cursor, read as an index range.

    Each topic's part is ``topic_id = ? AND subscriber_id > ? ORDER BY
    subscriber_id LIMIT ?``, which both stores answer from
    uq_topic_subscribers_topic_subscriber by reading ``limit`` entries and
    stopping. One DISTINCT over all the topics (as before) made PostgreSQL read
    and sort every remaining member for every page, so a fan-out cost the square
    of its size (1.35 s and a 45 MB sort for a page of a million-member topic).
    With several topics the parts are joined by UNION ALL and the caller keeps
    the first ``limit`` distinct ids: any of them is among its own topic's first
    ``limit``, so nothing is skipped.
    """
    parts = []
    for topic_id, excluded in excluded_by_topic.items():
        part = select(TopicSubscriber.subscriber_id, TopicSubscriber.external_subscriber_id).where(
            TopicSubscriber.topic_id == topic_id, TopicSubscriber.subscriber_id > after
        )
        if through is not None:
            part = part.where(TopicSubscriber.subscriber_id <= through)
        if excluded:
            part = part.where(TopicSubscriber.external_subscriber_id.not_in(list(excluded)))
        parts.append(part.order_by(TopicSubscriber.subscriber_id).limit(limit))
    if len(parts) == 1:
        return parts[0]
    # SQLite takes ORDER BY and LIMIT only on a compound's last part: each part is a subquery.
    pages = [part.subquery() for part in parts]
    return union_all(*(select(page.c.subscriber_id, page.c.external_subscriber_id) for page in pages))
