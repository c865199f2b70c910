"""novu.subscribers.credentials.update, append, delete: a subscriber's chat and push channels."""

from __future__ import annotations

import httpx
from novu_py import Novu

from tests.fixtures.builders import create_integration, create_subscriber
from tests.sdk.operations.conftest import call


async def channels_of(api: httpx.AsyncClient, subscriber_id: str) -> dict[str, list[str]]:
    body = (await api.get(f"/v1/subscribers/{subscriber_id}")).json()["data"]
    return {
        channel["providerId"]: channel["credentials"].get("deviceTokens", []) for channel in body.get("channels") or []
    }


async def push_integrations(api: httpx.AsyncClient, *providers: str) -> None:
    """Credentials name a provider with an active integration, as in Novu."""
    for provider in providers:
        await create_integration(api, providerId=provider, channel="push", active=True)


async def test_subscribers_credentials_update(novu: Novu, api: httpx.AsyncClient) -> None:
    await push_integrations(api, "fcm")
    subscriber = await create_subscriber(api)
    for tokens in (["first"], ["second"]):
        updated = await call(
            lambda tokens=tokens: (
                novu.subscribers.credentials.update(
                    subscriber_id=subscriber["subscriberId"],
                    update_subscriber_channel_request_dto={
                        "provider_id": "fcm",
                        "credentials": {"device_tokens": tokens},
                    },
                ).result
            )
        )
        assert [c.provider_id.value for c in updated.channels or []] == ["fcm"]
    # update replaces the tokens.
    assert await channels_of(api, subscriber["subscriberId"]) == {"fcm": ["second"]}


async def test_subscribers_credentials_append(novu: Novu, api: httpx.AsyncClient) -> None:
    await push_integrations(api, "fcm")
    subscriber = await create_subscriber(api)
    for token in ("first", "second"):
        appended = await call(
            lambda token=token: (
                novu.subscribers.credentials.append(
                    subscriber_id=subscriber["subscriberId"],
                    update_subscriber_channel_request_dto={
                        "provider_id": "fcm",
                        "credentials": {"device_tokens": [token]},
                    },
                ).result
            )
        )
        assert appended.subscriber_id == subscriber["subscriberId"]
    # append adds to them.
    assert await channels_of(api, subscriber["subscriberId"]) == {"fcm": ["first", "second"]}


async def test_subscribers_credentials_delete(novu: Novu, api: httpx.AsyncClient) -> None:
    await push_integrations(api, "fcm", "expo")
    subscriber = await create_subscriber(api)
    for provider in ("fcm", "expo"):
        response = await api.put(
            f"/v1/subscribers/{subscriber['subscriberId']}/credentials",
            json={"providerId": provider, "credentials": {"deviceTokens": [provider]}},
        )
        assert response.status_code == 200, response.text
    await call(lambda: novu.subscribers.credentials.delete(subscriber_id=subscriber["subscriberId"], provider_id="fcm"))
    assert await channels_of(api, subscriber["subscriberId"]) == {"expo": ["expo"]}
