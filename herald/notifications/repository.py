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

from sqlalchemy import ColumnElement, Select, case, exists, func, select
from sqlalchemy.ext.asyncio import AsyncSession

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


class NotificationRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def _conditions(self, environment_id: str, filters: ActivityFilter) -> list[ColumnElement[bool]]:
        conditions: list[ColumnElement[bool]] = [Notification.environment_id == environment_id]
        if filters.channels:
            conditions.append(
                exists().where(
                    Job.notification_id == Notification.id,
                    Job.environment_id == environment_id,
                    Job.step_type.in_(list(filters.channels)),
                )
            )
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

    async def page(
        self, environment_id: str, filters: ActivityFilter, *, offset: int, limit: int
    ) -> tuple[list[Notification], int]:
        """One page of the environment's notifications, newest first, and how many match in all."""
        conditions = self._conditions(environment_id, filters)
        total = (await self.session.execute(select(func.count()).select_from(Notification).where(*conditions))).scalar_one()
        if offset >= total:
            return [], total
        query: Select[tuple[Notification]] = (
            select(Notification).where(*conditions).order_by(*NEWEST_FIRST).offset(offset).limit(limit)
        )
        return list((await self.session.execute(query)).scalars()), total

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
