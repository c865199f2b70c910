"""What the Analytics page shows: an environment's messages over the last 7 or 30 days (UTC).

Messages are counted by ten minutes, workflow, channel, provider and status
(:class:`herald.models.AnalyticsCount`; a day that ended as one), and each
day's subscribers sent a message (:class:`herald.models.AnalyticsDay`). Ten
minutes are counted once, when they ended more than :data:`SETTLE` ago: a
failed step's retries are over by then (five attempts, within a minute by
default and 30 minutes at the longest delays, herald/engine/queue.py), so
the statuses no longer change. The minutes since are counted from the
messages at every view: a view reads the kept counts and half an hour or so
of messages, however many a month has. Kept counts stay when retention later
deletes the messages.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from herald.analytics.repository import AnalyticsRepository, Count
from herald.kit.auth import Principal
from herald.kit.time import utcnow

RANGES = (7, 30)
SETTLE = timedelta(minutes=30)
SLOT_MINUTES = 10
TOP_WORKFLOWS = 10
# A message whose step failed (herald/engine/steps/delivery.py).
ERROR = "error"


@dataclass
class ProviderErrors:
    provider_id: str
    messages: int
    errors: int

    @property
    def rate(self) -> float:
        """Errors per hundred messages."""
        return 100.0 * self.errors / self.messages if self.messages else 0.0


@dataclass
class WorkflowMessages:
    workflow_id: str
    name: str
    messages: int
    errors: int


@dataclass
class Analytics:
    """An environment's numbers over ``days`` days; every per-day list is in the order of ``days``."""

    days: list[date]
    channels: list[str]
    statuses: list[str]
    by_day_channel: dict[str, list[int]]
    by_day_status: dict[str, list[int]]
    by_channel_status: dict[str, dict[str, int]]
    top_workflows: list[WorkflowMessages]
    providers: list[ProviderErrors]
    # Days that ended and were counted: today's (and yesterday's, in its first half hour) come later.
    active_subscribers: dict[date, int]
    total: int
    errors: int


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _slot_key(moment: datetime) -> str:
    """"2026-11-29 07:1" for 07:10 to 07:20 (a slot's start)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")[:15]


def _slot_start(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return moment.replace(minute=moment.minute - moment.minute % SLOT_MINUTES, second=0, microsecond=0)


async def count_settled(repository: AnalyticsRepository, principal: Principal, moment: datetime) -> datetime:
    """Count and keep the slots that settled since the last count (at most the longest period's); how far counts are kept."""
    environment_id = principal.environment_id
    settled = _slot_start(moment - SETTLE)
    was = await repository.counted_until(environment_id)
    oldest = _midnight(moment.astimezone(UTC).date() - timedelta(days=max(RANGES) - 1))
    begin = max(was, oldest) if was is not None else oldest
    if begin >= settled:
        return was or begin
    counts = await repository.count_messages(environment_id, begin, settled)
    # The days that end within the minutes counted now: their subscribers are counted whole.
    first_day, end_of_days = _midnight(begin.date()), _midnight(settled.date())
    subscribers: dict[str, int] = {}
    if first_day < end_of_days:
        subscribers = {
            (first_day.date() + timedelta(days=offset)).isoformat(): 0 for offset in range((end_of_days - first_day).days)
        }
        subscribers.update(await repository.subscribers_by_day(environment_id, first_day, end_of_days))
    # A day that ended is kept as one count per workflow, channel, provider and status, not one per ten minutes.
    days = set(subscribers)
    sums: Counter[tuple[str, str, str, str, str]] = Counter()
    for count in [*counts, *await repository.slots_of_days(environment_id, sorted(days))]:
        period = count.period[:10] if count.period[:10] in days else count.period
        sums[(period, count.workflow_id, count.channel, count.provider_id, count.status)] += count.messages
    kept = [Count(*key, messages) for key, messages in sums.items()]
    if await repository.keep(
        environment_id, principal.organization_id, kept, subscribers, was=was, until=settled, fold_days=sorted(days)
    ):
        return settled
    # Another view kept them first (and has committed): its progress is the one to read from.
    return await repository.counted_until(environment_id) or begin


async def period_counts(
    session: AsyncSession, principal: Principal, days: int, *, now: datetime | None = None
) -> tuple[list[date], list[Count], dict[str, int]]:
    """The last ``days`` days (today included), their message counts (kept and since) and their days' subscribers."""
    repository = AnalyticsRepository(session)
    environment_id = principal.environment_id
    moment = now or utcnow()
    today = moment.astimezone(UTC).date()
    span = [today - timedelta(days=offset) for offset in range(days - 1, -1, -1)]
    start = _midnight(span[0])
    counted_until = max(await count_settled(repository, principal, moment), start)
    # A day's key ("2026-11-23") sorts before its slots' ("2026-11-23 00:0").
    counts = await repository.kept_counts(environment_id, span[0].isoformat(), _slot_key(counted_until))
    counts.extend(await repository.count_messages(environment_id, counted_until))
    subscribers = await repository.kept_days(environment_id, span[0].isoformat(), today.isoformat())
    return span, counts, subscribers


async def analytics(session: AsyncSession, principal: Principal, days: int, *, now: datetime | None = None) -> Analytics:
    """The numbers of the last ``days`` days (7 or 30), today included."""
    if days not in RANGES:
        raise ValueError(f"days must be one of {RANGES}")
    repository = AnalyticsRepository(session)
    environment_id = principal.environment_id
    span, counts, subscribers = await period_counts(session, principal, days, now=now)
    result = _summarize(span, counts, subscribers)
    names = await repository.workflow_names(environment_id, [item.workflow_id for item in result.top_workflows])
    for item in result.top_workflows:
        item.name = names.get(item.workflow_id) or ("(no workflow)" if not item.workflow_id else "(deleted workflow)")
    return result


def _summarize(span: list[date], counts: Iterable[Count], subscribers: dict[str, int]) -> Analytics:
    index = {day.isoformat(): position for position, day in enumerate(span)}
    by_day_channel: dict[str, list[int]] = defaultdict(lambda: [0] * len(span))
    by_day_status: dict[str, list[int]] = defaultdict(lambda: [0] * len(span))
    by_channel_status: dict[str, Counter[str]] = defaultdict(Counter)
    workflow_messages: Counter[str] = Counter()
    workflow_errors: Counter[str] = Counter()
    provider_messages: Counter[str] = Counter()
    provider_errors: Counter[str] = Counter()
    for count in counts:
        position = index.get(count.period[:10])
        if position is None:
            continue
        failed = count.messages if count.status == ERROR else 0
        by_day_channel[count.channel][position] += count.messages
        by_day_status[count.status][position] += count.messages
        by_channel_status[count.channel][count.status] += count.messages
        workflow_messages[count.workflow_id] += count.messages
        workflow_errors[count.workflow_id] += failed
        if count.provider_id:
            provider_messages[count.provider_id] += count.messages
            provider_errors[count.provider_id] += failed
    channels = sorted(by_day_channel)
    statuses = sorted(by_day_status)
    top = [
        WorkflowMessages(workflow_id, "", messages, workflow_errors[workflow_id])
        for workflow_id, messages in sorted(workflow_messages.items(), key=lambda item: (-item[1], item[0]))[:TOP_WORKFLOWS]
    ]
    providers = sorted(
        (ProviderErrors(provider, messages, provider_errors[provider]) for provider, messages in provider_messages.items()),
        key=lambda item: (-item.rate, -item.messages, item.provider_id),
    )
    return Analytics(
        days=span,
        channels=channels,
        statuses=statuses,
        by_day_channel={channel: by_day_channel[channel] for channel in channels},
        by_day_status={status: by_day_status[status] for status in statuses},
        by_channel_status={channel: dict(by_channel_status[channel]) for channel in channels},
        top_workflows=top,
        providers=providers,
        active_subscribers={day: subscribers[day.isoformat()] for day in span if day.isoformat() in subscribers},
        total=sum(workflow_messages.values()),
        errors=sum(workflow_errors.values()),
    )
