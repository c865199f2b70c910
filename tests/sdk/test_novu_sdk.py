"""The official Novu Python SDK (novu-py, unmodified) against a running Herald.

The SDK validates every response against its own models, so these calls fail
if any field it requires is missing or of the wrong type.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import novu_py
import pytest
from fastapi import FastAPI
from novu_py import Novu

from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, create_workflow, insert_in_app_message
from tests.fixtures.server import running_server


@pytest.fixture
def server_url(app: FastAPI) -> Iterator[str]:
    with running_server(app.state.settings) as url:
        yield url


async def test_sdk_round_trip(server_url: str, api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    novu = Novu(secret_key=tenancy.api_key, server_url=server_url)

    def call_sdk() -> dict:
        created = novu.integrations.create(
            create_integration_request_dto={
                "provider_id": "sendgrid",
                "channel": novu_py.CreateIntegrationRequestDtoChannel.EMAIL,
                "credentials": {"api_key": "SG.key", "from_": "hello@example.com"},
                "active": True,
            }
        ).result
        second = novu.integrations.create(
            create_integration_request_dto={
                "provider_id": "mailgun",
                "channel": "email",
                "active": True,
                "credentials": {"api_key": "key-test", "domain": "mg.example.com"},
            }
        ).result
        primary = novu.integrations.set_as_primary(integration_id=second.id).result
        active = novu.integrations.list_active().result
        return {"created": created, "primary": primary, "active": active}

    results = await asyncio.to_thread(call_sdk)
    assert results["created"].provider_id == "sendgrid"
    assert results["primary"].primary is True
    assert {item.id for item in results["active"]} >= {results["created"].id, results["primary"].id}

    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    message = await insert_in_app_message(app, subscriber)

    def trigger_and_mark() -> tuple:
        triggered = novu.trigger(
            trigger_event_request_dto={
                "workflow_id": workflow["triggers"][0]["identifier"],
                "to": subscriber["subscriberId"],
                "payload": {"name": "Ada"},
            }
        ).result
        marked = novu.subscribers.messages.mark_all_as(
            subscriber_id=subscriber["subscriberId"],
            message_mark_as_request_dto={"message_id": message.id, "mark_as": "read"},
        ).result
        return triggered, marked

    triggered, marked = await asyncio.to_thread(trigger_and_mark)
    assert triggered.acknowledged is True
    assert triggered.status.value == "processed"
    assert [m.id for m in marked] == [message.id]
    assert marked[0].read is True and marked[0].seen is True


async def test_sdk_reads_the_inbox_feed_the_engine_made(
    server_url: str, api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    from dataclasses import replace

    from herald.app import build_worker

    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    response = await api.post(
        "/v1/events/trigger",
        json={"name": workflow["triggers"][0]["identifier"], "to": subscriber["subscriberId"], "payload": {"name": "Ada"}},
    )
    assert response.json()["data"]["status"] == "processed"
    worker = build_worker(replace(app.state.settings), app.state.sessionmaker)
    try:
        await worker.run_until_idle()
    finally:
        await worker.http.aclose()
    novu = Novu(secret_key=tenancy.api_key, server_url=server_url)
    feed = await asyncio.to_thread(
        lambda: novu.subscribers.notifications.feed(request={"subscriber_id": subscriber["subscriberId"]}).result
    )
    [item] = feed.data
    assert item.content == "Hello Ada"
    assert item.read is False and item.archived is False


async def test_sdk_reads_a_refused_trigger_as_its_validation_error(server_url: str, tenancy: Tenancy) -> None:
    """Every 422 carries ``errors``, so the SDK raises its typed error, not ResponseValidationError."""
    novu = Novu(secret_key=tenancy.api_key, server_url=server_url)

    def trigger_unknown() -> Exception:
        try:
            novu.trigger(trigger_event_request_dto={"workflow_id": "no-such-workflow", "to": "ada"})
        except Exception as exc:  # the assertion below names what was expected
            return exc
        raise AssertionError("the trigger of an unknown workflow was accepted")

    error = await asyncio.to_thread(trigger_unknown)
    assert isinstance(error, novu_py.models.ValidationErrorDto), repr(error)
    assert error.data.status_code == 422
    assert error.data.message == "workflow_not_found"
    assert error.data.errors["general"].messages == ["workflow_not_found"]


async def test_sdk_creates_subscribers_in_bulk(server_url: str, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    novu = Novu(secret_key=tenancy.api_key, server_url=server_url)
    existing = await create_subscriber(api)
    fresh = f"sdk-bulk-{tenancy.environment_id}"

    def bulk() -> novu_py.BulkCreateSubscriberResponseDto:
        return novu.subscribers.create_bulk(
            bulk_subscriber_create_dto={
                "subscribers": [
                    {"subscriber_id": fresh, "first_name": "Fresh"},
                    {"subscriber_id": existing["subscriberId"], "last_name": "Known"},
                ]
            }
        ).result

    outcome = await asyncio.to_thread(bulk)
    assert [item.subscriber_id for item in outcome.created] == [fresh]
    assert [item.subscriber_id for item in outcome.updated] == [existing["subscriberId"]]
    assert outcome.failed == []
    assert (await api.get(f"/v1/subscribers/{fresh}")).json()["data"]["firstName"] == "Fresh"


async def test_sdk_waits_out_a_rate_limit_and_its_retry_runs(app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    """novu-py retries a 429 after its Retry-After (1 s here), with the same idempotency key: the retry
    runs, as the refused request claimed nothing, and each trigger is recorded once."""
    from dataclasses import replace

    workflow = await create_workflow(api)
    limited = replace(app.state.settings, rate_limit_triggers=1)
    statuses: list[int] = []
    client = httpx.Client(event_hooks={"response": [lambda response: statuses.append(response.status_code)]})
    with running_server(limited) as url, client:
        novu = Novu(secret_key=tenancy.api_key, server_url=url, client=client)

        def trigger_twice() -> list:
            return [
                novu.trigger(
                    trigger_event_request_dto={"workflow_id": workflow["triggers"][0]["identifier"], "to": "ada"}
                ).result
                for _ in range(2)
            ]

        first, second = await asyncio.to_thread(trigger_twice)
    assert statuses == [201, 429, 201]
    assert first.status.value == second.status.value == "processed"
    assert first.transaction_id != second.transaction_id
