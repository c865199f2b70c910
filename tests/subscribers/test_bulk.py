"""POST /v1/subscribers/bulk: up to 500 subscribers created or updated in one request, in the order sent."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event

from herald.kit.crypto import mask_secret
from herald.subscribers.repository import SubscriberRepository
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_integration, create_subscriber, unique


async def bulk(api: httpx.AsyncClient, subscribers: list[dict[str, Any]]) -> dict[str, Any]:
    response = await api.post("/v1/subscribers/bulk", json={"subscribers": subscribers})
    assert response.status_code == 201, response.text
    return response.json()["data"]


async def bulk_recording(api: httpx.AsyncClient, app: FastAPI, subscribers: list[dict[str, Any]], marker: str) -> tuple[dict[str, Any], list[str]]:
    """The bulk request's answer, and the statements it ran that contain ``marker``."""
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if marker in statement:
            statements.append(statement)

    event.listen(app.state.engine.sync_engine, "before_cursor_execute", record)
    try:
        return await bulk(api, subscribers), statements
    finally:
        event.remove(app.state.engine.sync_engine, "before_cursor_execute", record)


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["subscriberId"] for item in items]


async def test_new_subscribers_are_created_and_known_ones_updated_in_the_order_sent(api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    existing = await create_subscriber(api, firstName="Old", lastName="Keep")
    first, second = unique("bulk"), unique("bulk")
    outcome = await bulk(
        api,
        [
            {"subscriberId": first, "firstName": "One", "email": "one@example.com", "data": {"plan": "pro"}},
            {"subscriberId": second, "firstName": "Two"},
            {"subscriberId": existing["subscriberId"], "firstName": "New"},
            {"subscriberId": second, "lastName": "Again"},
        ],
    )
    assert (ids(outcome["created"]), ids(outcome["updated"]), outcome["failed"]) == (
        [first, second],
        [existing["subscriberId"], second],
        [],
    )
    one = (await api.get(f"/v1/subscribers/{first}")).json()["data"]
    assert (one["firstName"], one["email"], one["data"], one["_environmentId"]) == ("One", "one@example.com", {"plan": "pro"}, tenancy.environment_id)
    two = (await api.get(f"/v1/subscribers/{second}")).json()["data"]
    assert (two["firstName"], two["lastName"], two["__v"]) == ("Two", "Again", 0)
    updated = (await api.get(f"/v1/subscribers/{existing['subscriberId']}")).json()["data"]
    assert (updated["firstName"], updated["lastName"], updated["__v"]) == ("New", "Keep", 1)


async def test_a_subscriber_whose_channel_cannot_be_set_fails_alone(api: httpx.AsyncClient) -> None:
    await create_integration(api, providerId="slack", channel="chat", active=True, credentials={})
    existing = await create_subscriber(api, firstName="Kept")
    good = unique("bulk")
    webhook = {"webhookUrl": "https://hooks.example.com/1"}
    outcome = await bulk(
        api,
        [
            {"subscriberId": existing["subscriberId"], "firstName": "Changed", "channels": [{"providerId": "discord", "credentials": webhook}]},
            {"subscriberId": good, "channels": [{"providerId": "slack", "credentials": webhook}]},
        ],
    )
    assert outcome["failed"] == [{"message": "No active integration found for provider discord", "subscriberId": existing["subscriberId"]}]
    assert (ids(outcome["created"]), outcome["updated"]) == ([good], [])
    assert (await api.get(f"/v1/subscribers/{existing['subscriberId']}")).json()["data"]["firstName"] == "Kept"
    [channel] = (await api.get(f"/v1/subscribers/{good}")).json()["data"]["channels"]
    assert (channel["providerId"], channel["credentials"]["webhookUrl"]) == ("slack", mask_secret(webhook["webhookUrl"]))


async def test_more_than_500_or_an_invalid_subscriber_is_refused_whole(api: httpx.AsyncClient) -> None:
    too_many = [{"subscriberId": unique("bulk")} for _ in range(501)]
    response = await api.post("/v1/subscribers/bulk", json={"subscribers": too_many})
    assert "subscribers" in assert_error(response, 422, "Validation Error")["errors"]
    fine, bad = unique("bulk"), {"subscriberId": unique("bulk"), "email": "not an email"}
    response = await api.post("/v1/subscribers/bulk", json={"subscribers": [{"subscriberId": fine}, bad]})
    assert "subscribers.1.email" in assert_error(response, 422, "Validation Error")["errors"]
    assert (await api.get(f"/v1/subscribers/{fine}")).status_code == 404  # nothing of a refused request is kept


async def test_a_batch_is_a_few_statements_not_a_few_per_subscriber(api: httpx.AsyncClient, app: FastAPI) -> None:
    known = [await create_subscriber(api) for _ in range(3)]
    subscribers = [{"subscriberId": s["subscriberId"], "firstName": "Again"} for s in known]
    subscribers += [{"subscriberId": unique("bulk"), "firstName": "New"} for _ in range(200)]
    outcome, statements = await bulk_recording(api, app, subscribers, "subscribers")
    assert (len(outcome["created"]), len(outcome["updated"])) == (200, 3)
    # One look-up, the three updates, the inserts (a statement per batch of rows the driver sends).
    assert len(statements) < 20, statements
    listed = (await api.get("/v1/subscribers", params={"limit": 100})).json()
    assert listed["totalCount"] >= 203


async def test_500_subscribers_with_their_data_fit_in_one_request(api: httpx.AsyncClient) -> None:
    """Over the 100 KB most routes take: the bulk route takes what its 500 subscribers carry."""
    subscribers = [
        {"subscriberId": unique("bulk"), "email": f"reader{n}@example.com", "firstName": "Reader", "data": {"bio": "x" * 300}}
        for n in range(500)
    ]
    outcome = await bulk(api, subscribers)
    assert len(outcome["created"]) == 500


async def test_a_provider_named_by_every_subscriber_is_looked_up_once(api: httpx.AsyncClient, app: FastAPI) -> None:
    await create_integration(api, providerId="slack", channel="chat", active=True, credentials={})
    webhook = {"webhookUrl": "https://hooks.example.com/1"}
    subscribers = [{"subscriberId": unique("bulk"), "channels": [{"providerId": "slack", "credentials": webhook}]} for _ in range(50)]
    outcome, lookups = await bulk_recording(api, app, subscribers, "FROM integrations")
    assert len(outcome["created"]) == 50
    assert len(lookups) == 1, lookups


async def test_a_subscriber_created_meanwhile_by_another_request_is_updated_and_reported_updated(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = await create_subscriber(api, firstName="Before", lastName="Kept")
    newcomer = unique("bulk")
    # The batch's look-up misses the subscriber, as when another request creates it after the look-up.
    real_lookup = SubscriberRepository.find_by_subscriber_ids

    async def lookup_before_the_other_request(self: SubscriberRepository, environment_id: str, ids: Any) -> Any:
        return [found for found in await real_lookup(self, environment_id, ids) if found.subscriber_id != taken["subscriberId"]]

    monkeypatch.setattr(SubscriberRepository, "find_by_subscriber_ids", lookup_before_the_other_request)
    outcome = await bulk(
        api,
        [{"subscriberId": taken["subscriberId"], "firstName": "After"}, {"subscriberId": newcomer, "firstName": "New"}],
    )
    assert (ids(outcome["created"]), ids(outcome["updated"]), outcome["failed"]) == ([newcomer], [taken["subscriberId"]], [])
    stored = (await api.get(f"/v1/subscribers/{taken['subscriberId']}")).json()["data"]
    assert (stored["_id"], stored["firstName"], stored["lastName"]) == (taken["_id"], "After", "Kept")
    assert (await api.get(f"/v1/subscribers/{newcomer}")).json()["data"]["firstName"] == "New"
