"""Group commit: concurrent writes share transactions, and each caller gets its own outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.events.service import DUPLICATE_TRANSACTION
from herald.kit import groupcommit
from herald.kit.groupcommit import GroupCommit
from herald.models import Event, Job, Tenant
from tests.fixtures.builders import create_workflow


class Refused(Exception):
    pass


def tenant_rows(environment_id: str, organization_id: str, names: Sequence[str]) -> list[Tenant]:
    return [Tenant(environment_id=environment_id, organization_id=organization_id, identifier=name, name=name) for name in names]


async def count_tenants(app: FastAPI, environment_id: str, prefix: str) -> int:
    async with app.state.sessionmaker() as session:
        return int(
            await session.scalar(
                select(func.count())
                .select_from(Tenant)
                .where(Tenant.environment_id == environment_id, Tenant.identifier.like(f"{prefix}%"))
            )
            or 0
        )


async def test_concurrent_submissions_are_written_in_shared_transactions(app: FastAPI, tenancy) -> None:
    batches: list[int] = []

    async def write(session: AsyncSession, names: Sequence[str]) -> list[str]:
        batches.append(len(names))
        session.add_all(tenant_rows(tenancy.environment_id, tenancy.organization_id, names))
        return [f"wrote {name}" for name in names]

    recorder: GroupCommit[str, str] = GroupCommit(app.state.sessionmaker, write)
    names = [f"gc-shared-{n}" for n in range(40)]
    outcomes = await asyncio.gather(*(recorder.submit(name) for name in names))

    assert outcomes == [f"wrote {name}" for name in names]
    assert sum(batches) == 40
    # The first caller is written alone; the others queued behind it share the next batch.
    assert len(batches) < 40 and max(batches) > 1
    assert await count_tenants(app, tenancy.environment_id, "gc-shared-") == 40


async def test_callers_arriving_as_the_writer_starts_join_its_first_batch(app: FastAPI, tenancy) -> None:
    # Over HTTP, requests that came in together reach submit one pass of the
    # event loop after another (each is read and parsed in turn): they share a batch.
    batches: list[list[str]] = []

    async def write(session: AsyncSession, names: Sequence[str]) -> list[str]:
        batches.append(list(names))
        session.add_all(tenant_rows(tenancy.environment_id, tenancy.organization_id, names))
        return [f"wrote {name}" for name in names]

    recorder: GroupCommit[str, str] = GroupCommit(app.state.sessionmaker, write)

    async def arrive_after(passes: int, name: str) -> str:
        for _ in range(passes):
            await asyncio.sleep(0)
        return await recorder.submit(name)

    names = [f"gc-gather-{n}" for n in range(5)]
    outcomes = await asyncio.gather(*(arrive_after(n, name) for n, name in enumerate(names)))

    assert outcomes == [f"wrote {name}" for name in names]
    assert batches == [names]
    assert await count_tenants(app, tenancy.environment_id, "gc-gather-") == 5


async def test_callers_reaching_submit_just_after_a_write_join_those_queued_during_it(app: FastAPI, tenancy) -> None:
    # Every batch gathers late arrivals before it is written, as the first does.
    # Requests the event loop read while a batch was written (on SQLite the
    # write holds the loop) reach submit one pass after another once it
    # returns. Written straight away, the batch took only the callers queued
    # during the write and the others made a small batch of their own: at 32
    # clients over HTTP batches alternated between a few triggers and twenty
    # (11.7 on average; 26.9 gathering every batch).
    batches: list[list[str]] = []
    release = asyncio.Event()
    late = [f"gc-late-{n}" for n in range(6)]
    arrivals: list[asyncio.Task[str]] = []

    async def arrive_after(passes: int, name: str) -> str:
        for _ in range(passes):
            await asyncio.sleep(0)
        return await recorder.submit(name)

    async def write(session: AsyncSession, names: Sequence[str]) -> list[str]:
        batches.append(list(names))
        if len(batches) == 1:
            await release.wait()  # a slow write, while others queue behind it
            arrivals.extend(asyncio.create_task(arrive_after(n, name)) for n, name in enumerate(late))
        session.add_all(tenant_rows(tenancy.environment_id, tenancy.organization_id, names))
        return [f"wrote {name}" for name in names]

    recorder: GroupCommit[str, str] = GroupCommit(app.state.sessionmaker, write)
    first = asyncio.create_task(recorder.submit("gc-late-first"))
    while not batches:
        await asyncio.sleep(0)
    queued = [f"gc-late-queued-{n}" for n in range(3)]
    waiting = [asyncio.create_task(recorder.submit(name)) for name in queued]
    for _ in range(3):
        await asyncio.sleep(0)
    release.set()

    assert await first == "wrote gc-late-first"
    assert [await task for task in waiting] == [f"wrote {name}" for name in queued]
    assert [await task for task in arrivals] == [f"wrote {name}" for name in late]
    assert batches == [["gc-late-first"], queued + late]
    assert await count_tenants(app, tenancy.environment_id, "gc-late-") == 10


async def test_an_item_refused_by_the_use_case_fails_alone(app: FastAPI, tenancy) -> None:
    async def write(session: AsyncSession, names: Sequence[str]) -> list[str | Exception]:
        kept = [name for name in names if not name.endswith("-bad")]
        session.add_all(tenant_rows(tenancy.environment_id, tenancy.organization_id, kept))
        return [Refused(name) if name.endswith("-bad") else name for name in names]

    recorder: GroupCommit[str, str] = GroupCommit(app.state.sessionmaker, write)
    names = ["gc-refuse-1", "gc-refuse-2-bad", "gc-refuse-3"]
    outcomes = await asyncio.gather(*(recorder.submit(name) for name in names), return_exceptions=True)

    assert outcomes[0] == "gc-refuse-1" and outcomes[2] == "gc-refuse-3"
    assert isinstance(outcomes[1], Refused)
    assert await count_tenants(app, tenancy.environment_id, "gc-refuse-") == 2


async def test_a_batch_whose_transaction_fails_is_written_again_one_by_one(app: FastAPI, tenancy) -> None:
    """Two callers insert the same tenant: the shared transaction fails on the unique index, then
    each is written alone, so one of them succeeds and only the other gets the database's error."""
    attempts: list[list[str]] = []

    async def write(session: AsyncSession, names: Sequence[str]) -> list[str]:
        attempts.append(list(names))
        session.add_all(tenant_rows(tenancy.environment_id, tenancy.organization_id, [n.split("#")[0] for n in names]))
        await session.flush()
        return list(names)

    recorder: GroupCommit[str, str] = GroupCommit(app.state.sessionmaker, write)
    names = ["gc-retry-0", "gc-retry-1#a", "gc-retry-1#b", "gc-retry-2"]
    outcomes = await asyncio.gather(*(recorder.submit(name) for name in names), return_exceptions=True)

    # The shared try, then each alone.
    assert attempts == [names, *([name] for name in names)]
    assert outcomes[0] == "gc-retry-0"
    assert outcomes[1] == "gc-retry-1#a"
    assert isinstance(outcomes[2], Exception) and "UNIQUE" in str(outcomes[2]).upper()
    assert outcomes[3] == "gc-retry-2"
    assert await count_tenants(app, tenancy.environment_id, "gc-retry-") == 3


