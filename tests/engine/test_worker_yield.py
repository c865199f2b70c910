"""A worker gives way to API processes while requests are waiting on them."""

from __future__ import annotations

import asyncio

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


async def test_the_counter_keeps_the_most_requests_at_once_until_read() -> None:
    """The in-process worker reads the peak since its last read: a burst whose answers all went out
    just before a round ended (a group commit answers its whole batch at once) still counts."""
    counter = RequestsInFlight()
    release = asyncio.Event()

    async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        await release.wait()

    middleware = CountRequestsMiddleware(app, counter=counter)
    requests = [asyncio.create_task(middleware({"type": "http"}, None, None)) for _ in range(PRESSURE_REQUESTS + 4)]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(*requests)
    assert counter.count == 0
    assert counter.take_peak() == PRESSURE_REQUESTS + 4
    assert counter.take_peak() == 0


def _standalone_worker(give_way: bool = True) -> Worker:
    """A worker of its own process, as ``herald worker`` runs one (it never touches the store here)."""
    from herald.kit.crypto import SecretBox

    return Worker(sessionmaker=None, box=SecretBox("k" * 32), signal=JobSignal(), give_way=give_way)  # type: ignore[arg-type]


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


async def test_the_in_process_worker_reads_the_peak_of_its_apis_requests(
    empty_database, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Requests answered before the worker looks still count: it reads the peak, not the moment."""
    import httpx

    import herald.app
    from herald.config import load_settings
    from herald.migrations import upgrade_async

    await upgrade_async(empty_database.url)
    pressures = []
    real_build_worker = herald.app.build_worker

    def build_worker(*args, **kwargs):  # type: ignore[no-untyped-def]
        pressures.append(kwargs["pressure"])
        return real_build_worker(*args, **kwargs)

    monkeypatch.setattr(herald.app, "build_worker", build_worker)
    settings = load_settings(data_dir=tmp_path, database_url=empty_database.url, secret_key="k" * 32, run_worker=True)
    app = herald.app.create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://h") as client:
        [pressure] = pressures
        pressure()
        answers = await asyncio.gather(*(client.get("/v1/health-check") for _ in range(PRESSURE_REQUESTS)))
        assert {answer.status_code for answer in answers} == {200}
        assert pressure() == PRESSURE_REQUESTS
        assert pressure() == 0
