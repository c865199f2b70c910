"""The in-process worker gives way to its process's API when requests are waiting."""

from __future__ import annotations

import pytest

from herald.engine.worker import PRESSURE_REQUESTS, YIELD_FACTOR, YIELD_MAX_SECONDS, pause_after_round
from herald.kit.asgi import CountRequestsMiddleware, RequestsInFlight


@pytest.mark.parametrize("waiting", [0, 1, 4, 8, PRESSURE_REQUESTS - 1])
def test_no_pause_at_moderate_rates(waiting: int) -> None:
    """A trickle of triggers with clients polling their inboxes has a few requests in flight, not a burst."""
    assert pause_after_round(0.05, waiting) == 0.0


def test_under_load_the_api_gets_three_quarters_of_the_process() -> None:
    round_seconds = 0.02
    pause = pause_after_round(round_seconds, PRESSURE_REQUESTS)
    assert pause == pytest.approx(round_seconds * YIELD_FACTOR)
    assert round_seconds / (round_seconds + pause) == pytest.approx(0.25)


def test_a_long_round_pauses_at_most_a_quarter_second() -> None:
    assert pause_after_round(10.0, 100) == YIELD_MAX_SECONDS


async def test_the_counter_counts_requests_being_answered() -> None:
    counter = RequestsInFlight()
    seen: list[int] = []

    async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        seen.append(counter.count)

    middleware = CountRequestsMiddleware(app, counter=counter)
    await middleware({"type": "http"}, None, None)
    await middleware({"type": "lifespan"}, None, None)
    assert seen == [1, 0]
    assert counter.count == 0
