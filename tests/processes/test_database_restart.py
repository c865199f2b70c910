"""PostgreSQL restarted under load: the service says it is unhealthy, comes back, and loses nothing.

An API process and a worker process run against a PostgreSQL server of the
test's own (tests/fixtures/private_postgres.py), while triggers arrive at a
steady rate, each with its own transactionId. The server is then crashed
(``pg_ctl stop -m immediate``: no checkpoint, every connection cut) and, a
few seconds later, started again. Meanwhile the health check must answer 503
and refused triggers must say so with the error body; afterwards both
processes must be healthy again without a restart of their own.

A trigger whose answer was lost or refused is sent again with the same
transactionId once the server is back, as Novu's SDK does: it either runs
then or is found to have run already. In the end every transactionId sent has
exactly one in-app message.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from herald.events.service import DUPLICATE_TRANSACTION
from herald.kit.db import create_engine, create_sessionmaker
from herald.models import Job, Message
from tests.fixtures.private_postgres import PrivatePostgres, server_programs_available
from tests.fixtures.processes import HeraldProcesses, wait_until
from tests.processes.conftest import FAST_RECOVERY, FINAL, IN_APP, api_client

# Triggers per second while the test runs, and how many must be accepted before and after the outage.
RATE = 40
BEFORE = 120
AFTER = 120
OUTAGE_SECONDS = 4.0


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    if not server_programs_available():
        pytest.skip("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
    server = PrivatePostgres.create()
    server.start()
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
async def launcher(private_postgres: PrivatePostgres, tmp_path: Path) -> AsyncIterator[HeraldProcesses]:
    url = private_postgres.create_database("herald")
    processes = HeraldProcesses(database_url=url, data_dir=tmp_path / "data", log_dir=tmp_path / "logs")
    try:
        yield processes
    finally:
        processes.stop_all()


class Traffic:
    """Triggers sent at a steady rate; remembers which were accepted and which must be sent again."""

    def __init__(self, client: httpx.AsyncClient, identifier: str, run: str) -> None:
        self.client = client
        self.identifier = identifier
        self.run_id = run
        self.sent: list[str] = []
        self.accepted: set[str] = set()
        self.unanswered: set[str] = set()
        self.refusals: list[httpx.Response] = []

    def body(self, transaction_id: str) -> dict:
        subscriber = int(transaction_id.rsplit("-", 1)[1]) % 50
        return {"name": self.identifier, "to": f"{self.run_id}-{subscriber}", "transactionId": transaction_id}

    async def send(self, transaction_id: str) -> None:
        try:
            # Novu's SDK sends an idempotency key with every request, and the same key when it retries.
            response = await self.client.post(
                "/v1/events/trigger",
                json=self.body(transaction_id),
                headers={"idempotency-key": f"key-{transaction_id}"},
            )
        except httpx.TransportError:
            self.unanswered.add(transaction_id)
            return
        data = response.json().get("data") or {} if response.status_code == 201 else {}
        # A retry finds its trigger ran already: by its idempotency key (a replay) or by its transactionId.
        if data.get("status") == "processed" or data.get("error") == [DUPLICATE_TRANSACTION]:
            self.accepted.add(transaction_id)
            self.unanswered.discard(transaction_id)
        else:
            self.refusals.append(response)
            self.unanswered.add(transaction_id)

    async def run(self, seconds: float, until_accepted: int | None = None) -> None:
        """Send RATE triggers per second, each in its own task, for ``seconds`` or until enough were accepted."""
        deadline = time.monotonic() + seconds
        tasks: set[asyncio.Task] = set()
        while time.monotonic() < deadline and (until_accepted is None or len(self.accepted) < until_accepted):
            transaction_id = f"{self.run_id}-{len(self.sent)}"
            self.sent.append(transaction_id)
            task = asyncio.create_task(self.send(transaction_id))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            await asyncio.sleep(1 / RATE)
        if tasks:
            await asyncio.gather(*tasks)

    async def run_until(self, accepted: int, timeout: float) -> None:
        await self.run(timeout, until_accepted=accepted)
        assert len(self.accepted) >= accepted, f"only {len(self.accepted)} of {accepted} triggers accepted"


@pytest.mark.skipif(not server_programs_available(), reason="PostgreSQL's server programs are not installed")
async def test_postgres_crash_and_restart_loses_and_doubles_nothing(
    private_postgres: PrivatePostgres, launcher: HeraldProcesses
) -> None:
    launcher.migrate()
    boot = launcher.bootstrap()
    api_key = next(env for env in boot["environments"] if env["name"] == "Development")["apiKey"]
    # Short pool recycling is not needed: connections cut by the crash are found by the pre-ping.
    api = await launcher.serve(**FAST_RECOVERY)
    await launcher.worker(**FAST_RECOVERY)
    run = uuid.uuid4().hex[:8]
    health = httpx.AsyncClient(base_url=api.url or "", timeout=5.0)
    client = api_client(api.url or "", api_key, timeout=20.0)
    try:
        response = await client.post("/v1/workflows", json={"name": f"restart {run}", "active": True, "steps": [IN_APP]})
        assert response.status_code == 201, response.text
        workflow = response.json()["data"]
        traffic = Traffic(client, workflow["triggers"][0]["identifier"], run)

        await traffic.run_until(BEFORE, timeout=60)

        # The crash, with triggers still arriving.
        sending = asyncio.create_task(traffic.run(OUTAGE_SECONDS + 2))
        private_postgres.stop("immediate")

        async def unhealthy() -> httpx.Response | None:
            response = await health.get("/v1/health-check")
            return response if response.status_code == 503 else None

        down = await wait_until(unhealthy, timeout=15, what="the health check to answer 503", describe=launcher.describe)
        assert down.json()["statusCode"] == 503
        assert down.json()["path"] == "/v1/health-check"
        await asyncio.sleep(OUTAGE_SECONDS)
        await sending
        refused = [response for response in traffic.refusals if response.status_code >= 500]
        assert refused, "no trigger was refused while the database was down"
        for response in refused:
            body = response.json()
            assert response.status_code == 503, response.text
            assert body["statusCode"] == 503 and body["path"] == "/v1/events/trigger", body
            assert response.headers.get("retry-after"), response.headers

        private_postgres.start()

        async def healthy() -> bool:
            launcher.check_alive()
            response = await health.get("/v1/health-check")
            return response.status_code == 200

        await wait_until(healthy, timeout=60, what="the health check to recover", describe=launcher.describe)
        await traffic.run_until(len(traffic.accepted) + AFTER, timeout=60)

        # What was refused or lost on the wire is sent again, as a client retrying would (409: not yet).
        async def all_answered() -> bool:
            for transaction_id in sorted(traffic.unanswered):
                await traffic.send(transaction_id)
            return not traffic.unanswered

        await wait_until(
            all_answered, timeout=60, interval=1.0, what="every refused trigger to be accepted when sent again",
            describe=lambda: "\n".join(response.text for response in traffic.refusals[-3:]),
        )
        assert traffic.accepted == set(traffic.sent)
    finally:
        await client.aclose()
        await health.aclose()

    engine = create_engine(launcher.database_url, pool_size=2)
    sessionmaker = create_sessionmaker(engine)
    try:

        async def every_job_final() -> bool:
            launcher.check_alive()
            async with sessionmaker() as session:
                rows = (
                    await session.execute(
                        select(Job.status, func.count()).where(Job.workflow_id == workflow["_id"]).group_by(Job.status)
                    )
                ).all()
            return sum(count for _, count in rows) == 2 * len(traffic.sent) and all(status in FINAL for status, _ in rows)

        await wait_until(every_job_final, timeout=180, interval=0.5, what="every job to be final", describe=launcher.describe)
        async with sessionmaker() as session:
            per_transaction = dict(
                (
                    await session.execute(
                        select(Message.transaction_id, func.count())
                        .where(Message.workflow_id == workflow["_id"])
                        .group_by(Message.transaction_id)
                    )
                ).all()
            )
            statuses = dict(
                (
                    await session.execute(
                        select(Job.status, func.count()).where(Job.workflow_id == workflow["_id"]).group_by(Job.status)
                    )
                ).all()
            )
    finally:
        await engine.dispose()
    assert per_transaction == {transaction_id: 1 for transaction_id in traffic.sent}
    assert statuses == {"completed": 2 * len(traffic.sent)}
