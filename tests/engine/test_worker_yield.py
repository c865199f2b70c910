"""A worker gives way to API processes while requests are waiting on them."""

from __future__ import annotations

import pytest

from herald.engine.queue import BUSY, PRESSURE_REQUESTS, JobSignal
from herald.engine.worker import BUSY_HOLD_SECONDS, YIELD_FACTOR, YIELD_MAX_SECONDS, Worker, pause_after_round
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


class CountedSignal(JobSignal):
    def __init__(self) -> None:
        super().__init__()
        self.rings = 0

    def ring(self) -> None:
        self.rings += 1
        super().ring()


def _standalone_worker(give_way: bool = True) -> Worker:
    """A worker of its own process, as ``herald worker`` runs one (it never touches the store here)."""
    from herald.kit.crypto import SecretBox

    return Worker(sessionmaker=None, box=SecretBox("k" * 32), signal=CountedSignal(), give_way=give_way)  # type: ignore[arg-type]


async def test_a_worker_gives_way_while_an_api_process_says_it_is_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A BUSY wake-up counts as a burst waiting on an API for BUSY_HOLD_SECONDS; a plain one does not."""
    import herald.engine.worker as worker_module

    clock = [100.0]
    monkeypatch.setattr(worker_module.time, "monotonic", lambda: clock[0])
    worker = _standalone_worker()
    try:
        worker.heard("")
        assert worker.requests_waiting() == 0
        worker.heard(BUSY)
        assert worker.signal.rings == 2  # every wake-up rings, busy or not
        assert pause_after_round(0.02, worker.requests_waiting()) == pytest.approx(0.02 * YIELD_FACTOR)
        clock[0] += BUSY_HOLD_SECONDS - 0.01
        assert worker.requests_waiting() == PRESSURE_REQUESTS
        clock[0] += 0.02  # no busy batch since: the worker runs at full speed again
        assert worker.requests_waiting() == 0
    finally:
        await worker.http.aclose()


async def test_a_worker_told_not_to_defer_ignores_busy_api_processes() -> None:
    worker = _standalone_worker(give_way=False)
    try:
        worker.heard(BUSY)
        assert worker.requests_waiting() == 0
        assert worker.signal.rings == 1
    finally:
        await worker.http.aclose()
