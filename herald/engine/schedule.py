"""When delayed and digested steps run: durations, scheduled delays and timed digests.

All results are aware UTC datetimes. Naive inputs are taken as UTC.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.relativedelta import relativedelta
from dateutil.rrule import DAILY, FR, HOURLY, MINUTELY, MO, MONTHLY, SA, SECONDLY, SU, TH, TU, WE, WEEKLY, rrule

from herald.engine.filters import MISSING, lookup
from herald.kit.time import parse_iso

__all__ = [
    "UNITS",
    "Duration",
    "ScheduleError",
    "add_duration",
    "delay_until",
    "duration",
    "next_timed_occurrence",
    "scheduled_delay_until",
    "subtract_duration",
]

UNITS = ("seconds", "minutes", "hours", "days", "weeks", "months")

_FIXED = {
    "seconds": timedelta(seconds=1),
    "minutes": timedelta(minutes=1),
    "hours": timedelta(hours=1),
    "days": timedelta(days=1),
    "weeks": timedelta(weeks=1),
}


class ScheduleError(ValueError):
    """A delay or digest that cannot be scheduled; the message says why."""


# --------------------------------------------------------------------------- durations


@dataclass(frozen=True)
class Duration:
    """``amount`` ``unit``s. Seconds to weeks are elapsed time; months are calendar months."""

    amount: int | float
    unit: str

    @property
    def fixed(self) -> timedelta | None:
        """The length as a timedelta, or None for months (their length depends on the start)."""
        step = _FIXED.get(self.unit)
        return step * self.amount if step is not None else None

    def after(self, start: datetime) -> datetime:
        return add_duration(start, self.amount, self.unit)


def duration(amount: Any, unit: Any) -> Duration:
    """Validate a step's ``amount`` and ``unit`` (seconds, minutes, hours, days, weeks, months).

    ``amount`` is a non-negative number (a numeric string is accepted); months need
    a whole number.
    """
    if unit not in UNITS:
        raise ScheduleError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    if isinstance(amount, str):
        try:
            amount = float(amount.strip()) if amount.strip() else None
        except ValueError:
            raise ScheduleError(f"amount must be a number, got {amount!r}") from None
    if isinstance(amount, bool) or not isinstance(amount, int | float) or not math.isfinite(amount):
        raise ScheduleError(f"amount must be a number, got {amount!r}")
    if amount < 0:
        raise ScheduleError(f"amount must not be negative, got {amount}")
    if isinstance(amount, float) and amount.is_integer():
        amount = int(amount)
    if unit == "months" and not isinstance(amount, int):
        raise ScheduleError(f"amount of months must be a whole number, got {amount}")
    return Duration(amount, unit)


def add_duration(start: datetime, amount: Any, unit: Any) -> datetime:
    """``start`` + ``amount`` ``unit``, in UTC.

    Seconds, minutes, hours, days (24 h) and weeks (7 × 24 h) are exact elapsed
    time. Months are calendar months on ``start``'s own calendar (its time zone
    when it carries one, else UTC), keeping the time of day and clamping the day
    to the end of shorter months: Jan 31 + 1 month = Feb 29 (leap year) or 28.
    """
    return _shift(start, duration(amount, unit), 1)


def subtract_duration(start: datetime, amount: Any, unit: Any) -> datetime:
    """``start`` − ``amount`` ``unit``, in UTC: the start of a look-back window such as a
    digest's backoff. Same rules as :func:`add_duration` (Mar 31 − 1 month = Feb 28/29)."""
    return _shift(start, duration(amount, unit), -1)


def _shift(start: datetime, span: Duration, sign: int) -> datetime:
    start = _aware(start)
    try:
        if span.fixed is not None:
            return start.astimezone(UTC) + sign * span.fixed
        return (start + relativedelta(months=sign * int(span.amount))).astimezone(UTC)
    except OverflowError:
        direction = "after" if sign > 0 else "before"
        raise ScheduleError(f"{span.amount} {span.unit} {direction} {start.isoformat()} is out of range") from None


# --------------------------------------------------------------------------- delays


def scheduled_delay_until(payload: Mapping[str, Any] | None, delay_path: Any, now: datetime) -> datetime:
    """The moment a scheduled delay ends: the ISO 8601 date-time at ``payload[delay_path]``.

    ``delay_path`` is a dotted path (``sendAt``, ``reminder.at``). A value without
    a zone is UTC; a bare date means midnight UTC. Raises :class:`ScheduleError`
    when the path is empty or missing, the value is not an ISO 8601 date, or the
    date is before ``now`` (a date equal to ``now`` ends the delay at once).
    """
    if not isinstance(delay_path, str) or not delay_path.strip():
        raise ScheduleError("Delay path is required for scheduled delay")
    path = delay_path.strip()
    value = lookup(payload or {}, path)
    where = f"payload.{path}"
    if value is MISSING or value is None:
        raise ScheduleError(f"{where} is missing: the scheduled delay needs an ISO 8601 date there")
    if isinstance(value, datetime):
        moment = _aware(value).astimezone(UTC)
    elif isinstance(value, str):
        try:
            moment = parse_iso(value)
        except ValueError:
            raise ScheduleError(f"{where} must be an ISO 8601 date, got {value!r}") from None
    else:
        raise ScheduleError(f"{where} must be an ISO 8601 date string, got {value!r}")
    now = _aware(now).astimezone(UTC)
    if moment < now:
        raise ScheduleError(f"{where} ({value}) is in the past")
    return moment


