"""The queries of the Analytics page: messages counted by ten minutes, and the counts kept.

Every query names its environment; every answer is bounded: counts are
grouped by ten minutes (or day), workflow, channel, provider and status, the
workflows named by :data:`MAX_WORKFLOWS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import delete, distinct, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import AnalyticsCount, AnalyticsDay, AnalyticsProgress, Message, Workflow

# Workflows named on the page at most (the top ones are among these).
MAX_WORKFLOWS = 1000
# "2026-11-29 07:1": ten minutes' key (07:10 to 07:20); a day's is its first 10 characters.
SLOT_LENGTH = 15


class Count(NamedTuple):
    """Messages of ten minutes ("2026-11-29 07:1") or a day ("2026-11-29") with one workflow, channel, provider and status."""

    period: str
    workflow_id: str
    channel: str
    provider_id: str
    status: str
    messages: int


class _LostRace(Exception):
    """Another request kept the same messages first."""


class AnalyticsRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def _created(self, length: int) -> Any:
        """The messages' creation time (UTC) as text, cut to ``length``: 15 for ten minutes, 10 for the day."""
        if self.session.get_bind().dialect.name == "postgresql":
            return func.substr(func.to_char(func.timezone("UTC", Message.created_at), "YYYY-MM-DD HH24:MI"), 1, length)
        # SQLite keeps UTC date-times as text: "2026-11-29 07:12:33.123456".
        return func.substr(Message.created_at, 1, length)

    async def count_messages(self, environment_id: str, start: datetime, end: datetime | None = None) -> list[Count]:
        """The messages created from ``start`` (to ``end``), counted by ten minutes, workflow, channel, provider and status."""
        slot = self._created(SLOT_LENGTH)
        conditions = [Message.environment_id == environment_id, Message.created_at >= start]
        if end is not None:
            conditions.append(Message.created_at < end)
        rows = await self.session.execute(
            select(slot, Message.workflow_id, Message.channel, Message.provider_id, Message.status, func.count())
            .where(*conditions)
            .group_by(slot, Message.workflow_id, Message.channel, Message.provider_id, Message.status)
        )
        return [
            Count(period, workflow_id or "", channel or "", provider_id or "", status or "", int(messages))
            for period, workflow_id, channel, provider_id, status, messages in rows.all()
        ]

    async def subscribers_by_day(self, environment_id: str, start: datetime, end: datetime) -> dict[str, int]:
        """How many subscribers were sent a message on each day from ``start`` to ``end`` (whole days)."""
        day = self._created(10)
        rows = await self.session.execute(
            select(day, func.count(distinct(Message.subscriber_id)))
            .where(Message.environment_id == environment_id, Message.created_at >= start, Message.created_at < end)
            .group_by(day)
        )
        return {key: int(subscribers) for key, subscribers in rows.all()}

    async def counted_until(self, environment_id: str) -> datetime | None:
        row = await self.session.execute(
            select(AnalyticsProgress.counted_until).where(AnalyticsProgress.environment_id == environment_id)
        )
        return row.scalar_one_or_none()

    async def keep(
        self,
        environment_id: str,
        organization_id: str,
        counts: Sequence[Count],
        subscribers: Mapping[str, int],
        *,
        was: datetime | None,
        until: datetime,
        fold_days: Sequence[str] = (),
    ) -> bool:
        """Keep the counts of the messages from ``was`` to ``until`` and the days that end; False when another request did first.

        ``counts`` replace the slots of ``fold_days`` kept earlier (the
        caller summed those in, :meth:`slots_of_days`). In a savepoint: the
        progress moves only from ``was`` (compare and set), and a clash
        leaves this request's transaction as it was.
        """
        try:
            async with self.session.begin_nested():
                if was is None:
                    await self.session.execute(
                        insert(AnalyticsProgress).values(
                            environment_id=environment_id, organization_id=organization_id, counted_until=until
                        )
                    )
                else:
                    moved = await self.session.execute(
                        update(AnalyticsProgress)
                        .where(AnalyticsProgress.environment_id == environment_id, AnalyticsProgress.counted_until == was)
                        .values(counted_until=until)
                    )
                    if moved.rowcount != 1:  # type: ignore[attr-defined]
                        raise _LostRace
                if fold_days:
                    # Slots kept earlier of the days that end now: summed into their days' counts below.
                    await self.session.execute(
                        delete(AnalyticsCount).where(
                            AnalyticsCount.environment_id == environment_id,
                            func.substr(AnalyticsCount.period, 1, 10).in_(list(fold_days)),
                            func.length(AnalyticsCount.period) == SLOT_LENGTH,
                        )
                    )
                if counts:
                    await self.session.execute(
                        insert(AnalyticsCount),
                        [
                            {
                                "environment_id": environment_id,
                                "period": count.period,
                                "workflow_id": count.workflow_id,
                                "channel": count.channel,
                                "provider_id": count.provider_id,
                                "status": count.status,
                                "messages": count.messages,
                            }
                            for count in counts
                        ],
                    )
                if subscribers:
                    await self.session.execute(
                        insert(AnalyticsDay),
                        [{"environment_id": environment_id, "day": day, "subscribers": value} for day, value in subscribers.items()],
                    )
        except (IntegrityError, _LostRace):
            return False
        return True

    async def slots_of_days(self, environment_id: str, days: Sequence[str]) -> list[Count]:
        """The slots kept of ``days`` (a day counted in part before it ended), to fold into the day."""
        if not days:
            return []
        rows = await self.session.execute(
            select(
                AnalyticsCount.period,
                AnalyticsCount.workflow_id,
                AnalyticsCount.channel,
                AnalyticsCount.provider_id,
                AnalyticsCount.status,
                AnalyticsCount.messages,
            ).where(
                AnalyticsCount.environment_id == environment_id,
                func.substr(AnalyticsCount.period, 1, 10).in_(list(days)),
                func.length(AnalyticsCount.period) == SLOT_LENGTH,
            )
        )
        return [Count(*row) for row in rows.all()]

    async def kept_counts(self, environment_id: str, first: str, until: str) -> list[Count]:
        """The counts kept from ``first`` to before ``until`` (periods), summed by day.

        A day that ended is kept as one row per workflow, channel, provider
        and status (``period`` is the day, "2026-11-29", which sorts before
        its slots); today's as ten-minute slots.
        """
        day = func.substr(AnalyticsCount.period, 1, 10)
        rows = await self.session.execute(
            select(
                day,
                AnalyticsCount.workflow_id,
                AnalyticsCount.channel,
                AnalyticsCount.provider_id,
                AnalyticsCount.status,
                func.sum(AnalyticsCount.messages),
            )
            .where(
                AnalyticsCount.environment_id == environment_id,
                AnalyticsCount.period >= first,
                AnalyticsCount.period < until,
            )
            .group_by(day, AnalyticsCount.workflow_id, AnalyticsCount.channel, AnalyticsCount.provider_id, AnalyticsCount.status)
        )
        return [Count(period, workflow_id, channel, provider_id, status, int(messages)) for period, workflow_id, channel, provider_id, status, messages in rows.all()]

    async def kept_days(self, environment_id: str, first: str, last: str) -> dict[str, int]:
        """The subscribers counted for the days from ``first`` to ``last`` (inclusive) that ended."""
        rows = await self.session.execute(
            select(AnalyticsDay.day, AnalyticsDay.subscribers).where(
                AnalyticsDay.environment_id == environment_id, AnalyticsDay.day >= first, AnalyticsDay.day <= last
            )
        )
        return {day: subscribers for day, subscribers in rows.all()}

    async def workflow_names(self, environment_id: str, workflow_ids: Sequence[str]) -> dict[str, str]:
        """Names of the environment's workflows among ``workflow_ids`` (deleted ones too: their messages count)."""
        wanted = [workflow_id for workflow_id in workflow_ids if workflow_id][:MAX_WORKFLOWS]
        if not wanted:
            return {}
        rows = await self.session.execute(
            select(Workflow.id, Workflow.name).where(Workflow.environment_id == environment_id, Workflow.id.in_(wanted))
        )
        return {workflow_id: name for workflow_id, name in rows.all()}

    def _day(self, column: Any) -> Any:
        """A date-time column's UTC day as text ("2026-11-29")."""
        if self.session.get_bind().dialect.name == "postgresql":
            return func.to_char(func.timezone("UTC", column), "YYYY-MM-DD")
        return func.substr(column, 1, 10)

    async def distinct_subscribers(self, environment_id: str, start: datetime, end: datetime) -> int:
        """How many subscribers were sent a message from ``start`` to before ``end``."""
        result = await self.session.execute(
            select(func.count(distinct(Message.subscriber_id))).where(
                Message.environment_id == environment_id, Message.created_at >= start, Message.created_at < end
            )
        )
        return int(result.scalar_one())

    async def interactions_by_day(self, environment_id: str, start: datetime, end: datetime) -> dict[str, dict[str, int]]:
        """Messages first seen, last read and archived on each day from ``start`` to before ``end`` (each by its own date)."""
        found: dict[str, dict[str, int]] = {}
        for name, column in (
            ("seen", Message.first_seen_date),
            ("read", Message.last_read_date),
            ("archived", Message.archived_at),
        ):
            day = self._day(column)
            rows = await self.session.execute(
                select(day, func.count())
                .where(Message.environment_id == environment_id, column >= start, column < end)
                .group_by(day)
            )
            for key, count in rows.all():
                found.setdefault(str(key), {})[name] = int(count)
        return found
