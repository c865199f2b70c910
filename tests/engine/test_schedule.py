from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from herald.engine.schedule import (
    Duration,
    ScheduleError,
    add_duration,
    delay_until,
    duration,
    next_timed_occurrence,
    scheduled_delay_until,
    subtract_duration,
)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


NOW = utc("2023-05-04T12:00:00Z")  # a Thursday


# --------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("amount", "unit", "expected"),
    [
        (30, "seconds", "2023-05-04T12:00:30Z"),
        (5, "minutes", "2023-05-04T12:05:00Z"),
        (2, "hours", "2023-05-04T14:00:00Z"),
        (3, "days", "2023-05-07T12:00:00Z"),
        (2, "weeks", "2023-05-18T12:00:00Z"),
        (1, "months", "2023-06-04T12:00:00Z"),
        (12, "months", "2024-05-04T12:00:00Z"),
        (0, "hours", "2023-05-04T12:00:00Z"),
        (1.5, "hours", "2023-05-04T13:30:00Z"),
        ("2", "days", "2023-05-06T12:00:00Z"),
    ],
)
def test_add_duration_each_unit(amount: Any, unit: str, expected: str) -> None:
    assert add_duration(NOW, amount, unit) == utc(expected)


@pytest.mark.parametrize(
    ("start", "months", "expected"),
    [
        ("2024-01-31T10:00:00Z", 1, "2024-02-29T10:00:00Z"),  # leap year
        ("2023-01-31T10:00:00Z", 1, "2023-02-28T10:00:00Z"),
        ("2023-03-31T10:00:00Z", 1, "2023-04-30T10:00:00Z"),
        ("2023-08-31T10:00:00Z", 6, "2024-02-29T10:00:00Z"),
        ("2023-12-15T10:00:00Z", 1, "2024-01-15T10:00:00Z"),
    ],
)
def test_months_are_calendar_months_clamped_to_month_end(start: str, months: int, expected: str) -> None:
    assert add_duration(utc(start), months, "months") == utc(expected)


def test_days_are_elapsed_time_but_months_keep_local_time_of_day() -> None:
    paris = ZoneInfo("Europe/Paris")
    before_dst = datetime(2024, 3, 30, 9, 0, tzinfo=paris)  # DST starts 2024-03-31
    assert add_duration(before_dst, 1, "days") == before_dst.astimezone(UTC) + timedelta(hours=24)
    assert add_duration(before_dst, 1, "days").astimezone(paris).hour == 10
    month_later = add_duration(before_dst, 1, "months")
    assert month_later.astimezone(paris) == datetime(2024, 4, 30, 9, 0, tzinfo=paris)
    assert month_later.tzinfo == UTC


def test_subtract_duration_for_look_back_windows() -> None:
    assert subtract_duration(NOW, 5, "minutes") == utc("2023-05-04T11:55:00Z")
    assert subtract_duration(NOW, 1, "weeks") == utc("2023-04-27T12:00:00Z")
    assert subtract_duration(utc("2023-03-31T10:00:00Z"), 1, "months") == utc("2023-02-28T10:00:00Z")
    with pytest.raises(ScheduleError, match="amount must not be negative"):
        subtract_duration(NOW, -5, "minutes")


def test_naive_start_is_utc() -> None:
    assert add_duration(datetime(2023, 5, 4, 12), 1, "hours") == utc("2023-05-04T13:00:00Z")


def test_duration_object() -> None:
    assert duration(2, "hours") == Duration(2, "hours")
    assert duration(2, "hours").fixed == timedelta(hours=2)
    assert duration(3.0, "months").amount == 3
    assert duration(1, "months").fixed is None
    assert duration(1, "months").after(utc("2023-01-31T00:00:00Z")) == utc("2023-02-28T00:00:00Z")