def delay_until(metadata: Mapping[str, Any], payload: Mapping[str, Any] | None, now: datetime) -> datetime:
    """The end of a delay step: ``regular`` (amount + unit after ``now``) or ``scheduled`` (delayPath)."""
    kind = metadata.get("type") or "regular"
    if kind == "scheduled":
        return scheduled_delay_until(payload, metadata.get("delayPath"), now)
    if kind == "regular":
        return add_duration(now, metadata.get("amount"), metadata.get("unit"))
    raise ScheduleError(f"delay type must be regular or scheduled, got {kind!r}")


# --------------------------------------------------------------------------- timed digests

_FREQUENCY = {
    "seconds": SECONDLY,
    "minutes": MINUTELY,
    "hours": HOURLY,
    "days": DAILY,
    "weeks": WEEKLY,
    "months": MONTHLY,
}
_WEEKDAYS = {
    "monday": MO,
    "tuesday": TU,
    "wednesday": WE,
    "thursday": TH,
    "friday": FR,
    "saturday": SA,
    "sunday": SU,
}
_ORDINAL_DAYS = {
    "weekday": (MO, TU, WE, TH, FR),
    "weekend": (SA, SU),
    **{name: (day,) for name, day in _WEEKDAYS.items()},
}
_AT_TIME = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_SEARCH_HORIZON_YEARS = 5


def next_timed_occurrence(
    timed: Mapping[str, Any] | None,
    unit: str,
    amount: Any,
    now: datetime,
    timezone: str | None = None,
) -> datetime:
    """The end of a timed digest: the first scheduled time strictly after ``now``, in UTC.

    The schedule is an iCalendar recurrence (the same rule Novu builds with
    rrule) starting at ``now`` in ``timezone`` (an IANA name such as
    ``Europe/Paris``; None means UTC):

    * ``unit`` (seconds … months) is the frequency and ``amount`` (default 1) the
      interval, counted from ``now``'s period: ``weeks``/2 means this week, then
      every second week.
    * ``atTime`` ``"HH:MM"`` or ``"HH:MM:SS"`` (local time) fixes the time of day;
      without it the time of day of ``now`` is kept.
    * ``monthlyType`` ``each`` (default): ``weekDays`` (monday … sunday) and
      ``monthDays`` (``"1"`` … ``"31"``, or ``"-1"`` for the last day) restrict the
      days; a day that a month lacks (the 31st in April) is skipped, not moved.
    * ``monthlyType`` ``on``: ``ordinal`` (1 … 5 or ``last``) and ``ordinalValue``:
      ``day`` (the n-th / last day of the month), ``weekday`` (Mon–Fri),
      ``weekend`` (Sat/Sun) or a day name (``last`` + ``friday`` = the last Friday).
      ``weekDays``/``monthDays`` are ignored then.

    Examples: days/1 at 09:00 → the next 09:00; weeks/1 on monday+friday at
    10:30 → the next of those; months/1 ``each`` on 1 and 15; months/1 ``on``
    last friday.

    Times are wall-clock times in ``timezone``. A time that does not exist
    (skipped by a DST change) is moved forward by the size of the gap (02:30 →
    03:30); a time that happens twice is its first occurrence unless that one has
    already passed. Seconds/minutes/hours without any day or time restriction
    run on elapsed time (a 30-minute digest is 30 minutes even across a DST
    change). Raises :class:`ScheduleError` for invalid settings or when no time
    matches within five years.
    """
    if unit not in _FREQUENCY:
        raise ScheduleError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    if timed is None:
        timed = {}
    if not isinstance(timed, Mapping):
        raise ScheduleError("timed must be an object")
    interval = _interval(amount)
    zone = _zone(timezone)
    now = _aware(now).astimezone(UTC)

    rule_fields: dict[str, Any] = {}
    at_time = timed.get("atTime")
    if at_time not in (None, ""):
        hour, minute, second = _at_time(at_time)
        rule_fields.update(byhour=hour, byminute=minute, bysecond=second)
    monthly_type = timed.get("monthlyType") or "each"
    if monthly_type == "each":
        week_days = _week_days(timed.get("weekDays"))
        month_days = _month_days(timed.get("monthDays"))
        if week_days:
            rule_fields["byweekday"] = week_days
        if month_days:
            rule_fields["bymonthday"] = month_days
    elif monthly_type == "on":
        position = _ordinal(timed.get("ordinal"))
        value = timed.get("ordinalValue")
        if value == "day":
            rule_fields["bymonthday"] = position
        elif isinstance(value, str) and value in _ORDINAL_DAYS:
            rule_fields.update(bysetpos=position, byweekday=_ORDINAL_DAYS[value])
        else:
            choices = ", ".join(["day", "weekday", "weekend", *_WEEKDAYS])
            raise ScheduleError(f"ordinalValue must be one of {choices}, got {value!r}")
    else:
        raise ScheduleError(f"monthlyType must be each or on, got {monthly_type!r}")

    if unit in ("seconds", "minutes", "hours") and not rule_fields:
        zone = UTC
    local_now = now.astimezone(zone).replace(tzinfo=None, microsecond=0)
    start = local_now
    repeated = _instants(local_now, zone)
    if len(repeated) == 2:
        # In the first pass of a repeated hour the second pass of earlier wall times is still ahead.
        start = local_now - (repeated[1] - repeated[0])
    try:
        until = local_now + relativedelta(years=_SEARCH_HORIZON_YEARS)
        rule = rrule(_FREQUENCY[unit], interval=interval, dtstart=start, until=until, **rule_fields)
    except (ValueError, OverflowError) as err:
        raise ScheduleError(f"invalid timed digest settings: {err}") from None
    for candidate in rule:
        later = [moment for moment in _instants(candidate, zone) if moment > now]
        if later:
            return min(later)
    raise ScheduleError(f"the timed digest settings match no time in the next {_SEARCH_HORIZON_YEARS} years")


