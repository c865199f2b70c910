"""Activity feed queries.

A page of the feed costs a fixed number of queries whatever its size: the page
of notifications (and its count), then everything hanging off it (jobs,
execution details, subscribers, workflows, events) with one ``IN`` query each.
The list is ordered by ``created_at`` within an environment, which the index
``ix_notifications_environment_created`` serves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, case, exists, func, not_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from herald.kit.pagination import count_bound
from herald.models import (
    Event,
    ExecutionDetail,
    Job,
    Notification,
    Subscriber,
    Workflow,
)

# Newest first; the id breaks ties between notifications made in the same instant.
NEWEST_FIRST = (Notification.created_at.desc(), Notification.id.desc())

# A run's status, from its steps' (jobs'): failed when one failed, pending while one is still to run,
# else completed (every step sent, skipped, canceled or merged).
RUN_STATUSES = ("failed", "pending", "completed")
WAITING_JOB_STATUSES = ("pending", "queued", "running", "delayed")
# A search names a subscriber or a transaction; an email or phone shared by more subscribers than this is cut.
MAX_SEARCH_SUBSCRIBERS = 100


def run_status(job_statuses: Sequence[str]) -> str:
    """The status of a run whose steps have ``job_statuses`` (one of :data:`RUN_STATUSES`)."""
    if "failed" in job_statuses:
        return "failed"
    if any(status in WAITING_JOB_STATUSES for status in job_statuses):
        return "pending"
    return "completed"


@dataclass(frozen=True)
class ActivityFilter:
    """What narrows the activity feed; each given list matches any of its values."""

    channels: Sequence[str] | None = None
    # The caller's subscriberId strings, not Herald's internal ids.
    subscriber_ids: Sequence[str] | None = None
    emails: Sequence[str] | None = None
    transaction_ids: Sequence[str] | None = None
    workflow_ids: Sequence[str] | None = None
    after: datetime | None = None
    before: datetime | None = None
    # One value that is a subscriberId, an email, a phone number or a transactionId (any of them).
    search: str | None = None
    # Run statuses (RUN_STATUSES), from the steps' statuses.
    statuses: Sequence[str] | None = None


class NotificationRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def _conditions(self, environment_id: str, filters: ActivityFilter) -> list[ColumnElement[bool]]:
        """Every condition of ``filters`` but the search (:meth:`_search`, which looks subscribers up first)."""
        return self._indexed_conditions(environment_id, filters) + self._scanned_conditions(environment_id, filters)

    def _indexed_conditions(self, environment_id: str, filters: ActivityFilter) -> list[ColumnElement[bool]]:
        """The conditions an index of ``notifications`` finds the rows of (migration 0027)."""
        conditions: list[ColumnElement[bool]] = [Notification.environment_id == environment_id]
        if filters.subscriber_ids:
            conditions.append(
                Notification.subscriber_id.in_(
                    select(Subscriber.id).where(
                        Subscriber.environment_id == environment_id,
                        Subscriber.subscriber_id.in_(list(filters.subscriber_ids)),
                    )
                )
            )
        if filters.emails:
            conditions.append(
                Notification.subscriber_id.in_(
                    select(Subscriber.id).where(
                        Subscriber.environment_id == environment_id, Subscriber.email.in_(list(filters.emails))
                    )
                )
            )
        if filters.transaction_ids:
            conditions.append(Notification.transaction_id.in_(list(filters.transaction_ids)))
        if filters.workflow_ids:
            conditions.append(Notification.workflow_id.in_(list(filters.workflow_ids)))
        if filters.after is not None:
            conditions.append(Notification.created_at >= filters.after)
        if filters.before is not None:
            conditions.append(Notification.created_at <= filters.before)
        return conditions

    def _scanned_conditions(
        self, environment_id: str, filters: ActivityFilter, run: Any = Notification
    ) -> list[ColumnElement[bool]]:
        """The conditions on a run's steps, checked run by run (``run``: the notifications or a window of them)."""
        conditions: list[ColumnElement[bool]] = []
        if filters.channels:
            conditions.append(
                exists().where(
                    Job.notification_id == run.id,
                    Job.environment_id == environment_id,
                    Job.step_type.in_(list(filters.channels)),
                )
            )
        if filters.statuses:
            conditions.append(or_(*(self._has_status(environment_id, status, run) for status in filters.statuses)))
        return conditions

    async def _search(self, environment_id: str, term: str) -> ColumnElement[bool]:
        """The runs of the subscribers whose subscriberId, email or phone is ``term``, or of the transaction ``term``.

        Exact matches (an email also in lower case). The subscribers are
        looked up first, so that each half of the condition is an index's
        range (migration 0027), not a scan of the environment's history.
        """
        found = await self.session.execute(
            select(Subscriber.id)
            .where(
                Subscriber.environment_id == environment_id,
                or_(
                    Subscriber.subscriber_id == term,
                    Subscriber.email.in_(sorted({term, term.lower()})),
                    Subscriber.phone == term,
                ),
            )
            .limit(MAX_SEARCH_SUBSCRIBERS)
        )
        subscriber_ids = list(found.scalars())
        by_transaction = Notification.transaction_id == term
        return or_(by_transaction, Notification.subscriber_id.in_(subscriber_ids)) if subscriber_ids else by_transaction

    def _has_status(self, environment_id: str, status: str, run: Any) -> ColumnElement[bool]:
        def steps(*statuses: str) -> ColumnElement[bool]:
            return exists().where(
                Job.notification_id == run.id,
                Job.environment_id == environment_id,
                Job.kind == "step",
                Job.status.in_(statuses),
            )

        if status == "failed":
            return steps("failed")
        if status == "pending":
            return and_(not_(steps("failed")), steps(*WAITING_JOB_STATUSES))
        return not_(steps("failed", *WAITING_JOB_STATUSES))

    async def newest(
        self, environment_id: str, filters: ActivityFilter, *, older_than: Notification | None, limit: int, scan: int
    ) -> tuple[list[Notification], str | None]:
        """Up to ``limit`` matching runs, newest first, older than ``older_than``; and where the next page starts.

        Keyset pages: no count, no offset. The search, the workflow and the
        time are found through indexes; the conditions on a run's steps
        (channel, status) are checked on at most ``scan`` runs per page, so a
        status no run has costs one window, not the environment's history.
        The next page starts after the last run shown, or, when the window
        ran out first, after the window's last run; None when nothing is older.
        """
        conditions = self._indexed_conditions(environment_id, filters)
        if filters.search:
            conditions.append(await self._search(environment_id, filters.search))
        if older_than is not None:
            conditions.append(
                or_(
                    Notification.created_at < older_than.created_at,
                    and_(Notification.created_at == older_than.created_at, Notification.id < older_than.id),
                )
            )
        if not (filters.channels or filters.statuses):
            query = select(Notification).where(*conditions).order_by(*NEWEST_FIRST).limit(limit + 1)
            rows = list((await self.session.execute(query)).scalars())
            return rows[:limit], rows[limit - 1].id if len(rows) > limit else None
        # The window keeps the index's order, so the store reads it only until the page is full.
        window = aliased(Notification, select(Notification).where(*conditions).order_by(*NEWEST_FIRST).limit(scan).subquery())
        query = (
            select(window)
            .where(*self._scanned_conditions(environment_id, filters, window))
            .order_by(window.created_at.desc(), window.id.desc())
            .limit(limit + 1)
        )
        rows = list((await self.session.execute(query)).scalars())
        if len(rows) > limit:
            return rows[:limit], rows[limit - 1].id
        last = select(Notification.id).where(*conditions).order_by(*NEWEST_FIRST).offset(scan - 1).limit(1)
        return rows, (await self.session.execute(last)).scalar_one_or_none()

    async def step_statuses(self, environment_id: str, notification_ids: Sequence[str]) -> dict[str, list[str]]:
        """Notification id -> the statuses of its steps (only the status column: a page's rows stay light)."""
        if not notification_ids:
            return {}
        result = await self.session.execute(
            select(Job.notification_id, Job.status).where(
                Job.environment_id == environment_id,
                Job.notification_id.in_(list(notification_ids)),
                Job.kind == "step",
            )
        )
        statuses: dict[str, list[str]] = {}
        for notification_id, status in result.all():
            statuses.setdefault(notification_id, []).append(status)
        return statuses

    async def page(
        self, environment_id: str, filters: ActivityFilter, *, offset: int, limit: int
    ) -> tuple[list[Notification], int]:
        """One page of the environment's notifications, newest first, and how many match (unless narrowed
        to transactions or subscribers, counted up to :func:`~herald.kit.pagination.count_bound`)."""
        conditions = self._conditions(environment_id, filters)
        if filters.search:
            conditions.append(await self._search(environment_id, filters.search))
        # Narrowed to transactions or subscribers, the runs are counted whole (see MessageRepository.list_messages).
        narrowed = bool(filters.transaction_ids or filters.subscriber_ids)
        total = (await self.session.execute(self.count_query(conditions, None if narrowed else count_bound(offset, limit)))).scalar_one()
        if offset >= total:
            return [], total
        query: Select[tuple[Notification]] = (
            select(Notification).where(*conditions).order_by(*NEWEST_FIRST).offset(offset).limit(limit)
        )
        return list((await self.session.execute(query)).scalars()), total

    @staticmethod
    def count_query(conditions: Sequence[ColumnElement[bool]], bound: int | None) -> Select[tuple[int]]:
        """How many notifications match ``conditions``, counting no further than ``bound`` when given."""
        matches = select(Notification.id).where(*conditions)
        if bound is not None:
            matches = matches.limit(bound)
        return select(func.count()).select_from(matches.subquery())

    async def get(self, environment_id: str, notification_id: str) -> Notification | None:
        result = await self.session.execute(
            select(Notification).where(Notification.id == notification_id, Notification.environment_id == environment_id)
        )
        return result.scalar_one_or_none()

    async def jobs_of(self, environment_id: str, notification_ids: Sequence[str]) -> list[Job]:
        """The step jobs of these notifications, in step order."""
        if not notification_ids:
            return []
        result = await self.session.execute(
            select(Job)
            .where(Job.environment_id == environment_id, Job.notification_id.in_(list(notification_ids)))
            .order_by(Job.notification_id, Job.step_index, Job.created_at, Job.id)
        )
        return list(result.scalars())

    async def notification_ids_of_jobs(self, environment_id: str, job_ids: Sequence[str]) -> dict[str, str]:
        """Job id -> notification id, for jobs outside the page (the digests others merged into)."""
        if not job_ids:
            return {}
        result = await self.session.execute(
            select(Job.id, Job.notification_id).where(Job.environment_id == environment_id, Job.id.in_(list(job_ids)))
        )
        return {job_id: notification_id for job_id, notification_id in result.all() if notification_id is not None}

    async def details_of(self, environment_id: str, notification_ids: Sequence[str]) -> list[ExecutionDetail]:
        """The execution details of these notifications, oldest first."""
        if not notification_ids:
            return []
        result = await self.session.execute(
            select(ExecutionDetail)
            .where(
                ExecutionDetail.environment_id == environment_id,
                ExecutionDetail.notification_id.in_(list(notification_ids)),
            )
            .order_by(ExecutionDetail.created_at, ExecutionDetail.id)
        )
        return list(result.scalars())

    async def subscribers(self, environment_id: str, ids: Sequence[str]) -> list[Subscriber]:
        if not ids:
            return []
        result = await self.session.execute(
            select(Subscriber).where(Subscriber.environment_id == environment_id, Subscriber.id.in_(list(ids)))
        )
        return list(result.scalars())

    async def workflows(self, environment_id: str, ids: Sequence[str]) -> list[Workflow]:
        """Deleted workflows included: their notifications still name them."""
        if not ids:
            return []
        result = await self.session.execute(
            select(Workflow).where(Workflow.environment_id == environment_id, Workflow.id.in_(list(ids)))
        )
        return list(result.scalars())

    async def event_snapshots(
        self, environment_id: str, event_ids: Sequence[str]
    ) -> dict[str, tuple[list[Any], dict[str, Any]]]:
        """Event id -> (the workflow steps as they were when the event was accepted, the trigger's overrides)."""
        if not event_ids:
            return {}
        result = await self.session.execute(
            select(Event.id, Event.steps, Event.overrides).where(
                Event.environment_id == environment_id, Event.id.in_(list(event_ids))
            )
        )
        return {event_id: (steps or [], overrides or {}) for event_id, steps, overrides in result.all()}

    async def counts_since(self, environment_id: str, week_start: datetime, month_start: datetime) -> tuple[int, int]:
        """Notifications created since each of two moments (the earlier one is ``month_start``)."""
        query = select(
            func.coalesce(func.sum(case((Notification.created_at >= week_start, 1), else_=0)), 0),
            func.count(),
        ).where(Notification.environment_id == environment_id, Notification.created_at >= month_start)
        weekly, monthly = (await self.session.execute(query)).one()
        return int(weekly), int(monthly)

    async def daily_groups(self, environment_id: str, since: datetime) -> list[tuple[str, str, list[Any], int]]:
        """(UTC day, workflow id, channels, count) of the notifications created since ``since``.

        Grouped in the store, so the answer stays small however many
        notifications there are; the day is computed per dialect.
        """
        if self.session.bind.dialect.name == "postgresql":
            day = func.to_char(func.timezone("UTC", Notification.created_at), "YYYY-MM-DD")
        else:
            # SQLite keeps UTC datetimes as "YYYY-MM-DD HH:MM:SS.ffffff".
            day = func.substr(Notification.created_at, 1, 10)
        day = day.label("day")
        query = (
            select(day, Notification.workflow_id, Notification.channels, func.count())
            .where(Notification.environment_id == environment_id, Notification.created_at >= since)
            .group_by(day, Notification.workflow_id, Notification.channels)
        )
        return [(str(d), workflow_id, channels or [], int(count)) for d, workflow_id, channels, count in (await self.session.execute(query)).all()]

    def _created_day(self) -> Any:
        """A run's UTC creation day as text ("2026-11-29")."""
        if self.session.get_bind().dialect.name == "postgresql":
            return func.to_char(func.timezone("UTC", Notification.created_at), "YYYY-MM-DD")
        return func.substr(Notification.created_at, 1, 10)

    async def runs_by_day(self, environment_id: str, start: datetime, end: datetime) -> dict[str, dict[str, int]]:
        """Runs created on each day from ``start`` to before ``end``, by status (RUN_STATUSES), as the feed decides it."""
        day = self._created_day()
        window = [
            Notification.environment_id == environment_id,
            Notification.created_at >= start,
            Notification.created_at < end,
        ]
        found: dict[str, dict[str, int]] = {}
        for status in RUN_STATUSES:
            rows = await self.session.execute(
                select(day, func.count())
                .where(*window, self._has_status(environment_id, status, Notification))
                .group_by(day)
            )
            for key, count in rows.all():
                found.setdefault(str(key), {})[status] = int(count)
        return found

    async def runs_by_workflow(
        self, environment_id: str, start: datetime, end: datetime, limit: int
    ) -> list[tuple[str, int]]:
        """(workflow _id, runs) from ``start`` to before ``end``, most runs first."""
        rows = await self.session.execute(
            select(Notification.workflow_id, func.count())
            .where(
                Notification.environment_id == environment_id,
                Notification.created_at >= start,
                Notification.created_at < end,
            )
            .group_by(Notification.workflow_id)
            .order_by(func.count().desc(), Notification.workflow_id)
            .limit(limit)
        )
        return [(str(workflow_id), int(count)) for workflow_id, count in rows.all()]
