"""Rate limits: a token bucket per environment for triggers and one for every other route (kit/limits.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from herald.app import create_app
from herald.config import load_settings
from herald.kit.limits import BULK_COST, RATE_LIMITED_MESSAGE, TokenBuckets
from herald.models import Environment, Subscriber
from herald.organizations.service import create_organization
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures import stores
from tests.fixtures.builders import create_workflow


class Clock:
    """A clock the test moves by hand, so no answer depends on how fast the machine is."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_holds_its_burst_and_refills_at_its_rate() -> None:
    clock = Clock()
    buckets = TokenBuckets(10, clock=clock)
    assert [buckets.take("env")[0] for _ in range(11)] == [True] * 10 + [False]
    assert buckets.take("other") == (True, 9.0)  # each key has its own
    clock.now += 0.25
    assert buckets.take("env") == (True, 1.5)
    assert buckets.take("env", 2) == (False, 1.5)
    assert buckets.seconds_until(1.5, 2) == pytest.approx(0.05)
    clock.now += 60
    assert buckets.take("env") == (True, 9.0)  # never more than the burst
    # A cost over the burst takes the whole bucket, once full, rather than never fitting.
    assert buckets.take("env", 50) == (False, 9.0)
    clock.now += 1
    assert buckets.take("env", 50) == (True, 0.0)
    with pytest.raises(ValueError):
        TokenBuckets(0)


@asynccontextmanager
async def limited_app(database: stores.TestDatabase, folder: Path, **settings: Any) -> AsyncIterator[tuple[FastAPI, Tenancy, Clock]]:
    app = create_app(load_settings(data_dir=folder, database_url=database.url, secret_key="test-secret-key", **settings))
    clock = Clock()
    for category in (app.state.rate_limits.triggers, app.state.rate_limits.requests):
        if category is not None:
            category.buckets.clock = clock
    if app.state.rate_limits.sessions is not None:
        app.state.rate_limits.sessions.clock = clock
    async with app.state.sessionmaker() as session:
        result = await create_organization(session)
        await session.commit()
    development, production = result.environments
    tenancy = Tenancy(
        result.organization.id,
        development.environment.id,
        development.api_key or "",
        production.environment.id,
        production.api_key or "",
    )
    try:
        yield app, tenancy, clock
    finally:
        await app.state.engine.dispose()


@pytest.fixture
def limited(database: stores.TestDatabase, tmp_path: Path) -> Callable[..., Any]:
    return lambda **settings: limited_app(database, tmp_path, **settings)


def assert_rate_limited(response: httpx.Response, retry_after: int = 1, remaining: int = 0) -> None:
    assert_error(response, 429, RATE_LIMITED_MESSAGE)
    assert response.json()["error"] == "Too Many Requests"
    assert response.headers["retry-after"] == str(retry_after)
    assert response.headers["ratelimit-remaining"] == str(remaining)
    assert int(response.headers["ratelimit-reset"]) >= retry_after


async def test_triggers_over_the_rate_are_429_with_novus_body_and_headers(limited: Callable[..., Any]) -> None:
    async with limited(rate_limit_triggers=5, rate_limit_requests=50) as (app, tenancy, clock):
        async with make_client(app, tenancy.api_key) as api, make_client(app, tenancy.production_api_key) as production:
            workflow = await create_workflow(api)
            trigger = {"name": workflow["triggers"][0]["identifier"], "to": "ada"}
            remaining = []
            for _ in range(5):
                response = await api.post("/v1/events/trigger", json=trigger)
                assert response.status_code == 201, response.text
                # Every answer says where the caller stands, as Novu's do.
                assert response.headers["ratelimit-limit"] == "5"
                remaining.append(int(response.headers["ratelimit-remaining"]))
            assert remaining == [4, 3, 2, 1, 0]
            assert response.headers["ratelimit-policy"].startswith('5;w=1;burst=5;comment="token bucket";category="trigger"')
            refused = await api.post("/v1/events/trigger", json=trigger)
            assert_rate_limited(refused)
            # Another environment has its own bucket; the same environment's other routes have theirs.
            assert (await production.post("/v1/events/trigger", json={**trigger, "name": "nothing"})).status_code == 422
            response = await api.get("/v1/integrations")
            assert response.status_code == 200
            assert response.headers["ratelimit-limit"] == "50"
            assert response.headers["ratelimit-remaining"] == "48"  # the workflow was the first
            # A fifth of a second later the bucket holds one trigger again.
            clock.now += 0.2
            assert (await api.post("/v1/events/trigger", json=trigger)).status_code == 201
            assert_rate_limited(await api.post("/v1/events/trigger", json=trigger))


