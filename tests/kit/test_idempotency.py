from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select, update

from herald.app import build_worker
from herald.kit.time import utcnow
from herald.models import Event, IdempotencyRecord, Integration
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.builders import create_workflow, unique


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
    message = f'Request with key "{key}" is being reused for a different body'
    assert assert_error(response, 422, message)["errors"] == {"general": {"messages": [message], "value": None}}


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


async def test_keys_are_per_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    """A key Development used is Production's to use too: the trigger runs in each, each answered its own."""
    name = unique("Order shipped")
    identifiers = {(await create_workflow(client, name=name))["triggers"][0]["identifier"] for client in (api, production_api)}
    [identifier] = identifiers
    trigger = {"name": identifier, "to": unique("subscriber"), "payload": {"name": "Ada"}}
    key = {"idempotency-key": unique("key")}
    development = await api.post("/v1/events/trigger", json=trigger, headers=key)
    production = await production_api.post("/v1/events/trigger", json=trigger, headers=key)
    assert development.status_code == production.status_code == 201, production.text
    assert "idempotency-replay" not in production.headers
    transactions = {
        tenancy.environment_id: development.json()["data"]["transactionId"],
        tenancy.production_environment_id: production.json()["data"]["transactionId"],
    }
    assert len(set(transactions.values())) == 2
    async with app.state.sessionmaker() as session:
        events = (
            await session.execute(select(Event.environment_id, Event.transaction_id).where(Event.transaction_id.in_(transactions.values())))
        ).all()
    assert dict(events) == transactions
    # Within one environment a repeat still replays that environment's own answer.
    for client, first in ((api, development), (production_api, production)):
        again = await client.post("/v1/events/trigger", json=trigger, headers=key)
        assert again.headers["idempotency-replay"] == "true"
        assert again.json() == first.json()


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


async def test_stored_answers_are_sealed_and_replayed_in_clear(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    """The stored copy of an answer is sealed (an answer may carry a secret's masked edges)."""
    key = unique("key")
    body = {"providerId": "sendgrid", "channel": "email", "credentials": {"apiKey": "SG.very-secret-value"}}
    first = await api.post("/v1/integrations", json=body, headers={"idempotency-key": key})
    assert first.json()["data"]["credentials"]["apiKey"] == "****"
    async with app.state.sessionmaker() as session:
        record = await session.get(IdempotencyRecord, (tenancy.environment_id, key))
    assert record is not None and record.response_body
    assert "very-secret-value" not in record.response_body
    again = await api.post("/v1/integrations", json=body, headers={"idempotency-key": key})
    assert again.headers["idempotency-replay"] == "true"
    assert again.json() == first.json()


async def test_the_worker_purges_records_past_their_24_hours(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    body = {"providerId": "sendgrid", "channel": "email"}
    old, fresh = unique("old"), unique("fresh")
    for key in (old, fresh):
        assert (await api.post("/v1/integrations", json=body, headers={"idempotency-key": key})).status_code == 201
    async with app.state.sessionmaker() as session:
        await session.execute(
            update(IdempotencyRecord)
            .where(IdempotencyRecord.environment_id == tenancy.environment_id, IdempotencyRecord.key == old)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
        await session.commit()
    worker = build_worker(app.state.settings, app.state.sessionmaker)
    try:
        assert await worker.purge_expired_idempotency_records() >= 1
    finally:
        assert worker.http is not None
        await worker.http.aclose()
    async with app.state.sessionmaker() as session:
        assert await session.get(IdempotencyRecord, (tenancy.environment_id, old)) is None
        assert await session.get(IdempotencyRecord, (tenancy.environment_id, fresh)) is not None
    # The expired key is free again: the same request runs anew.
    again = await api.post("/v1/integrations", json=body, headers={"idempotency-key": old})
    assert again.status_code == 201 and "idempotency-replay" not in again.headers


async def test_a_repeat_while_the_first_still_runs_is_409_with_retry_after(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    key = unique("key")
    async with app.state.sessionmaker() as session:
        session.add(
            IdempotencyRecord(
                environment_id=tenancy.environment_id,
                key=key,
                body_hash="of-the-first-request",
                status="in_progress",
                created_at=utcnow(),
                expires_at=utcnow() + timedelta(hours=24),
            )
        )
        await session.commit()
    response = await api.post("/v1/integrations", json={"providerId": "sendgrid", "channel": "email"}, headers={"idempotency-key": key})
    assert_error(response, 409, f'Request with key "{key}" is currently being processed. Please retry after 1 second')
    assert response.headers["retry-after"] == "1"


async def test_the_same_json_laid_out_differently_is_the_same_body(api: httpx.AsyncClient) -> None:
    key = unique("key")
    compact = b'{"providerId":"sendgrid","channel":"email"}'
    spaced = b'{ "providerId": "sendgrid",\n  "channel": "email" }'
    headers = {"idempotency-key": key, "content-type": "application/json"}
    first = await api.post("/v1/integrations", content=compact, headers=headers)
    again = await api.post("/v1/integrations", content=spaced, headers=headers)
    assert again.status_code == first.status_code == 201
    assert again.headers["idempotency-replay"] == "true"


async def test_an_empty_key_is_no_key(api: httpx.AsyncClient) -> None:
    headers = {"idempotency-key": ""}
    first = await api.post("/v1/integrations", json={"providerId": "sendgrid", "channel": "email"}, headers=headers)
    other = await api.post("/v1/integrations", json={"providerId": "mailgun", "channel": "email"}, headers=headers)
    assert first.status_code == other.status_code == 201
    assert first.json()["data"]["_id"] != other.json()["data"]["_id"]
