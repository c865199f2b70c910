"""The /v2/subscribers routes as the novu-py SDK calls and parses them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import novu_py
import pytest
from fastapi import FastAPI
from novu_py import models
from novu_py.utils import BackoffStrategy, RetryConfig

from tests.conftest import BASE_URL, Tenancy, assert_error, make_client
from tests.fixtures.builders import create_integration, create_subscriber, insert_in_app_message, unique

NO_RETRIES = RetryConfig("none", BackoffStrategy(1, 1, 1, 1), False)


@pytest.fixture
async def sdk(app: FastAPI, tenancy: Tenancy) -> AsyncIterator[novu_py.Novu]:
    """The official SDK, talking to Herald in-process."""
    async with make_client(app) as client:
        yield novu_py.Novu(
            secret_key=tenancy.api_key, server_url=BASE_URL, async_client=client, retry_config=NO_RETRIES
        )


def unwrap(response: httpx.Response) -> dict[str, Any]:
    """What the SDK parses: it strips the envelope when ``data`` is the only key."""
    body = response.json()
    assert list(body) == ["data"], body
    return body["data"]


async def test_sdk_create_retrieve_patch_delete(sdk: novu_py.Novu, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    subscriber_id = unique("sdk")
    created = await sdk.subscribers.create_async(
        create_subscriber_request_dto={
            "subscriber_id": subscriber_id,
            "first_name": "Grace",
            "email": "grace@example.com",
            "timezone": "America/New_York",
            "locale": "en-US",
            "data": {"team": "navy"},
        }
    )
    subscriber = created.result
    assert isinstance(subscriber, models.SubscriberResponseDto)
    assert subscriber.subscriber_id == subscriber_id
    assert subscriber.first_name == "Grace"
    assert subscriber.environment_id == tenancy.environment_id
    assert subscriber.organization_id == tenancy.organization_id
    assert subscriber.deleted is False
    assert subscriber.data == {"team": "navy"}
    assert subscriber.v == 0

    fetched = (await sdk.subscribers.retrieve_async(subscriber_id=subscriber_id)).result
    assert fetched.id == subscriber.id
    assert fetched.timezone == "America/New_York"

    patched = (
        await sdk.subscribers.patch_async(
            subscriber_id=subscriber_id, patch_subscriber_request_dto={"last_name": "Hopper"}
        )
    ).result
    assert patched.last_name == "Hopper"
    assert patched.first_name == "Grace"
    assert patched.v == 1

    removed = (await sdk.subscribers.delete_async(subscriber_id=subscriber_id)).result
    assert isinstance(removed, models.RemoveSubscriberResponseDto)
    assert removed.acknowledged is True and removed.status == "deleted"
    assert_error(await api.get(f"/v1/subscribers/{subscriber_id}"), 404)


async def test_sdk_sees_404_as_error_dto(sdk: novu_py.Novu) -> None:
    with pytest.raises(models.ErrorDto) as raised:
        await sdk.subscribers.retrieve_async(subscriber_id="ghost")
    assert raised.value.data.status_code == 404
    assert raised.value.data.message == "Subscriber: ghost was not found"


async def test_create_updates_unless_fail_if_exists(api: httpx.AsyncClient) -> None:
    subscriber_id = unique("v2")
    first = await api.post("/v2/subscribers", json={"subscriberId": subscriber_id, "firstName": "A"})
    assert first.status_code == 201, first.text
    created = models.SubscriberResponseDto.model_validate(unwrap(first))
    again = await api.post("/v2/subscribers", json={"subscriberId": subscriber_id, "lastName": "B"})
    assert again.status_code == 201
    updated = models.SubscriberResponseDto.model_validate(unwrap(again))
    assert updated.id == created.id
    assert (updated.first_name, updated.last_name) == ("A", "B")
    refused = await api.post(
        "/v2/subscribers", params={"failIfExists": "true"}, json={"subscriberId": subscriber_id, "lastName": "C"}
    )
    assert_error(refused, 409, f'Subscriber with id "{subscriber_id}" already exists')
    assert (await api.get(f"/v2/subscribers/{subscriber_id}")).json()["data"]["lastName"] == "B"
    fresh = await api.post("/v2/subscribers", params={"failIfExists": "true"}, json={"subscriberId": unique("v2")})
    assert fresh.status_code == 201


async def test_v2_responses_parse_with_sdk_models_including_channels(api: httpx.AsyncClient) -> None:
    await create_integration(api, providerId="fcm", channel="push", active=True)
    subscriber = await create_subscriber(api, channels=[{"providerId": "fcm", "credentials": {"deviceTokens": ["t1"]}}])
    response = await api.get(f"/v2/subscribers/{subscriber['subscriberId']}")
    assert response.status_code == 200
    parsed = models.SubscriberResponseDto.model_validate(unwrap(response))
    assert parsed.channels is not None
    assert parsed.channels[0].provider_id == models.ChatOrPushProviderEnum.FCM
    assert parsed.channels[0].credentials.device_tokens == ["t1"]
    assert parsed.channels[0].integration_id
    response = await api.patch(f"/v2/subscribers/{subscriber['subscriberId']}", json={"firstName": None, "data": {}})
    parsed = models.SubscriberResponseDto.model_validate(unwrap(response))
    assert parsed.first_name is None and parsed.data == {}


async def test_v2_delete_removes_messages_and_answers_the_sdk_shape(api: httpx.AsyncClient, app: FastAPI) -> None:
    subscriber = await create_subscriber(api)
    await insert_in_app_message(app, subscriber)
    response = await api.delete(f"/v2/subscribers/{subscriber['subscriberId']}")
    assert response.status_code == 200
    models.RemoveSubscriberResponseDto.model_validate(unwrap(response))
    from sqlalchemy import func, select

    from herald.models import Message

    async with app.state.sessionmaker() as session:
        count = (
            await session.execute(select(func.count()).select_from(Message).where(Message.subscriber_id == subscriber["_id"]))
        ).scalar_one()
    assert count == 0


async def test_v2_404s_and_validation(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    subscriber = await create_subscriber(api)
    path = f"/v2/subscribers/{subscriber['subscriberId']}"
    message = f"Subscriber: {subscriber['subscriberId']} was not found"
    for client in (production_api, other_org_api):
        assert_error(await client.get(path), 404, message)
        assert_error(await client.patch(path, json={"firstName": "x"}), 404, message)
        assert_error(await client.delete(path), 404, message)
    assert "subscriberId" in assert_error(await api.post("/v2/subscribers", json={"firstName": "x"}), 422)["errors"]
    assert "email" in assert_error(await api.patch(path, json={"email": "x"}), 422)["errors"]
    assert "timezone" in assert_error(await api.patch(path, json={"timezone": "Nowhere/Else"}), 422)["errors"]
