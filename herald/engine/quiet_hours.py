"""Quiet hours: the delivery schedule a subscriber sets in their global preference, applied to deliveries.

The schedule is Novu's (what @novu/js sends): ``{isEnabled, weeklySchedule:
{monday: {isEnabled, hours: [{start: "09:00 AM", end: "05:00 PM"}]}, ...}}``,
in the subscriber's ``timezone`` (UTC when they have none, or one Python does
not know). While it is enabled, a non-critical email, sms, chat or push step
is delivered only inside the hours of an enabled day; outside them the step is
held (a delayed job, so a restart loses nothing) until the next open hour.
An in_app step is not held: its message is stored at once, so it is listed
and counted whenever the subscriber opens the inbox; only its real-time
``notification_received`` waits for the next open hour, in a job written with
the message (herald.realtime.held), and is not sent if the subscriber read,
archived, snoozed or deleted the message meanwhile. The unseen and unread
count events go at once: the counts are true from the moment the message is
stored, and it is the alert, not a number in a badge, that interrupts.

Reading of the schedule, where Novu's client leaves it open:
- a day left out of ``weeklySchedule``, or not enabled, has no open hour;
- an enabled day without ``hours`` is open all day;
- a range is [start, end) in local time; an end at or before its start runs
  past midnight into the next day;
- an enabled schedule with no open hour at all holds nothing (a subscriber
  cannot ask never to be told, and the step would wait for ever).

Local times are turned into instants with zoneinfo: on the day clocks go
forward, a time that does not exist (02:30 in Europe/Paris) is read with the
offset before the change, as ``fold=0`` gives; a time that happens twice is its
first occurrence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_TIME = re.compile(r"^\s*(\d{1,2})(?::(\d{2}))?\s*([AaPp][Mm])?\s*$")
# How far ahead an open hour is looked for: a week and a day covers every weekly schedule.
_LOOKAHEAD_DAYS = 8


def zone_of(timezone: str | None) -> ZoneInfo:
    if timezone:
        try:
            return ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return ZoneInfo("UTC")


def parse_time(value: str) -> time:
    """``09:00``, ``9:00 AM``, ``9 PM`` or ``12:30 pm`` as a time of day (``12:00 AM`` is midnight)."""
    match = _TIME.match(value)
    if match is None or (match.group(2) is None and match.group(3) is None):
        raise ValueError(f"not a time of day: {value!r}")
    hour, minute, half = int(match.group(1)), int(match.group(2) or 0), (match.group(3) or "").lower()
    if half:
        if not 1 <= hour <= 12:
            raise ValueError(f"not a time of day: {value!r}")
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        raise ValueError(f"not a time of day: {value!r}")
    return time(hour, minute)


def _local(day: date, at: time, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, at, tzinfo=zone)


def _open_ranges(schedule: Mapping[str, Any], zone: ZoneInfo, around: datetime) -> Iterator[tuple[datetime, datetime]]:
    """The open ranges, as UTC instants, of the days from the day before ``around`` (local) on."""
    weekly = schedule.get("weeklySchedule") or {}
    first = around.astimezone(zone).date() - timedelta(days=1)
    for offset in range(_LOOKAHEAD_DAYS + 1):
        day = first + timedelta(days=offset)
        settings = weekly.get(DAYS[day.weekday()]) or {}
        if not settings.get("isEnabled"):
            continue
        hours = settings.get("hours") or [{"start": "00:00", "end": "00:00"}]
        for span in hours:
            try:
                start, end = parse_time(str(span.get("start"))), parse_time(str(span.get("end")))
            except (ValueError, AttributeError):
                continue
            opens = _local(day, start, zone)
            closes = _local(day + timedelta(days=1) if end <= start else day, end, zone)
            yield opens.astimezone(UTC), closes.astimezone(UTC)


def held_until(schedule: Mapping[str, Any] | None, timezone: str | None, now: datetime) -> datetime | None:
    """When a delivery due ``now`` may go: None when it may go now (or the schedule holds nothing)."""
    if not schedule or not schedule.get("isEnabled"):
        return None
    ranges = sorted(_open_ranges(schedule, zone_of(timezone), now))
    if not ranges:
        return None
    if any(opens <= now < closes for opens, closes in ranges):
        return None
    later = [opens for opens, _ in ranges if opens > now]
    return later[0] if later else None
