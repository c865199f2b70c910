"""The failover fields of the integration routes: ``priority`` in and out, ``health`` out, as Novu's SDK reads them."""

from __future__ import annotations

from datetime import timedelta

import httpx
from fastapi import FastAPI
from novu_py.models.integrationresponsedto import IntegrationResponseDto

from herald.engine.breaker import now
from herald.models import IntegrationHealth
from tests.conftest import Tenancy
from tests.fixtures.builders import create_integration


async def test_priority_is_taken_on_create_and_update_and_health_is_shown(
    api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    first = await create_integration(api, active=True, credentials={"apiKey": "SG.1", "from": "a@example.com"})
    second = await create_integration(
        api, active=True, priority=7, credentials={"apiKey": "SG.2", "from": "a@example.com"}
    )
    assert first["primary"] and not second["primary"] and second["priority"] == 7
    assert second["health"] == {"status": "healthy", "consecutiveFailures": 0}
    inactive = await create_integration(api, priority=3, credentials={"apiKey": "SG.3"})
    assert inactive["priority"] == 3

    updated = await api.put(f"/v1/integrations/{second['_id']}", json={"priority": 42})
    assert updated.status_code == 200 and updated.json()["data"]["priority"] == 42
    listed = {item["_id"]: item for item in (await api.get("/v1/integrations")).json()["data"]}
    assert listed[second["_id"]]["priority"] == 42 and listed[first["_id"]]["primary"]
    for item in listed.values():
        IntegrationResponseDto.model_validate(item)

    too_big = await api.post("/v1/integrations", json={"providerId": "sendgrid", "channel": "email", "priority": 10**9})
    assert too_big.status_code == 422 and "priority" in too_big.text


async def test_health_of_a_skipped_integration_validates_in_the_sdk_model(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    integration = await create_integration(api, active=True, credentials={"apiKey": "SG.1", "from": "a@example.com"})
    at = now()
    async with app.state.sessionmaker() as session, session.begin():
        session.add(
            IntegrationHealth(
                integration_id=integration["_id"],
                environment_id=tenancy.environment_id,
                failures=5,
                window_started_at=at - timedelta(seconds=20),
                consecutive_failures=5,
                failing_since=at - timedelta(seconds=20),
                skipped_until=at + timedelta(seconds=30),
                last_error="sendgrid: 503 unavailable",
            )
        )
    for path in ("/v1/integrations", "/v1/integrations/active"):
        [shown] = [item for item in (await api.get(path)).json()["data"] if item["_id"] == integration["_id"]]
        health = shown["health"]
        assert health["status"] == "skipped" and health["consecutiveFailures"] == 5
        assert health["skippedUntil"] > health["failingSince"]
        assert health["lastError"] == "sendgrid: 503 unavailable"
        IntegrationResponseDto.model_validate(shown)


async def test_renumbering_keeps_the_primary_first_and_the_fallbacks_in_their_order(api: httpx.AsyncClient) -> None:
    primary = await create_integration(api, active=True, credentials={"apiKey": "SG.1", "from": "a@example.com"})
    high = await create_integration(
        api, active=True, priority=50, credentials={"apiKey": "SG.2", "from": "a@example.com"}
    )
    low = await create_integration(
        api, active=True, priority=10, credentials={"apiKey": "SG.3", "from": "a@example.com"}
    )
    gone = await create_integration(
        api, active=True, priority=30, credentials={"apiKey": "SG.4", "from": "a@example.com"}
    )
    deactivated = await api.put(f"/v1/integrations/{gone['_id']}", json={"active": False})
    assert deactivated.status_code == 200
    listed = {item["_id"]: item for item in (await api.get("/v1/integrations")).json()["data"]}
    order = sorted((listed[i["_id"]] for i in (primary, high, low)), key=lambda item: -item["priority"])
    assert [item["_id"] for item in order] == [primary["_id"], high["_id"], low["_id"]]
    assert listed[primary["_id"]]["primary"] and listed[gone["_id"]]["priority"] == 0