async def test_triggers_sent_at_once_are_each_recorded_with_their_own_answer(
    app: FastAPI, api: httpx.AsyncClient, tenancy
) -> None:
    """Through the API: a burst of triggers, two of them sharing a transactionId, one naming no workflow."""
    workflow = await create_workflow(api, name="burst", steps=[{"template": {"type": "in_app", "content": "hi"}}])
    identifier = workflow["triggers"][0]["identifier"]
    bodies = [{"name": identifier, "to": f"burst-{n}", "transactionId": f"burst-tx-{n}"} for n in range(30)]
    bodies.append({"name": identifier, "to": "burst-again", "transactionId": "burst-tx-7"})
    bodies.append({"name": "no-such-workflow", "to": "burst-x"})
    responses = await asyncio.gather(*(api.post("/v1/events/trigger", json=body) for body in bodies))

    statuses = [response.status_code for response in responses]
    assert statuses[-1] == 422 and responses[-1].json()["message"] == "workflow_not_found"
    assert statuses[:-1] == [201] * 31
    answers = [response.json()["data"] for response in responses[:-1]]
    # transactionId burst-tx-7 ran once: whichever request the index saw first.
    tx7 = [answers[7], answers[30]]
    assert sorted(answer["status"] for answer in tx7) == ["error", "processed"]
    assert [answer for answer in tx7 if answer["status"] == "error"][0]["error"] == [DUPLICATE_TRANSACTION]
    assert all(answer["status"] == "processed" for n, answer in enumerate(answers[:30]) if n != 7)
    async with app.state.sessionmaker() as session:
        events = await session.scalar(
            select(func.count()).select_from(Event).where(Event.environment_id == tenancy.environment_id, Event.workflow_id == workflow["_id"])
        )
        jobs = await session.scalar(
            select(func.count()).select_from(Job).where(Job.kind == "event", Job.workflow_id == workflow["_id"])
        )
    assert events == 30
    assert jobs == 30