@pytest.mark.parametrize(
    ("amount", "unit", "message"),
    [
        (1, "fortnights", "unit must be one of seconds, minutes, hours, days, weeks, months, got 'fortnights'"),
        (1, None, "unit must be one of"),
        (-1, "days", "amount must not be negative, got -1"),
        ("soon", "days", "amount must be a number, got 'soon'"),
        (True, "days", "amount must be a number, got True"),
        (None, "days", "amount must be a number, got None"),
        (float("inf"), "days", "amount must be a number"),
        (1.5, "months", "amount of months must be a whole number, got 1.5"),
    ],
)
def test_duration_rejects_bad_input(amount: Any, unit: Any, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        duration(amount, unit)
    assert message in str(caught.value)


def test_add_duration_out_of_range() -> None:
    with pytest.raises(ScheduleError, match="out of range"):
        add_duration(NOW, 10**9, "weeks")


# --------------------------------------------------------------------------- scheduled delays


def test_scheduled_delay_reads_the_payload_path() -> None:
    payload = {"sendAt": "2023-05-05T09:30:00.000Z", "reminder": {"at": "2023-05-06T10:00:00+02:00"}}
    assert scheduled_delay_until(payload, "sendAt", NOW) == utc("2023-05-05T09:30:00Z")
    assert scheduled_delay_until(payload, "reminder.at", NOW) == utc("2023-05-06T08:00:00Z")


def test_scheduled_delay_accepts_naive_dates_as_utc_and_now_itself() -> None:
    assert scheduled_delay_until({"at": "2023-05-05T09:30:00"}, "at", NOW) == utc("2023-05-05T09:30:00Z")
    assert scheduled_delay_until({"at": "2023-05-06"}, "at", NOW) == utc("2023-05-06T00:00:00Z")
    assert scheduled_delay_until({"at": "2023-05-04T12:00:00Z"}, "at", NOW) == NOW
    assert scheduled_delay_until({"at": datetime(2023, 5, 5, tzinfo=UTC)}, "at", NOW) == utc("2023-05-05T00:00:00Z")


@pytest.mark.parametrize(
    ("payload", "path", "message"),
    [
        ({"sendAt": "2023-05-05T09:30:00Z"}, "", "Delay path is required for scheduled delay"),
        ({"sendAt": "2023-05-05T09:30:00Z"}, None, "Delay path is required for scheduled delay"),
        ({}, "sendAt", "payload.sendAt is missing: the scheduled delay needs an ISO 8601 date there"),
        ({"sendAt": None}, "sendAt", "payload.sendAt is missing"),
        ({"a": {}}, "a.b", "payload.a.b is missing"),
        ({"sendAt": "tomorrow"}, "sendAt", "payload.sendAt must be an ISO 8601 date, got 'tomorrow'"),
        ({"sendAt": "2023-13-45T00:00:00Z"}, "sendAt", "payload.sendAt must be an ISO 8601 date"),
        ({"sendAt": 1683200000}, "sendAt", "payload.sendAt must be an ISO 8601 date string, got 1683200000"),
        ({"sendAt": "2023-05-04T11:59:59Z"}, "sendAt", "payload.sendAt (2023-05-04T11:59:59Z) is in the past"),
    ],
)
def test_scheduled_delay_errors(payload: dict[str, Any], path: Any, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        scheduled_delay_until(payload, path, NOW)
    assert message in str(caught.value)


def test_delay_until_dispatches_on_type() -> None:
    assert delay_until({"type": "regular", "amount": 2, "unit": "hours"}, {}, NOW) == utc("2023-05-04T14:00:00Z")
    assert delay_until({"amount": 1, "unit": "days"}, {}, NOW) == utc("2023-05-05T12:00:00Z")
    scheduled = {"type": "scheduled", "delayPath": "at"}
    assert delay_until(scheduled, {"at": "2023-06-01T00:00:00Z"}, NOW) == utc("2023-06-01T00:00:00Z")
    with pytest.raises(ScheduleError, match="delay type must be regular or scheduled, got 'timed'"):
        delay_until({"type": "timed"}, {}, NOW)
    with pytest.raises(ScheduleError, match="Delay path is required"):
        delay_until({"type": "scheduled"}, {}, NOW)


# --------------------------------------------------------------------------- timed digests


def nxt(timed: dict[str, Any] | None, unit: str, amount: Any, now: str, timezone: str | None = None) -> datetime:
    return next_timed_occurrence(timed, unit, amount, utc(now), timezone)


def test_minutes_and_hours_repeat_from_now() -> None:
    assert nxt(None, "minutes", 1, "2023-05-04T12:00:00Z") == utc("2023-05-04T12:01:00Z")
    assert nxt({}, "minutes", 7, "2023-05-04T12:00:00Z") == utc("2023-05-04T12:07:00Z")
    assert nxt(None, "hours", 10, "2023-05-04T12:00:00Z") == utc("2023-05-04T22:00:00Z")
    # Sub-second parts are dropped from the schedule, never from "strictly after now".
    assert nxt(None, "minutes", 1, "2023-05-04T12:00:30.250Z") == utc("2023-05-04T12:01:30Z")


def test_days_at_time() -> None:
    assert nxt({"atTime": "09:00"}, "days", 1, "2023-05-04T08:00:00Z") == utc("2023-05-04T09:00:00Z")
    assert nxt({"atTime": "09:00"}, "days", 1, "2023-05-04T09:00:00Z") == utc("2023-05-05T09:00:00Z")
    assert nxt({"atTime": "09:00"}, "days", 1, "2023-05-04T12:00:00Z") == utc("2023-05-05T09:00:00Z")
    assert nxt({"atTime": "01:00:00"}, "days", 4, "2023-05-04T12:00:00Z") == utc("2023-05-08T01:00:00Z")
    assert nxt({"atTime": "23:59:30"}, "days", 1, "2023-05-04T12:00:00Z") == utc("2023-05-04T23:59:30Z")


def test_days_without_at_time_keep_the_time_of_day() -> None:
    assert nxt(None, "days", 1, "2023-05-04T12:34:56Z") == utc("2023-05-05T12:34:56Z")


def test_weeks_on_week_days() -> None:
    timed = {"atTime": "10:30", "weekDays": ["monday", "friday"]}
    assert nxt(timed, "weeks", 1, "2023-05-04T12:00:00Z") == utc("2023-05-05T10:30:00Z")  # Thu → Fri
    assert nxt(timed, "weeks", 1, "2023-05-05T10:30:00Z") == utc("2023-05-08T10:30:00Z")  # Fri → Mon
    assert nxt(timed, "weeks", 1, "2023-05-08T09:00:00Z") == utc("2023-05-08T10:30:00Z")  # Mon, before time
    # Every second week: the rest of this week, then the week after next.
    assert nxt(timed, "weeks", 2, "2023-05-05T11:00:00Z") == utc("2023-05-15T10:30:00Z")
    assert nxt({"atTime": "10:30", "weekDays": ["Monday"]}, "weeks", 1, "2023-05-04T12:00:00Z") == utc(
        "2023-05-08T10:30:00Z"
    )


def test_weeks_without_week_days_use_the_current_week_day() -> None:
    assert nxt({"atTime": "09:00:00"}, "weeks", 2, "2023-05-04T00:00:00Z") == utc("2023-05-04T09:00:00Z")
    assert nxt({"atTime": "09:00:00"}, "weeks", 2, "2023-05-04T10:00:00Z") == utc("2023-05-18T09:00:00Z")


def test_week_days_restrict_days() -> None:
    timed = {"atTime": "08:00", "weekDays": ["saturday", "sunday"]}
    assert nxt(timed, "days", 1, "2023-05-04T12:00:00Z") == utc("2023-05-06T08:00:00Z")


def test_months_each_on_month_days() -> None:
    timed = {"atTime": "12:00", "monthlyType": "each", "monthDays": ["1", "15"]}
    assert nxt(timed, "months", 1, "2023-05-03T00:00:00Z") == utc("2023-05-15T12:00:00Z")
    assert nxt(timed, "months", 1, "2023-05-15T12:00:00Z") == utc("2023-06-01T12:00:00Z")
    assert nxt(timed, "months", 1, "2023-05-01T00:00:00Z") == utc("2023-05-01T12:00:00Z")
    assert nxt(timed, "months", 3, "2023-05-20T00:00:00Z") == utc("2023-08-01T12:00:00Z")


def test_months_skip_days_a_month_lacks_and_minus_one_is_the_last_day() -> None:
    assert nxt({"atTime": "09:00", "monthDays": ["31"]}, "months", 1, "2023-04-02T00:00:00Z") == utc(
        "2023-05-31T09:00:00Z"
    )
    assert nxt({"atTime": "09:00", "monthDays": ["-1"]}, "months", 1, "2023-04-02T00:00:00Z") == utc(
        "2023-04-30T09:00:00Z"
    )
    assert nxt({"atTime": "09:00", "monthDays": [29]}, "months", 1, "2023-02-01T00:00:00Z") == utc(
        "2023-03-29T09:00:00Z"
    )


def test_months_without_month_days_use_the_current_day() -> None:
    assert nxt({"atTime": "12:00:00"}, "months", 3, "2023-05-03T00:00:00Z") == utc("2023-05-03T12:00:00Z")
    assert nxt({"atTime": "12:00:00"}, "months", 3, "2023-05-03T13:00:00Z") == utc("2023-08-03T12:00:00Z")


@pytest.mark.parametrize(
    ("ordinal", "value", "now", "expected"),
    [
        ("1", "day", "2023-05-04T12:00:00Z", "2023-06-01T12:00:00Z"),
        ("2", "day", "2023-05-04T12:00:00Z", "2023-06-02T12:00:00Z"),
        ("last", "day", "2023-06-01T12:00:00Z", "2023-06-30T12:00:00Z"),
        ("1", "weekday", "2023-07-01T12:00:00Z", "2023-07-03T12:00:00Z"),
        ("2", "weekday", "2023-07-01T12:00:00Z", "2023-07-04T12:00:00Z"),
        ("last", "weekday", "2023-07-01T12:00:00Z", "2023-07-31T12:00:00Z"),
        ("1", "weekend", "2023-06-01T12:00:00Z", "2023-06-03T12:00:00Z"),
        ("2", "weekend", "2023-06-01T12:00:00Z", "2023-06-04T12:00:00Z"),
        ("last", "weekend", "2023-06-01T12:00:00Z", "2023-06-25T12:00:00Z"),
        ("1", "wednesday", "2023-06-01T12:00:00Z", "2023-06-07T12:00:00Z"),
        (2, "sunday", "2023-06-01T12:00:00Z", "2023-06-11T12:00:00Z"),
        ("last", "saturday", "2023-06-01T12:00:00Z", "2023-06-24T12:00:00Z"),
        ("last", "friday", "2023-06-30T12:00:00Z", "2023-07-28T12:00:00Z"),
        ("5", "monday", "2023-06-01T12:00:00Z", "2023-07-31T12:00:00Z"),  # June 2023 has four Mondays
    ],
)
def test_months_on_ordinal(ordinal: Any, value: str, now: str, expected: str) -> None:
    timed = {"atTime": "12:00:00", "monthlyType": "on", "ordinal": ordinal, "ordinalValue": value}
    assert nxt(timed, "months", 1, now) == utc(expected)


def test_months_on_ignores_month_days() -> None:
    timed = {"atTime": "12:00", "monthlyType": "on", "ordinal": "last", "ordinalValue": "friday", "monthDays": ["1"]}
    assert nxt(timed, "months", 1, "2023-06-01T00:00:00Z") == utc("2023-06-30T12:00:00Z")


def test_time_zone_moves_the_local_time() -> None:
    # 09:00 in Tokyo (UTC+9) is 00:00 UTC.
    assert nxt({"atTime": "09:00"}, "days", 1, "2023-05-04T12:00:00Z", "Asia/Tokyo") == utc("2023-05-05T00:00:00Z")
    # Week days are local days: Friday 08:00 in Auckland (UTC+12) is Thursday 20:00 UTC.
    timed = {"atTime": "08:00", "weekDays": ["friday"]}
    assert nxt(timed, "weeks", 1, "2023-05-04T12:00:00Z", "Pacific/Auckland") == utc("2023-05-04T20:00:00Z")
    # Month days are local days too.
    timed = {"atTime": "00:30", "monthDays": ["1"]}
    assert nxt(timed, "months", 1, "2023-05-15T00:00:00Z", "America/Los_Angeles") == utc("2023-06-01T07:30:00Z")


def test_dst_change_keeps_wall_clock_time() -> None:
    # New York moves from UTC-5 to UTC-4 on 2024-03-10.
    assert nxt({"atTime": "09:00"}, "days", 1, "2024-03-09T15:00:00Z", "America/New_York") == utc(
        "2024-03-10T13:00:00Z"
    )
    assert nxt({"atTime": "09:00"}, "days", 1, "2024-03-10T14:00:00Z", "America/New_York") == utc(
        "2024-03-11T13:00:00Z"
    )


def test_time_skipped_by_dst_moves_forward_by_the_gap() -> None:
    # 02:30 does not exist in New York on 2024-03-10; it becomes 03:30 EDT (07:30 UTC).
    assert nxt({"atTime": "02:30"}, "days", 1, "2024-03-09T17:00:00Z", "America/New_York") == utc(
        "2024-03-10T07:30:00Z"
    )
    assert nxt({"atTime": "02:30"}, "days", 1, "2024-03-10T08:00:00Z", "America/New_York") == utc(
        "2024-03-11T06:30:00Z"
    )


def test_time_repeated_by_dst() -> None:
    # 01:30 happens twice in New York on 2024-11-03: 05:30 UTC (EDT) and 06:30 UTC (EST).
    timed = {"atTime": "01:30"}
    assert nxt(timed, "days", 1, "2024-11-03T04:00:00Z", "America/New_York") == utc("2024-11-03T05:30:00Z")
    assert nxt(timed, "days", 1, "2024-11-03T05:45:00Z", "America/New_York") == utc("2024-11-03T06:30:00Z")
    assert nxt(timed, "days", 1, "2024-11-03T06:45:00Z", "America/New_York") == utc("2024-11-04T06:30:00Z")


def test_sub_day_units_with_day_restrictions_use_local_time() -> None:
    # Every 30 minutes on Sundays in New York; at 01:10 EST (second pass) the next is 01:40 EST.
    timed = {"weekDays": ["sunday"]}
    assert nxt(timed, "minutes", 30, "2024-11-03T06:10:00Z", "America/New_York") == utc("2024-11-03T06:40:00Z")
    # Saturday 23:50 local: the next slot is Sunday 00:00 local.
    assert nxt(timed, "minutes", 10, "2024-06-02T03:50:00Z", "America/New_York") == utc("2024-06-02T04:00:00Z")


def test_sub_day_units_without_restrictions_use_elapsed_time() -> None:
    # 01:50 EDT + 30 min is 01:20 EST: 30 minutes later, not 90.
    assert nxt(None, "minutes", 30, "2024-11-03T05:50:00Z", "America/New_York") == utc("2024-11-03T06:20:00Z")
    assert nxt(None, "hours", 1, "2024-03-10T06:30:00Z", "America/New_York") == utc("2024-03-10T07:30:00Z")


def test_no_time_zone_means_utc_and_naive_now_is_utc() -> None:
    assert next_timed_occurrence({"atTime": "09:00"}, "days", 1, datetime(2023, 5, 4, 12), None) == utc(
        "2023-05-05T09:00:00Z"
    )
    assert next_timed_occurrence({"atTime": "09:00"}, "days", 1, datetime(2023, 5, 4, 12), "") == utc(
        "2023-05-05T09:00:00Z"
    )


def test_result_is_always_strictly_after_now_in_utc() -> None:
    now = utc("2023-05-04T12:00:00Z")
    for unit in ("minutes", "hours", "days", "weeks", "months"):
        for zone in (None, "Asia/Kolkata", "America/St_Johns"):
            result = next_timed_occurrence({"atTime": "12:00"}, unit, 1, now, zone)
            assert result > now
            assert result.tzinfo == UTC


@pytest.mark.parametrize(
    ("timed", "unit", "amount", "timezone", "message"),
    [
        (None, "years", 1, None, "unit must be one of"),
        (None, "days", 0, None, "amount must be a whole number of at least 1, got 0"),
        (None, "days", 1.5, None, "amount must be a whole number of at least 1, got 1.5"),
        (None, "days", 1, "Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
        (None, "days", 1, "../etc/passwd", "unknown time zone"),
        ({"atTime": "25:00"}, "days", 1, None, "atTime must be a time of day HH:MM or HH:MM:SS, got '25:00'"),
        ({"atTime": "9am"}, "days", 1, None, "atTime must be a time of day"),
        ({"weekDays": ["funday"]}, "weeks", 1, None, "weekDays must name days monday … sunday, got 'funday'"),
        ({"weekDays": "monday"}, "weeks", 1, None, "weekDays must be a list of day names"),
        ({"monthDays": ["32"]}, "months", 1, None, "monthDays must be days 1 … 31 (or -1 for the last day), got '32'"),
        ({"monthDays": ["0"]}, "months", 1, None, "monthDays must be days 1 … 31"),
        ({"monthlyType": "every"}, "months", 1, None, "monthlyType must be each or on, got 'every'"),
        ({"monthlyType": "on", "ordinalValue": "day"}, "months", 1, None, "ordinal must be 1 … 5 or last, got None"),
        ({"monthlyType": "on", "ordinal": "6", "ordinalValue": "day"}, "months", 1, None, "ordinal must be 1 … 5"),
        ({"monthlyType": "on", "ordinal": "1"}, "months", 1, None, "ordinalValue must be one of day, weekday"),
        ("09:00", "days", 1, None, "timed must be an object"),
    ],
)
def test_timed_settings_errors(timed: Any, unit: str, amount: Any, timezone: Any, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        next_timed_occurrence(timed, unit, amount, NOW, timezone)
    assert message in str(caught.value)


def test_settings_that_never_match_raise() -> None:
    # February 30th never exists.
    with pytest.raises(ScheduleError, match="match no time in the next 5 years"):
        next_timed_occurrence({"monthDays": ["30"]}, "months", 12, utc("2023-02-01T00:00:00Z"))
