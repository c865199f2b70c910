"""``GET /v1/activity/charts``: the report types of Novu's dashboard, from the Analytics page's counts.

Messages are counted as the console's Analytics page counts them
(:func:`herald.analytics.service.period_counts`: the kept counts of ended ten
minutes and days, and the minutes since from the messages), over the last
:data:`MAX_DAYS` days; runs (notifications) and their statuses as the
console's Activity page decides them (herald/notifications/repository.py).
A period is ``createdAtGte`` to ``createdAtLte`` (by default the last 7
days); the ``previousPeriod`` of a metric is the period of the same length
just before it. Message counts older than :data:`MAX_DAYS` days are not
kept, so a period (or its previous one) reaching further back counts only
the part within them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, get_args

from sqlalchemy.ext.asyncio import AsyncSession

from herald.analytics.repository import AnalyticsRepository, Count
from herald.analytics.service import ERROR, period_counts
from herald.kit.auth import Principal
from herald.kit.errors import BadRequestError
from herald.kit.time import utcnow
from herald.notifications.repository import NotificationRepository

# The report types of Novu's GET /v1/activity/charts, in its order (the route's query parameter takes these).
ReportType = Literal[
    "delivery-trend",
    "interaction-trend",
    "workflow-by-volume",
    "provider-by-volume",
    "messages-delivered",
    "active-subscribers",
    "avg-messages-per-subscriber",
    "workflow-runs-metric",
    "total-interactions",
    "workflow-runs-trend",
    "active-subscribers-trend",
    "workflow-runs-count",
]
REPORT_TYPES: tuple[str, ...] = get_args(ReportType)
MAX_DAYS = 30
DEFAULT_DAYS = 7
TOP = 10
# Herald's channel names -> the keys of Novu's delivery trend points.
CHANNEL_KEYS = {"in_app": "inApp", "email": "email", "sms": "sms", "chat": "chat", "push": "push"}


def _days(start: datetime, end: datetime) -> list[date]:
    first, last = start.astimezone(UTC).date(), end.astimezone(UTC).date()
    return [first + timedelta(days=offset) for offset in range((last - first).days + 1)]


def _in(count: Count, first: date, last: date) -> bool:
    return first.isoformat() <= count.period[:10] <= last.isoformat()


def _sent(counts: list[Count], first: date, last: date) -> int:
    return sum(count.messages for count in counts if count.status != ERROR and _in(count, first, last))


def _metric(current: float, previous: float) -> dict[str, float]:
    return {"currentPeriod": current, "previousPeriod": previous}


class _Charts:
    """One request's periods and what it read, each read at most once whatever report types ask for it."""

    def __init__(self, session: AsyncSession, principal: Principal, start: datetime, end: datetime) -> None:
        self.session = session
        self.principal = principal
        self.start, self.end = start, end
        self.previous_start = start - (end - start)
        self.counts: list[Count] | None = None
        self.subscribers_by_day: dict[str, int] = {}
        self.runs: dict[str, dict[str, int]] | None = None
        self.interactions: dict[str, dict[str, int]] | None = None

    @property
    def environment_id(self) -> str:
        return self.principal.environment_id

    async def message_counts(self) -> list[Count]:
        if self.counts is None:
            _, self.counts, self.subscribers_by_day = await period_counts(self.session, self.principal, MAX_DAYS)
        return self.counts

    async def run_days(self) -> dict[str, dict[str, int]]:
        if self.runs is None:
            self.runs = await NotificationRepository(self.session).runs_by_day(
                self.environment_id, self.previous_start, self.end
            )
        return self.runs

    async def interaction_days(self) -> dict[str, dict[str, int]]:
        if self.interactions is None:
            self.interactions = await AnalyticsRepository(self.session).interactions_by_day(
                self.environment_id, self.previous_start, self.end
            )
        return self.interactions

    def current_days(self) -> list[date]:
        return _days(self.start, self.end)

    def previous_days(self) -> tuple[date, date]:
        first = self.start.astimezone(UTC).date()
        length = len(self.current_days())
        return first - timedelta(days=length), first - timedelta(days=1)

    async def runs_in(self, first: date, last: date) -> Counter[str]:
        found: Counter[str] = Counter()
        for day, statuses in (await self.run_days()).items():
            if first.isoformat() <= day <= last.isoformat():
                found.update(statuses)
        return found

    async def interactions_in(self, first: date, last: date) -> int:
        return sum(
            sum(kinds.values())
            for day, kinds in (await self.interaction_days()).items()
            if first.isoformat() <= day <= last.isoformat()
        )

    async def report(self, report_type: str) -> Any:
        days = self.current_days()
        first, last = days[0], days[-1]
        previous_first, previous_last = self.previous_days()
        if report_type == "delivery-trend":
            per_day: dict[str, Counter[str]] = defaultdict(Counter)
            for count in await self.message_counts():
                if count.status != ERROR and _in(count, first, last) and count.channel in CHANNEL_KEYS:
                    per_day[count.period[:10]][CHANNEL_KEYS[count.channel]] += count.messages
            return [
                {"timestamp": day.isoformat(), **{key: per_day[day.isoformat()][key] for key in CHANNEL_KEYS.values()}}
                for day in days
            ]
        if report_type == "interaction-trend":
            interactions = await self.interaction_days()
            sent: Counter[str] = Counter()
            for count in await self.message_counts():
                if count.status != ERROR and _in(count, first, last):
                    sent[count.period[:10]] += count.messages
            return [
                {
                    "timestamp": day.isoformat(),
                    "messageSent": sent[day.isoformat()],
                    "messageSeen": interactions.get(day.isoformat(), {}).get("seen", 0),
                    "messageRead": interactions.get(day.isoformat(), {}).get("read", 0),
                    "messageSnoozed": 0,
                    "messageArchived": interactions.get(day.isoformat(), {}).get("archived", 0),
                }
                for day in days
            ]
        if report_type in ("workflow-by-volume", "provider-by-volume"):
            return await self.volumes(report_type, first, last)
        if report_type == "messages-delivered":
            counts = await self.message_counts()
            return _metric(_sent(counts, first, last), _sent(counts, previous_first, previous_last))
        if report_type in ("active-subscribers", "avg-messages-per-subscriber"):
            repository = AnalyticsRepository(self.session)
            current = await repository.distinct_subscribers(self.environment_id, self.start, self.end)
            previous = await repository.distinct_subscribers(self.environment_id, self.previous_start, self.start)
            if report_type == "active-subscribers":
                return _metric(current, previous)
            counts = await self.message_counts()
            return _metric(
                round(_sent(counts, first, last) / current, 2) if current else 0,
                round(_sent(counts, previous_first, previous_last) / previous, 2) if previous else 0,
            )
        if report_type in ("workflow-runs-metric", "workflow-runs-count"):
            current_runs = sum((await self.runs_in(first, last)).values())
            if report_type == "workflow-runs-count":
                return {"count": current_runs}
            return _metric(current_runs, sum((await self.runs_in(previous_first, previous_last)).values()))
        if report_type == "total-interactions":
            return _metric(
                await self.interactions_in(first, last), await self.interactions_in(previous_first, previous_last)
            )
        if report_type == "workflow-runs-trend":
            runs = await self.run_days()
            return [
                {
                    "timestamp": day.isoformat(),
                    "pending": runs.get(day.isoformat(), {}).get("pending", 0),
                    "success": runs.get(day.isoformat(), {}).get("completed", 0),
                    "error": runs.get(day.isoformat(), {}).get("failed", 0),
                }
                for day in days
            ]
        # active-subscribers-trend: the days the Analytics page counted (a day is counted once it ended).
        await self.message_counts()
        return [
            {"timestamp": day.isoformat(), "count": self.subscribers_by_day.get(day.isoformat(), 0)} for day in days
        ]

    async def volumes(self, report_type: str, first: date, last: date) -> list[dict[str, Any]]:
        if report_type == "workflow-by-volume":
            top = await NotificationRepository(self.session).runs_by_workflow(
                self.environment_id, self.start, self.end, TOP
            )
            names = await AnalyticsRepository(self.session).workflow_names(
                self.environment_id, [workflow_id for workflow_id, _ in top]
            )
            return [
                {"workflowName": names.get(workflow_id) or "(deleted workflow)", "count": count}
                for workflow_id, count in top
            ]
        by_provider: Counter[str] = Counter()
        for count in await self.message_counts():
            # In-app messages go through Novu's own in-app provider, "novu".
            provider_id = count.provider_id or ("novu" if count.channel == "in_app" else "")
            if _in(count, first, last) and provider_id:
                by_provider[provider_id] += count.messages
        return [
            {"providerId": provider_id, "count": count}
            for provider_id, count in sorted(by_provider.items(), key=lambda item: (-item[1], item[0]))[:TOP]
        ]


async def charts(
    session: AsyncSession,
    principal: Principal,
    report_types: list[str],
    created_gte: datetime | None,
    created_lte: datetime | None,
) -> dict[str, Any]:
    """Each asked report type's data, keyed by its name (``GetChartsResponseDto.data``)."""
    end = created_lte or utcnow()
    start = created_gte or end - timedelta(days=DEFAULT_DAYS)
    if start > end:
        raise BadRequestError(
            "Invalid date range: start date (createdAtGte) must be earlier than end date (createdAtLte)"
        )
    if (end - start) > timedelta(days=366):
        raise BadRequestError("The date range of a chart is at most 366 days")
    view = _Charts(session, principal, start, end)
    return {report_type: await view.report(report_type) for report_type in dict.fromkeys(report_types)}