async def test_other_routes_over_their_rate_are_429(limited: Callable[..., Any]) -> None:
    async with limited(rate_limit_triggers=5, rate_limit_requests=3) as (app, tenancy, clock):
        async with make_client(app, tenancy.api_key) as api, make_client(app) as anonymous:
            for _ in range(3):
                assert (await api.get("/v1/subscribers")).status_code == 200
            assert_rate_limited(await api.get("/v1/topics"))
            # Requests without a key, or with an unknown one, are answered 401 as before: they name no environment.
            assert_error(await anonymous.get("/v1/topics"), 401)
            assert_error(await anonymous.get("/v1/topics", headers={"Authorization": "ApiKey nope"}), 401)
            assert (await anonymous.get("/v1/health-check")).status_code == 200
            clock.now += 1
            assert (await api.get("/v1/topics")).status_code == 200


async def test_bulk_triggers_and_broadcasts_cost_a_hundred(limited: Callable[..., Any]) -> None:
    """As Novu's BULK cost: a bulk trigger of any size, or a broadcast, takes 100 of the trigger bucket."""
    async with limited(rate_limit_triggers=250, rate_limit_requests=50) as (app, tenancy, clock):
        async with make_client(app, tenancy.api_key) as api:
            workflow = await create_workflow(api)
            trigger = {"name": workflow["triggers"][0]["identifier"], "to": "ada"}
            response = await api.post("/v1/events/trigger/bulk", json={"events": [trigger]})
            assert response.status_code == 201, response.text
            assert response.headers["ratelimit-remaining"] == str(250 - BULK_COST)
            assert 'cost="bulk"' in response.headers["ratelimit-policy"]
            response = await api.post("/v1/events/trigger/broadcast", json={"name": trigger["name"], "payload": {}})
            assert response.status_code == 201, response.text
            assert response.headers["ratelimit-remaining"] == "50"
            # 50 single triggers still fit; another bulk does not, and is told when it will (half a second: 1 s).
            assert_rate_limited(await api.post("/v1/events/trigger/bulk", json={"events": [trigger]}), remaining=50)
            assert (await api.post("/v1/events/trigger", json=trigger)).status_code == 201
            # A bucket smaller than the cost is emptied by one bulk request, once full.
        async with limited(rate_limit_triggers=20, rate_limit_requests=50) as (app, tenancy, clock):
            async with make_client(app, tenancy.api_key) as api:
                workflow = await create_workflow(api)
                events = {"events": [{"name": workflow["triggers"][0]["identifier"], "to": "ada"}]}
                assert (await api.post("/v1/events/trigger/bulk", json=events)).status_code == 201
                assert_rate_limited(await api.post("/v1/events/trigger/bulk", json=events))
                clock.now += 1
                assert (await api.post("/v1/events/trigger/bulk", json=events)).status_code == 201