@pytest.mark.parametrize("count", [1])
async def test_a_single_caller_is_written_at_once(app: FastAPI, tenancy, count: int) -> None:
    async def write(session: AsyncSession, names: Sequence[str]) -> list[int]:
        return [len(names)] * len(names)

    recorder: GroupCommit[str, int] = GroupCommit(app.state.sessionmaker, write)
    assert await asyncio.wait_for(recorder.submit("alone"), timeout=5) == count


async def run_clients(recorder: GroupCommit[str, str], turnarounds: Sequence[int], rounds: int) -> list[str]:
    """Clients that each submit, wait for the answer and submit again ``turnaround`` loop passes later."""

    async def client(number: int, passes: int) -> list[str]:
        answers = []
        for round_ in range(rounds):
            answers.append(await recorder.submit(f"c{number}-r{round_}"))
            for _ in range(passes):
                await asyncio.sleep(0)
        return answers

    results = await asyncio.gather(*(client(number, passes) for number, passes in enumerate(turnarounds)))
    return [answer for answers in results for answer in answers]


async def test_clients_answered_by_a_write_share_the_next_with_those_that_queued_during_it(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Eight clients come back at once after their answer, two take longer and
    # reach submit while the next write is under way. Written as soon as that
    # write ends, the two made a batch of their own and the eight waited for
    # it: batches alternated between two and eight, two writes a round. The
    # writer now waits a moment for the callers the last batches say are
    # coming, and every round is one write of all ten.
    # Waits long enough for a slow machine's forty passes of the loop.
    monkeypatch.setattr(groupcommit, "LINGER_SECONDS", 0.05)
    batches: list[int] = []

    async def write(session: AsyncSession, names: Sequence[str]) -> list[str]:
        batches.append(len(names))
        await asyncio.sleep(0.02)  # the write's round trip, during which the slow two come back
        return [f"wrote {name}" for name in names]

    recorder: GroupCommit[str, str] = GroupCommit(app.state.sessionmaker, write)
    rounds = 12
    answers = await run_clients(recorder, [0] * 8 + [40, 40], rounds)

    assert sorted(answers) == sorted(f"wrote c{number}-r{round_}" for number in range(10) for round_ in range(rounds))
    assert sum(batches) == 10 * rounds
    # The first rounds find the pattern; after them every batch holds all ten.
    assert batches[-8:] == [10] * 8
    assert len(batches) <= rounds + 3


async def test_after_a_wait_in_vain_the_writer_does_not_wait_for_a_while(app: FastAPI) -> None:
    # A burst of ten makes the writer expect ten. A caller that then comes
    # alone waits for them at most a moment and is written alone; the waits
    # are not tried again for the next batches, so a caller arriving a few
    # passes after another is not waited for either.
    batches: list[list[str]] = []

    async def write(session: AsyncSession, names: Sequence[str]) -> list[str]:
        batches.append(list(names))
        await asyncio.sleep(0.005)
        return [f"wrote {name}" for name in names]

    recorder: GroupCommit[str, str] = GroupCommit(app.state.sessionmaker, write)
    burst = [f"burst-{n}" for n in range(10)]
    await asyncio.gather(*(recorder.submit(name) for name in burst))
    assert await recorder.submit("alone") == "wrote alone"

    async def arrive_after(passes: int, name: str) -> str:
        for _ in range(passes):
            await asyncio.sleep(0)
        return await recorder.submit(name)

    assert await asyncio.gather(arrive_after(0, "next"), arrive_after(30, "later")) == ["wrote next", "wrote later"]
    assert batches == [burst, ["alone"], ["next"], ["later"]]
