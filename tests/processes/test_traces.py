"""Traces across processes: a trigger's request, its steps in a separate worker and the provider call, one trace.

An OTLP receiver of the test's own (tests/fixtures/otlp.py, HTTP with protobuf
bodies) stands in for the collector. ``herald serve --no-worker`` and ``herald
worker`` are separate processes on one store, SQLite and PostgreSQL, both
pointed at the receiver with the standard ``OTEL_*`` variables; the trigger
carries a ``traceparent``, as a caller's instrumented client sends it.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from herald.kit.db import create_engine, create_sessionmaker
from herald.models import Job
from tests.fixtures import peers
from tests.fixtures.otlp import OtlpReceiver, ReceivedSpan
from tests.fixtures.peers import HttpPeer
from tests.fixtures.processes import HeraldProcesses, wait_until
from tests.fixtures.stores import create_postgres_database, postgres_reachable
from tests.processes.conftest import SENDGRID_KEY, api_client, create


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    collector = OtlpReceiver().start()
    yield collector
    collector.stop()


@pytest.fixture
def peer() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    peers.install_sendgrid(server, api_key=SENDGRID_KEY)
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
async def herald(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[HeraldProcesses]:
    """A migrated store of the test's own, and a launcher of processes on it (stopped after)."""
    database = None
    if request.param == "postgresql":
        if not await postgres_reachable():
            pytest.skip("PostgreSQL is not reachable (set HERALD_TEST_POSTGRES_URL)")
        database = await create_postgres_database()
        url = database.url
    else:
        url = f"sqlite:///{tmp_path / 'herald.db'}"
    launcher = HeraldProcesses(database_url=url, data_dir=tmp_path / "data", log_dir=tmp_path / "logs")
    try:
        launcher.migrate()
        yield launcher
    finally:
        launcher.stop_all()
        if database is not None:
            await database.drop()


@pytest.fixture
def api_key(herald: HeraldProcesses) -> str:
    """The Development environment's key, from ``herald bootstrap``."""
    boot = herald.bootstrap()
    return str(next(env for env in boot["environments"] if env["name"] == "Development")["apiKey"])


def traced_env(receiver: OtlpReceiver, service: str) -> dict[str, str]:
    """The standard variables that turn traces on, sending to the receiver, each batch after 50 ms."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }


async def test_one_trace_from_the_trigger_request_to_the_provider_call_in_another_process(
    herald: HeraldProcesses, api_key: str, receiver: OtlpReceiver, peer: HttpPeer
) -> None:
    api_process = await herald.serve(**traced_env(receiver, "herald-api"))
    await herald.worker(**traced_env(receiver, "herald-worker"))
    trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    async with api_client(api_process.url or "", api_key) as api:
        await create(
            api,
            "/v1/integrations",
            {
                "providerId": "sendgrid",
                "channel": "email",
                "active": True,
                "credentials": {"apiKey": SENDGRID_KEY, "from": "herald@example.com", "baseUrl": peer.url},
            },
        )
        await create(api, "/v1/subscribers", {"subscriberId": "ada", "email": "ada@example.com"})
        workflow = await create(
            api,
            "/v1/workflows",
            {
                "name": "traced",
                "active": True,
                "steps": [{"name": "mail", "template": {"type": "email", "subject": "Hi", "content": "Hello"}}],
            },
        )
        response = await api.post(
            "/v1/events/trigger",
            json={"name": workflow["triggers"][0]["identifier"], "to": "ada"},
            headers={"traceparent": f"00-{trace_id}-{caller_span}-01"},
        )
        assert response.status_code == 201, response.text
        transaction_id = response.json()["data"]["transactionId"]

    def spans_named(prefix: str) -> list[ReceivedSpan]:
        return [span for span in receiver.trace(trace_id) if span.name.startswith(prefix)]

    async def every_span_received() -> bool:
        # The step's span ends after its provider call's, so it may come in a later export batch.
        herald.check_alive()
        return all(spans_named(prefix) for prefix in ("POST ", "expand event", "step email", "provider "))

    await wait_until(every_span_received, timeout=30, what="the request's, expansion's, step's and provider call's spans", describe=herald.describe)
    assert len(peer.requests_to("/v3/mail/send")) == 1

    [request_span] = spans_named("POST ")
    assert request_span.name == "POST /v1/events/trigger"
    assert (request_span.service, request_span.kind) == ("herald-api", "server")
    assert request_span.parent_span_id == caller_span  # continues the caller's trace
    assert request_span.attributes["http.response.status_code"] == 201

    [expansion] = spans_named("expand event")
    [step] = spans_named("step email")
    [provider] = spans_named("provider sendgrid")
    # The worker's spans continue the request's, read from the jobs in the store.
    assert (expansion.service, step.service, provider.service) == ("herald-worker",) * 3
    assert expansion.parent_span_id == request_span.span_id
    assert step.parent_span_id == request_span.span_id
    assert step.attributes["herald.step.outcome"] == "completed"
    assert (provider.kind, provider.parent_span_id) == ("client", step.span_id)
    assert provider.attributes["herald.provider.outcome"] == "accepted"
    # Nothing of another trace: the set-up requests made traces of their own.
    assert {span.trace_id for span in receiver.spans if span.name.startswith(("step ", "provider "))} == {trace_id}

    engine = create_engine(herald.database_url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session:
            carried = set((await session.execute(select(Job.trace_context).where(Job.transaction_id == transaction_id))).scalars())
    finally:
        await engine.dispose()
    assert carried == {f"00-{trace_id}-{request_span.span_id}-01"}


async def test_without_the_otel_variables_no_trace_is_sent_and_jobs_carry_none(
    herald: HeraldProcesses, api_key: str, receiver: OtlpReceiver
) -> None:
    api_process = await herald.serve(worker=True)
    trace_id = secrets.token_hex(16)
    async with api_client(api_process.url or "", api_key) as api:
        await create(api, "/v1/subscribers", {"subscriberId": "ada"})
        workflow = await create(
            api,
            "/v1/workflows",
            {"name": "untraced", "active": True, "steps": [{"name": "inbox", "template": {"type": "in_app", "content": "Hi"}}]},
        )
        response = await api.post(
            "/v1/events/trigger",
            json={"name": workflow["triggers"][0]["identifier"], "to": "ada"},
            headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"},
        )
        assert response.status_code == 201, response.text
        transaction_id = response.json()["data"]["transactionId"]

        async def delivered() -> bool:
            answer = await api.get("/v1/messages", params={"transactionId": transaction_id})
            return answer.status_code == 200 and len(answer.json()["data"]) == 1

        await wait_until(delivered, timeout=30, what="the in-app message", describe=herald.describe)
    engine = create_engine(herald.database_url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session:
            carried = list((await session.execute(select(Job.trace_context).where(Job.transaction_id == transaction_id))).scalars())
    finally:
        await engine.dispose()
    assert carried and set(carried) == {None}
    assert receiver.requests == []