async def test_a_refused_request_claims_no_idempotency_key(limited: Callable[..., Any]) -> None:
    """The limit is checked before the idempotency middleware: the client's retry after Retry-After runs."""
    async with limited(rate_limit_triggers=1, rate_limit_requests=50) as (app, tenancy, clock):
        async with make_client(app, tenancy.api_key) as api:
            workflow = await create_workflow(api)
            trigger = {"name": workflow["triggers"][0]["identifier"], "to": "ada"}
            assert (await api.post("/v1/events/trigger", json=trigger)).status_code == 201
            key = {"idempotency-key": "limited-once"}
            assert_rate_limited(await api.post("/v1/events/trigger", json=trigger, headers=key))
            clock.now += 1
            response = await api.post("/v1/events/trigger", json=trigger, headers=key)
            assert response.status_code == 201, response.text
            assert "idempotency-replay" not in response.headers


async def test_a_rate_of_0_is_no_limit(limited: Callable[..., Any]) -> None:
    async with limited(rate_limit_triggers=0, rate_limit_requests=0) as (app, tenancy, clock):
        assert app.state.rate_limits.triggers is None and app.state.rate_limits.requests is None
        async with make_client(app, tenancy.api_key) as api:
            workflow = await create_workflow(api)
            trigger = {"name": workflow["triggers"][0]["identifier"], "to": "ada"}
            for _ in range(30):
                response = await api.post("/v1/events/trigger", json=trigger)
                assert response.status_code == 201, response.text
            assert "ratelimit-limit" not in response.headers


def test_the_defaults_are_finite_and_the_settings_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, secret_key="k")
    assert (settings.rate_limit_triggers, settings.rate_limit_requests, settings.max_recipients) == (1000, 500, 1000)
    monkeypatch.setenv("HERALD_RATE_LIMIT_TRIGGERS", "0")
    monkeypatch.setenv("HERALD_RATE_LIMIT_REQUESTS", "12.5")
    monkeypatch.setenv("HERALD_MAX_RECIPIENTS", "10")
    settings = load_settings(data_dir=tmp_path, secret_key="k")
    assert (settings.rate_limit_triggers, settings.rate_limit_requests, settings.max_recipients) == (0, 12.5, 10)
    monkeypatch.setenv("HERALD_RATE_LIMIT_TRIGGERS", "-1")
    with pytest.raises(ValueError, match="HERALD_RATE_LIMIT_TRIGGERS"):
        load_settings(data_dir=tmp_path, secret_key="k")


