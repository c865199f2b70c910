"""The benchmark's acceptance in turns: how turns combine, and the option that sets them."""

from __future__ import annotations

import pytest

from bench.loadgen import LoadResult, combine
from bench.run import parse_args


def _turn(duration: float, latencies: list[float], errors: tuple[str, ...] = ()) -> LoadResult:
    result = LoadResult(duration=duration)
    for latency in latencies:
        result.record(201, latency)
        result.accepted_total += 1
    for text in errors:
        result.record_failure(RuntimeError(text))
    return result


def test_turns_combine_to_every_request_over_every_second() -> None:
    slow = _turn(1.0, [0.01] * 100)  # 100 requests/s
    fast = _turn(2.0, [0.002] * 600)  # 300 requests/s

    total = combine([slow, fast])

    # 700 requests in 3 s, not the mean of the turns' rates (200/s).
    assert total.rate == pytest.approx(700 / 3)
    assert total.duration == 3.0
    assert total.ok == 700
    assert total.accepted_total == 700
    assert total.statuses == {201: 700}
    # Latencies are pooled: the p99 of all 700 is the slow turn's.
    assert total.p(0.5) == 0.002
    assert total.p(0.99) == 0.01


def test_combined_errors_are_counted_and_sampled_three_at_most() -> None:
    first = _turn(1.0, [0.01], errors=("a", "b"))
    second = _turn(1.0, [0.01], errors=("c", "d"))

    total = combine([first, second])

    assert total.errors == 4
    assert total.error_samples == ["RuntimeError: a", "RuntimeError: b", "RuntimeError: c"]


def test_acceptance_is_measured_in_three_turns_unless_quick_or_told() -> None:
    assert parse_args([]).turns == 3
    assert parse_args(["--quick"]).turns == 1
    assert parse_args(["--turns", "5"]).turns == 5


@pytest.mark.parametrize("turns", ["0", "21"])
def test_turns_out_of_range_are_refused(turns: str) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--turns", turns])
