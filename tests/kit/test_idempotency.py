from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select

from herald.models import Integration
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.builders import unique


async def count_integrations(app: FastAPI, environment_id: str, name: str) -> int:
    async with app.state.sessionmaker() as session:
        return int(
            await session.scalar(
                select(func.count()).select_from(Integration).where(
                    Integration.environment_id == environment_id, Integration.name == name
                )
            )
        )


async def test_repeat_replays_the_first_answer(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    key = unique("key")
    body = {"providerId": "sendgrid", "channel": "email", "name": unique("mail")}
    first = await api.post("/v1/integrations", json=body, headers={"idempotency-key": key})
    assert first.status_code == 201
    assert "idempotency-replay" not in first.headers
    again = await api.post("/v1/integrations", json=body, headers={"idempotency-key": key})
    assert again.status_code == 201
    assert again.headers["idempotency-replay"] == "true"
    assert again.headers["idempotency-key"] == key
    assert again.json() == first.json()
    assert await count_integrations(app, tenancy.environment_id, body["name"]) == 1


async def test_same_key_other_body_is_422(api: httpx.AsyncClient) -> None:
    key = unique("key")
    await api.post("/v1/integrations", json={"providerId": "sendgrid", "channel": "email"}, headers={"idempotency-key": key})
    response = await api.post(
        "/v1/integrations", json={"providerId": "mailgun", "channel": "email"}, headers={"idempotency-key": key}
    )
    assert_error(response, 422, f'Request with key "{key}" is being reused for a different body')


async def test_key_too_long_is_400(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v1/integrations", json={"providerId": "sendgrid", "channel": "email"}, headers={"idempotency-key": "k" * 256}
    )
    assert_error(response, 400)
    assert "exceeded the maximum allowed length of 255" in response.json()["message"]


async def test_keys_are_per_organization(api: httpx.AsyncClient, other_org_api: httpx.AsyncClient) -> None:
    key = unique("key")
    body = {"providerId": "sendgrid", "channel": "email"}
    assert (await api.post("/v1/integrations", json=body, headers={"idempotency-key": key})).status_code == 201
    other = await other_org_api.post("/v1/integrations", json=body, headers={"idempotency-key": key})
    assert other.status_code == 201
    assert "idempotency-replay" not in other.headers


async def test_errors_are_replayed_too(api: httpx.AsyncClient) -> None:
    key = unique("key")
    first = await api.post("/v1/integrations/000000000000000000000000/set-primary", headers={"idempotency-key": key})
    assert_error(first, 404)
    again = await api.post("/v1/integrations/000000000000000000000000/set-primary", headers={"idempotency-key": key})
    assert again.status_code == 404
    assert again.headers["idempotency-replay"] == "true"


async def test_get_is_never_cached(api: httpx.AsyncClient) -> None:
    key = unique("key")
    await api.get("/v1/integrations", headers={"idempotency-key": key})
    response = await api.get("/v1/integrations", headers={"idempotency-key": key})
    assert "idempotency-replay" not in response.headers


async def test_parallel_copies_have_one_effect(app: FastAPI, tenancy: Tenancy) -> None:
    """The SDK retries; copies of one request racing each other must create one integration."""
    key = unique("key")
    body = {"providerId": "sendgrid", "channel": "email", "name": unique("race")}
    async with make_client(app, tenancy.api_key) as client:
        responses = await asyncio.gather(
            *(client.post("/v1/integrations", json=body, headers={"idempotency-key": key}) for _ in range(10))
        )
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {201, 409}, statuses
    created = [r for r in responses if r.status_code == 201 and "idempotency-replay" not in r.headers]
    assert len(created) == 1
    for response in responses:
        if response.status_code == 409:
            assert response.headers["retry-after"] == "1"
        if response.status_code == 201:
            assert response.json()["data"]["_id"] == created[0].json()["data"]["_id"]
    assert await count_integrations(app, tenancy.environment_id, body["name"]) == 1


async def test_unauthenticated_request_with_key_still_401(anonymous: httpx.AsyncClient) -> None:
    response = await anonymous.post("/v1/integrations", json={}, headers={"idempotency-key": "k"})
    assert_error(response, 401, "Missing authorization header")