def test_the_body_head_and_session_settings_read_and_refuse_what_they_cannot(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = load_settings(data_dir=tmp_path, secret_key="k")
    assert (settings.max_event_body_bytes, settings.head_timeout_seconds, settings.rate_limit_sessions) == (
        1024 * 1024,
        30,
        60,
    )
    for raw, size in (("512KB", 512 * 1024), ("2 MB", 2 * 1024 * 1024), ("300000", 300_000)):
        monkeypatch.setenv("HERALD_MAX_BODY", raw)
        assert load_settings(data_dir=tmp_path, secret_key="k").max_event_body_bytes == size
    for raw in ("0", "1.5MB", "21MB", "lots"):
        monkeypatch.setenv("HERALD_MAX_BODY", raw)
        with pytest.raises(ValueError, match=f"HERALD_MAX_BODY must be a size above 0 and at most 20MB.*not '{raw}'"):
            load_settings(data_dir=tmp_path, secret_key="k")
    monkeypatch.delenv("HERALD_MAX_BODY")
    for name, raw in (("HERALD_HEAD_TIMEOUT_SECONDS", "0"), ("HERALD_RATE_LIMIT_SESSIONS", "-1")):
        monkeypatch.setenv(name, raw)
        with pytest.raises(ValueError, match=name):
            load_settings(data_dir=tmp_path, secret_key="k")
        monkeypatch.delenv(name)


async def test_a_trigger_over_the_max_body_is_413(limited: Callable[..., Any]) -> None:
    async with limited(max_event_body_bytes=512 * 1024) as (app, tenancy, _clock):
        async with make_client(app, tenancy.api_key) as api:
            workflow = await create_workflow(api)
            trigger = {"name": workflow["triggers"][0]["identifier"], "to": "ada", "payload": {"blob": "x" * 500_000}}
            assert (await api.post("/v1/events/trigger", json=trigger)).status_code == 201
            trigger["payload"] = {"blob": "x" * 530_000}
            response = await api.post("/v1/events/trigger", json=trigger)
            assert_error(response, 413, "Request body is larger than the limit of 512 KB for this route")


async def start_session(app: FastAPI, environment_id: str, subscriber_id: str, address: str = "127.0.0.1") -> httpx.Response:
    """POST /v1/inbox/session from a browser at ``address``."""
    async with app.state.sessionmaker() as session:
        identifier = (await session.execute(select(Environment.identifier).where(Environment.id == environment_id))).scalar_one()
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=(address, 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://herald.test") as client:
        return await client.post(
            "/v1/inbox/session", json={"applicationIdentifier": identifier, "subscriber": {"subscriberId": subscriber_id}}
        )


async def subscribers_in(app: FastAPI, environment_id: str) -> int:
    async with app.state.sessionmaker() as session:
        count = select(func.count()).select_from(Subscriber).where(Subscriber.environment_id == environment_id)
        return int((await session.execute(count)).scalar_one())


async def test_inbox_sessions_over_the_rate_are_429_per_environment_and_address(limited: Callable[..., Any]) -> None:
    async with limited(rate_limit_sessions=3) as (app, tenancy, clock):
        for number in range(3):
            assert (await start_session(app, tenancy.environment_id, f"page-{number}")).status_code == 201
        refused = await start_session(app, tenancy.environment_id, "page-3")
        assert_error(refused, 429, RATE_LIMITED_MESSAGE)
        assert refused.headers["retry-after"] == "20"  # 3 a minute: one every 20 s
        # Refused before it made its subscriber.
        assert await subscribers_in(app, tenancy.environment_id) == 3
        # Another address, another environment: buckets of their own.
        assert (await start_session(app, tenancy.environment_id, "page-3", address="10.0.0.2")).status_code == 201
        assert (await start_session(app, tenancy.production_environment_id, "page-3")).status_code == 201
        clock.now += 20
        assert (await start_session(app, tenancy.environment_id, "page-3")).status_code == 201


async def test_inbox_routes_are_charged_to_their_environment_apart_from_its_api_calls(limited: Callable[..., Any]) -> None:
    async with limited(rate_limit_requests=3, rate_limit_sessions=0) as (app, tenancy, _clock):
        token = (await start_session(app, tenancy.environment_id, "reader")).json()["data"]["token"]
        async with make_client(app, Authorization=f"Bearer {token}") as inbox, make_client(app, tenancy.api_key) as api:
            for _ in range(3):
                assert (await inbox.get("/v1/inbox/notifications")).status_code == 200
            assert_rate_limited(await inbox.get("/v1/inbox/notifications/count"))
            # The environment's API calls have their own share.
            assert (await api.get("/v1/subscribers")).status_code == 200
            # A token that does not verify is charged nothing and answered 401.
            async with make_client(app, Authorization="Bearer forged") as forged:
                assert_error(await forged.get("/v1/inbox/notifications"), 401)


async def test_provider_webhooks_are_charged_to_the_environment_their_path_names(limited: Callable[..., Any]) -> None:
    async with limited(rate_limit_requests=2) as (app, tenancy, _clock):
        async with make_client(app) as provider:

            def path(environment_id: str) -> str:
                return f"/webhooks/organizations/{tenancy.organization_id}/environments/{environment_id}/email/none"

            for _ in range(2):
                assert (await provider.post(path(tenancy.environment_id), json=[])).status_code != 429
            assert_rate_limited(await provider.post(path(tenancy.environment_id), json=[]))
            inbound = f"/v2/inbound-webhooks/delivery-providers/{tenancy.environment_id}/none"
            assert_rate_limited(await provider.post(inbound, json=[]))
            assert (await provider.post(path(tenancy.production_environment_id), json=[])).status_code != 429
