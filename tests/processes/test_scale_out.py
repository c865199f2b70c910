"""Scale-out: two API processes and three worker processes on one PostgreSQL deliver every trigger once.

``HERALD_TEST_SCALE_TRIGGERS`` sets how many triggers are sent (default 10,000),
64 at a time, alternately to each API process; every trigger has its own
transactionId. The run's timings are printed and recorded as properties of
the test (``--junitxml`` keeps them).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from itertools import count

import httpx
import pytest
from sqlalchemy import func, select

from herald.events.service import DUPLICATE_TRANSACTION
from herald.models import Event, Job, Message
from tests.fixtures.processes import HeraldProcesses, wait_until
from tests.processes.conftest import ProcessStore, api_client

TRIGGERS = int(os.environ.get("HERALD_TEST_SCALE_TRIGGERS", "10000"))
# Triggers in flight at once, over both API processes.
CONCURRENCY = 64
# Subscribers the triggers go to, round robin; every trigger has its own transactionId.
SUBSCRIBERS = 100
FINAL = ("completed", "failed", "skipped", "canceled", "merged")
# A trigger whose request failed on the wire (no answer) is sent again, at most this many times in all.
TRANSPORT_ATTEMPTS = 3
# Small pools: the processes share the PostgreSQL server with other test runs.
PROCESS_ENV = {"HERALD_DATABASE_POOL_SIZE": "8"}


async def job_counts(store: ProcessStore, workflow_id: str) -> Counter[tuple[str, str]]:
    async with store.sessionmaker() as session:
        rows = (
            await session.execute(
                select(Job.kind, Job.status, func.count())
                .where(Job.workflow_id == workflow_id)
                .group_by(Job.kind, Job.status)
            )
        ).all()
    return Counter({(kind, status): number for kind, status, number in rows})


async def test_two_apis_and_three_workers_deliver_every_trigger_exactly_once(
    store: ProcessStore, herald: HeraldProcesses, record_property: pytest.RecordProperty
) -> None:
    started = time.monotonic()
    apis = await asyncio.gather(*(herald.serve(**PROCESS_ENV) for _ in range(2)))
    workers = await asyncio.gather(*(herald.worker(**PROCESS_ENV) for _ in range(3)))
    run = uuid.uuid4().hex[:8]
    clients = [api_client(api.url or "", store.api_key, timeout=60.0) for api in apis]
    try:
        response = await clients[0].post(
            "/v1/workflows",
            json={
                "name": f"scale-{run}",
                "active": True,
                "steps": [{"name": "inbox", "template": {"type": "in_app", "content": "n={{payload.n}}"}}],
            },
        )
        assert response.status_code == 201, response.text
        workflow = response.json()["data"]
        identifier = workflow["triggers"][0]["identifier"]
        transaction_ids = [f"scale-{run}-{n}" for n in range(TRIGGERS)]
        refused: list[tuple[int, int, str]] = []
        resent: list[tuple[int, str]] = []
        sent_by_api = Counter[int]()
        next_index = count()

        async def send(n: int) -> None:
            """One trigger; a request lost on the wire is sent again with the same transactionId, as a client would."""
            target = n % len(clients)
            body = {
                "name": identifier,
                "to": f"scale-{run}-subscriber-{n % SUBSCRIBERS}",
                "payload": {"n": n},
                "transactionId": transaction_ids[n],
            }
            for attempt in range(1, TRANSPORT_ATTEMPTS + 1):
                try:
                    response = await clients[target].post("/v1/events/trigger", json=body)
                except httpx.TransportError as exc:
                    resent.append((n, f"{type(exc).__name__}: {exc}"))
                    if attempt == TRANSPORT_ATTEMPTS:
                        raise
                    continue
                sent_by_api[target] += 1
                data = (response.json().get("data") or {}) if response.status_code == 201 else {}
                # A resent trigger that had reached the API the first time is refused as a duplicate: it ran once.
                duplicate_of_lost = attempt > 1 and data.get("error") == [DUPLICATE_TRANSACTION]
                if data.get("status") != "processed" and not duplicate_of_lost:
                    refused.append((n, response.status_code, response.text))
                return

        async def send_triggers() -> None:
            while (n := next(next_index)) < TRIGGERS:
                await send(n)

        triggering = time.monotonic()
        await asyncio.gather(*(send_triggers() for _ in range(CONCURRENCY)))
        triggered = time.monotonic()
    finally:
        for client in clients:
            await client.aclose()
    assert refused == []
    assert sum(sent_by_api.values()) == TRIGGERS
    assert sent_by_api == {0: TRIGGERS // 2 + TRIGGERS % 2, 1: TRIGGERS // 2}

    async def drained() -> bool:
        herald.check_alive()
        counts = await job_counts(store, workflow["_id"])
        return sum(counts.values()) == 2 * TRIGGERS and all(status in FINAL for _, status in counts)

    await wait_until(
        drained,
        timeout=max(300.0, TRIGGERS * 0.12),
        interval=1.0,
        what="every job to be final",
        describe=herald.describe,
    )
    finished = time.monotonic()
    timings = {
        "start_processes_s": round(triggering - started, 1),
        "send_triggers_s": round(triggered - triggering, 1),
        "drain_after_last_trigger_s": round(finished - triggered, 1),
        "total_s": round(finished - started, 1),
        "triggers_per_s": round(TRIGGERS / (triggered - triggering), 1),
        "jobs_per_s": round(2 * TRIGGERS / (finished - triggering), 1),
        "triggers_resent_after_transport_errors": len(resent),
    }
    for name, value in timings.items():
        record_property(name, value)
    print(f"\nscale-out with {TRIGGERS} triggers: {timings}")
    if resent:
        print(f"resent after transport errors (first 5): {resent[:5]}")

    # One event job (expansion) and one in_app step job per trigger, all completed.
    assert await job_counts(store, workflow["_id"]) == {
        ("event", "completed"): TRIGGERS,
        ("step", "completed"): TRIGGERS,
    }
    async with store.sessionmaker() as session:
        events = await session.scalar(
            select(func.count()).select_from(Event).where(Event.workflow_id == workflow["_id"])
        )
        in_app = Message.workflow_id == workflow["_id"], Message.channel == "in_app"
        messages = await session.scalar(select(func.count()).select_from(Message).where(*in_app))
        transactions = set((await session.execute(select(Message.transaction_id).where(*in_app).distinct())).scalars())
        duplicated = (
            await session.execute(
                select(Message.transaction_id, func.count())
                .where(*in_app)
                .group_by(Message.transaction_id)
                .having(func.count() > 1)
            )
        ).all()
        claimed_by = set(
            (
                await session.execute(select(Job.locked_by).where(Job.workflow_id == workflow["_id"]).distinct())
            ).scalars()
        )
    assert events == TRIGGERS
    assert duplicated == []
    assert messages == TRIGGERS
    assert transactions == set(transaction_ids)
    # Every worker process took part.
    assert claimed_by == {worker.worker_id for worker in workers}
