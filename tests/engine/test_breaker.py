"""The circuit breaker's state transitions, with a clock the test moves, on the store's own atomic statements."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from fastapi import FastAPI
from sqlalchemy import select

from herald.engine import breaker
from herald.engine.breaker import BreakerSettings, Decision, Status
from herald.engine.repository import EngineRepository
from herald.kit.ids import new_id
from herald.models import IntegrationHealth

SETTINGS = BreakerSettings(failures=3, window_seconds=60, cooldown_seconds=30)
T0 = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Breaker:
    """One integration's breaker in the test's store, driven at chosen instants."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.integration_id = new_id()
        self.environment_id = new_id()

    async def fail(self, seconds: float, *, probing: bool = False) -> IntegrationHealth:
        now = at(seconds)
        async with self.app.state.sessionmaker() as session, session.begin():
            return await EngineRepository(session).record_integration_failure(
                self.integration_id,
                self.environment_id,
                now=now,
                failures=SETTINGS.failures,
                window_start=now - SETTINGS.window,
                open_until=now + SETTINGS.cooldown,
                probing=probing,
                error="503 unavailable",
            )

    async def claim(self, seconds: float) -> bool:
        now = at(seconds)
        async with self.app.state.sessionmaker() as session, session.begin():
            return await EngineRepository(session).claim_probe(self.integration_id, now, now + SETTINGS.cooldown)

    async def succeed(self) -> None:
        async with self.app.state.sessionmaker() as session, session.begin():
            await EngineRepository(session).clear_integration_health(self.integration_id)

    async def row(self) -> IntegrationHealth | None:
        async with self.app.state.sessionmaker() as session:
            query = select(IntegrationHealth).where(IntegrationHealth.integration_id == self.integration_id)
            return (await session.execute(query)).scalar_one_or_none()

    async def status(self, seconds: float) -> Status:
        return breaker.status(await self.row(), at(seconds))

    async def decide(self, seconds: float) -> Decision:
        return breaker.decide(await self.row(), at(seconds))


def test_no_row_is_healthy_and_sends() -> None:
    assert breaker.status(None, T0) is Status.HEALTHY
    assert breaker.decide(None, T0) is Decision.SEND
    assert breaker.describe(None, T0) == {"status": "healthy", "consecutiveFailures": 0}


async def test_failures_within_the_window_open_it_and_the_cool_down_makes_it_half_open(app: FastAPI) -> None:
    subject = Breaker(app)
    first = await subject.fail(0)
    assert (first.failures, first.consecutive_failures, first.skipped_until) == (1, 1, None)
    assert await subject.status(1) is Status.FAILING and await subject.decide(1) is Decision.SEND
    await subject.fail(10)
    third = await subject.fail(20)
    assert third.failures == 3 and third.skipped_until == at(50)
    assert await subject.status(20) is Status.SKIPPED and await subject.decide(49) is Decision.SKIP
    shown = breaker.describe(await subject.row(), at(21))
    assert shown["status"] == "skipped" and shown["skippedUntil"] == "2026-11-25T12:00:50.000Z"
    assert shown["failingSince"] == "2026-11-25T12:00:00.000Z" and shown["consecutiveFailures"] == 3
    # A failure of a message already in flight while open does not push the cool-down back.
    late = await subject.fail(25)
    assert late.skipped_until == at(50) and late.consecutive_failures == 4
    assert await subject.status(50) is Status.HALF_OPEN and await subject.decide(50) is Decision.PROBE


async def test_failures_outside_the_window_start_a_new_count(app: FastAPI) -> None:
    subject = Breaker(app)
    await subject.fail(0)
    await subject.fail(30)
    renewed = await subject.fail(61)  # the window from the first failure has passed
    assert (renewed.failures, renewed.window_started_at, renewed.skipped_until) == (1, at(61), None)
    assert renewed.consecutive_failures == 3 and renewed.failing_since == at(0)
    await subject.fail(70)
    opened = await subject.fail(80)
    assert opened.skipped_until == at(110)


async def test_one_probe_is_claimed_its_failure_reopens_and_a_success_closes(app: FastAPI) -> None:
    subject = Breaker(app)
    for second in (0, 1, 2):
        await subject.fail(second)
    assert not await subject.claim(31)  # still open: nothing to probe
    assert await subject.claim(32)
    assert not await subject.claim(32)  # the probe is taken
    assert await subject.decide(33) is Decision.SKIP
    reopened = await subject.fail(34, probing=True)
    assert reopened.skipped_until == at(64) and reopened.probe_until is None
    assert await subject.status(40) is Status.SKIPPED
    # A probe whose worker vanished: its claim runs out after a cool-down, and another message probes.
    assert await subject.claim(64)
    assert not await subject.claim(90)
    assert await subject.claim(94)
    await subject.succeed()
    assert await subject.row() is None and await subject.status(95) is Status.HEALTHY


async def test_concurrent_claims_give_the_probe_to_one(app: FastAPI) -> None:
    subject = Breaker(app)
    for second in (0, 1, 2):
        await subject.fail(second)
    claims = await asyncio.gather(*(subject.claim(40) for _ in range(6)))
    assert sorted(claims) == [False] * 5 + [True]


async def test_concurrent_failures_all_count_and_open_it_once(app: FastAPI) -> None:
    subject = Breaker(app)
    await asyncio.gather(*(subject.fail(5) for _ in range(8)))
    row = await subject.row()
    assert row is not None and row.failures == 8 and row.consecutive_failures == 8
    assert row.skipped_until == at(35)


async def test_a_threshold_of_one_opens_at_the_first_failure(app: FastAPI) -> None:
    subject = Breaker(app)
    now = at(0)
    async with app.state.sessionmaker() as session, session.begin():
        health = await EngineRepository(session).record_integration_failure(
            subject.integration_id,
            subject.environment_id,
            now=now,
            failures=1,
            window_start=now - SETTINGS.window,
            open_until=now + SETTINGS.cooldown,
            probing=False,
            error="timeout",
        )
    assert health.skipped_until == at(30)