def _instants(wall_time: datetime, zone: tzinfo) -> list[datetime]:
    """The UTC instants showing ``wall_time`` in ``zone``: one, two (DST fall-back) or, for a
    time skipped by DST, the instant the same distance past the gap (02:30 → 03:30)."""
    instants = []
    for fold in (0, 1):
        instant = wall_time.replace(tzinfo=zone, fold=fold).astimezone(UTC)
        if instant.astimezone(zone).replace(tzinfo=None) == wall_time and instant not in instants:
            instants.append(instant)
    if not instants:
        # fold=0 reads a skipped time with the offset in force before the change.
        instants.append(wall_time.replace(tzinfo=zone, fold=0).astimezone(UTC))
    return instants


def _interval(amount: Any) -> int:
    if amount is None or amount == "":
        return 1
    if isinstance(amount, str) and amount.strip().isdigit():
        amount = int(amount.strip())
    if isinstance(amount, float) and amount.is_integer():
        amount = int(amount)
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
        raise ScheduleError(f"amount must be a whole number of at least 1, got {amount!r}")
    return amount


def _zone(timezone: str | None) -> tzinfo:
    if timezone is None or timezone == "":
        return UTC
    if not isinstance(timezone, str):
        raise ScheduleError(f"timezone must be an IANA time zone name, got {timezone!r}")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {timezone!r}") from None


def _at_time(value: Any) -> tuple[int, int, int]:
    match = _AT_TIME.match(value.strip()) if isinstance(value, str) else None
    if match:
        hour, minute, second = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
        if hour < 24 and minute < 60 and second < 60:
            return hour, minute, second
    raise ScheduleError(f"atTime must be a time of day HH:MM or HH:MM:SS, got {value!r}")


def _week_days(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScheduleError("weekDays must be a list of day names")
    days = []
    for name in value:
        day = _WEEKDAYS.get(name.strip().lower()) if isinstance(name, str) else None
        if day is None:
            raise ScheduleError(f"weekDays must name days monday … sunday, got {name!r}")
        days.append(day)
    return days


def _month_days(value: Any) -> list[int]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScheduleError("monthDays must be a list of days of the month")
    days = []
    for item in value:
        day: int | None = None
        if isinstance(item, int) and not isinstance(item, bool):
            day = item
        elif isinstance(item, str) and re.fullmatch(r"-?\d{1,2}", item.strip()):
            day = int(item.strip())
        if day is None or day == 0 or not -31 <= day <= 31:
            raise ScheduleError(f"monthDays must be days 1 … 31 (or -1 for the last day), got {item!r}")
        days.append(day)
    return days


def _ordinal(value: Any) -> int:
    if value == "last":
        return -1
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 5:
        return value
    raise ScheduleError(f"ordinal must be 1 … 5 or last, got {value!r}")


def _aware(moment: datetime) -> datetime:
    if not isinstance(moment, datetime):
        raise ScheduleError(f"expected a datetime, got {type(moment).__name__}")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
