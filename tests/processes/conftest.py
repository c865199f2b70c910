"""Tests with real ``herald`` processes on PostgreSQL (skipped when it is not reachable).

Each test module gets a fresh database, migrated with ``herald migrate`` and
bootstrapped with ``herald bootstrap --json``; each test starts the processes
it needs through the ``herald`` launcher, which kills them all when the test
ends, pass or fail. A failing test's report carries the tail of every
process's log.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from starlette.responses import Response

from herald.kit.db import create_engine, create_sessionmaker
from herald.models import Job, Message
from tests.fixtures import peers
from tests.fixtures.peers import HttpPeer, RecordedRequest
from tests.fixtures.processes import HeraldProcesses
from tests.fixtures.stores import TestDatabase, create_postgres_database, postgres_reachable

# A job whose worker is gone is claimable 2 s after it was claimed; retries come quickly.
FAST_RECOVERY = {"HERALD_JOB_LEASE_SECONDS": "2", "HERALD_RETRY_BASE_SECONDS": "0.2"}
FINAL = ("completed", "failed", "skipped", "canceled", "merged")
SENDGRID_KEY = "SG.process-test"
EMAIL = {
    "name": "mail",
    "template": {
        "type": "email",
        "subject": "Order {{payload.order}}",
        "content": [{"type": "text", "content": "Shipped"}],
    },
}
IN_APP = {"name": "inbox", "template": {"type": "in_app", "content": "Hello {{subscriber.subscriberId}}"}}


@dataclass
class ProcessStore:
    """The module's database: where the processes run, and a session factory to check what they did."""

    database: TestDatabase
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    organization_id: str
    environment_id: str
    api_key: str
    data_dir: Path

    @property
    def url(self) -> str:
        return self.database.url


@pytest.fixture(scope="module")
async def store(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ProcessStore]:
    if not await postgres_reachable():
        pytest.skip("PostgreSQL is not reachable (set HERALD_TEST_POSTGRES_URL); process tests need it")
    database = await create_postgres_database()
    engine = None
    try:
        root = tmp_path_factory.mktemp("herald-processes")
        setup = HeraldProcesses(database_url=database.url, data_dir=root / "data", log_dir=root / "setup-logs")
        setup.migrate()
        boot = setup.bootstrap()
        development = next(env for env in boot["environments"] if env["name"] == "Development")
        engine = create_engine(database.url, pool_size=4)
        yield ProcessStore(
            database=database,
            engine=engine,
            sessionmaker=create_sessionmaker(engine),
            organization_id=boot["organizationId"],
            environment_id=development["_id"],
            api_key=development["apiKey"],
            data_dir=root / "data",
        )
    finally:
        if engine is not None:
            await engine.dispose()
        await database.drop()


@pytest.fixture
def herald(store: ProcessStore, tmp_path: Path) -> Iterator[HeraldProcesses]:
    """Starts ``herald`` processes on the module's database; kills every one of them after the test."""
    launcher = HeraldProcesses(database_url=store.url, data_dir=store.data_dir, log_dir=tmp_path / "logs")
    try:
        yield launcher
    finally:
        launcher.stop_all()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    launcher = getattr(item, "funcargs", {}).get("herald")
    if report.failed and isinstance(launcher, HeraldProcesses):
        report.sections.append(("herald process logs", launcher.describe()))


# A provider peer ---------------------------------------------------------------


@pytest.fixture
def peer() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    yield server
    server.stop()


def sendgrid_handler(peer: HttpPeer) -> peers.Handler:
    """The SendGrid fake of tests/fixtures/peers.py (it checks the key and the body)."""
    peers.install_sendgrid(peer, api_key=SENDGRID_KEY)
    [handler] = [
        handler for method, pattern, handler in peer._routes if method == "POST" and pattern.match("/v3/mail/send")
    ]
    return handler


class StallFirstRequest:
    """Holds the first request unanswered for ``hold`` seconds (or until released), then accepts it.

    Later requests are answered by ``then`` straight away. The first answer
    carries the message id ``sg-stalled``.
    """

    STALLED_ID = "sg-stalled"

    def __init__(self, then: peers.Handler, hold: float = 120.0) -> None:
        self.then = then
        self.hold = hold
        self.released = threading.Event()
        self._lock = threading.Lock()
        self._first = True

    async def __call__(self, request: RecordedRequest) -> Response:
        with self._lock:
            first, self._first = self._first, False
        if first:
            deadline = time.monotonic() + self.hold
            while not self.released.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return Response(status_code=202, headers={"X-Message-Id": self.STALLED_ID})
        answer = self.then(request)
        return await answer if asyncio.iscoroutine(answer) else answer  # type: ignore[return-value]


# The API and the store -------------------------------------------------------------


def api_client(base_url: str, api_key: str, *, timeout: float = 30.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"ApiKey {api_key}"}, timeout=timeout)


async def create(api: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post(path, json=body)
    assert response.status_code in (200, 201), response.text
    return response.json()["data"]


async def trigger(api: httpx.AsyncClient, workflow: dict[str, Any], to: Any, **body: Any) -> str:
    """Trigger the workflow; returns the transactionId."""
    data = await create(api, "/v1/events/trigger", {"name": workflow["triggers"][0]["identifier"], "to": to, **body})
    assert data["status"] == "processed", data
    return data["transactionId"]


async def step_jobs(store: ProcessStore, transaction_id: str) -> list[Job]:
    async with store.sessionmaker() as session:
        result = await session.execute(
            select(Job).where(Job.transaction_id == transaction_id, Job.kind == "step").order_by(Job.id)
        )
        return list(result.scalars())


async def all_jobs_final(store: ProcessStore, transaction_id: str, expected_steps: int) -> bool:
    """The transaction's event job and all ``expected_steps`` step jobs have a final status."""
    async with store.sessionmaker() as session:
        rows = (
            await session.execute(
                select(Job.kind, Job.status, func.count())
                .where(Job.transaction_id == transaction_id)
                .group_by(Job.kind, Job.status)
            )
        ).all()
    steps = sum(number for kind, _, number in rows if kind == "step")
    return steps == expected_steps and all(status in FINAL for _, status, _ in rows)


async def messages_of(store: ProcessStore, transaction_id: str) -> list[Message]:
    async with store.sessionmaker() as session:
        result = await session.execute(select(Message).where(Message.transaction_id == transaction_id))
        return list(result.scalars())


async def email_setup(api: httpx.AsyncClient, peer: HttpPeer, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A SendGrid integration that talks to ``peer`` (made the email primary), a subscriber, a one-email workflow."""
    integration = await create(
        api,
        "/v1/integrations",
        {
            "providerId": "sendgrid",
            "channel": "email",
            "active": True,
            "credentials": {"apiKey": SENDGRID_KEY, "from": "herald@example.com", "baseUrl": peer.url},
        },
    )
    # Earlier tests of the module made integrations that talk to their own (stopped) peers.
    await create(api, f"/v1/integrations/{integration['_id']}/set-primary", {})
    subscriber = await create(
        api, "/v1/subscribers", {"subscriberId": f"{name}-subscriber", "email": "ada@example.com"}
    )
    workflow = await create(api, "/v1/workflows", {"name": name, "active": True, "steps": [EMAIL]})
    return subscriber, workflow
