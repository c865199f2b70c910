from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, func, select

from herald.kit.crypto import mask_secret
from herald.models import Message, Subscriber, TopicSubscriber
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_integration, create_subscriber, insert_in_app_message, unique

SPEC_REQUIRED = {"subscriberId", "_organizationId", "_environmentId", "deleted", "createdAt", "updatedAt"}
NULLABLE = ("firstName", "lastName", "email", "phone", "avatar", "locale", "isOnline", "lastOnlineAt", "data", "timezone")


async def post_subscriber(api: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await api.post("/v1/subscribers", json=body)


async def test_create_answers_the_spec_shape(api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    subscriber_id = unique("user")
    response = await post_subscriber(api, subscriberId=subscriber_id)
    assert response.status_code == 201, response.text
    subscriber = response.json()["data"]
    assert SPEC_REQUIRED <= subscriber.keys()
    assert subscriber["subscriberId"] == subscriber_id
    assert subscriber["_environmentId"] == tenancy.environment_id
    assert subscriber["_organizationId"] == tenancy.organization_id
    assert len(subscriber["_id"]) == 24 and subscriber["_id"] != subscriber_id
    assert subscriber["deleted"] is False
    assert subscriber["channels"] == []
    assert subscriber["__v"] == 0
    for field in NULLABLE:
        assert subscriber[field] is None, field
    assert "topics" not in subscriber
    assert subscriber["createdAt"].endswith("Z") and subscriber["updatedAt"].endswith("Z")


async def test_create_keeps_every_given_attribute(api: httpx.AsyncClient) -> None:
    body = {
        "subscriberId": "ada@example.com",
        "firstName": "Ada",
        "lastName": "Lovelace",
        "email": "ada@example.com",
        "phone": "+441234567890",
        "avatar": "https://example.com/ada.png",
        "locale": "en-GB",
        "timezone": "Europe/London",
        "data": {"plan": "pro", "seats": 3, "tags": ["a"]},
    }
    subscriber = await create_subscriber(api, **body)
    for key, value in body.items():
        assert subscriber[key] == value, key


async def test_upsert_changes_only_the_fields_sent(api: httpx.AsyncClient) -> None:
    created = await create_subscriber(api, lastName="Byron", phone="+100", data={"a": 1, "b": 2}, locale="en")
    response = await post_subscriber(
        api, subscriberId=created["subscriberId"], lastName="Lovelace", data={"c": 3}, phone=None
    )
    assert response.status_code == 201, response.text
    updated = response.json()["data"]
    assert updated["_id"] == created["_id"]
    assert updated["firstName"] == "Ada"
    assert updated["email"] == "ada@example.com"
    assert updated["locale"] == "en"
    assert updated["lastName"] == "Lovelace"
    # data is replaced as a whole, not merged; an explicit null clears a field.
    assert updated["data"] == {"c": 3}
    assert updated["phone"] is None
    assert updated["__v"] == created["__v"] + 1
    assert updated["createdAt"] == created["createdAt"]
    assert updated["updatedAt"] >= created["updatedAt"]
    fetched = (await api.get(f"/v1/subscribers/{created['subscriberId']}")).json()["data"]
    assert fetched == updated


async def test_upsert_without_changes_keeps_the_version(api: httpx.AsyncClient) -> None:
    created = await create_subscriber(api)
    again = await post_subscriber(api, subscriberId=created["subscriberId"], firstName="Ada")
    assert again.status_code == 201
    assert again.json()["data"]["__v"] == created["__v"]


async def test_same_subscriber_id_in_another_environment_is_another_subscriber(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient
) -> None:
    dev = await create_subscriber(api)
    prod = await create_subscriber(production_api, subscriberId=dev["subscriberId"], firstName="Prod")
    assert prod["_id"] != dev["_id"]
    assert (await api.get(f"/v1/subscribers/{dev['subscriberId']}")).json()["data"]["firstName"] == "Ada"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "subscriberId"),
        ({"subscriberId": ""}, "subscriberId"),
        ({"subscriberId": None}, "subscriberId"),
        ({"subscriberId": 42}, "subscriberId"),
        ({"subscriberId": "has space"}, "subscriberId"),
        ({"subscriberId": "slash/inside"}, "subscriberId"),
        ({"subscriberId": "ok", "email": "not-an-email"}, "email"),
        ({"subscriberId": "ok", "timezone": "Mars/Olympus"}, "timezone"),
        ({"subscriberId": "ok", "locale": "english please"}, "locale"),
        ({"subscriberId": "ok", "data": ["not", "an", "object"]}, "data"),
        ({"subscriberId": "ok", "firstName": 7}, "firstName"),
        ({"subscriberId": "ok", "channels": [{"providerId": "sendgrid", "credentials": {}}]}, "channels.0.providerId"),
        ({"subscriberId": "ok", "channels": [{"providerId": "slack"}]}, "channels.0.credentials"),
    ],
)
async def test_create_validates_the_body(api: httpx.AsyncClient, body: dict[str, Any], field: str) -> None:
    response = await api.post("/v1/subscribers", json=body)
    errors = assert_error(response, 422, "Validation Error")["errors"]
    assert field in errors, errors


async def test_empty_subscriber_id_says_it_is_required(api: httpx.AsyncClient) -> None:
    response = await post_subscriber(api, subscriberId="")
    errors = assert_error(response, 422, "Validation Error")["errors"]
    assert errors["subscriberId"]["messages"] == ["subscriberId: subscriberId is required"]


@pytest.mark.parametrize("subscriber_id", ["user_1", "org:42:user.7", "a-b", "ada@example.com", "x+tag@mail.example.org"])
async def test_valid_identifiers_are_accepted(api: httpx.AsyncClient, subscriber_id: str) -> None:
    assert (await post_subscriber(api, subscriberId=subscriber_id)).status_code == 201


async def test_get_unknown_or_foreign_subscriber_is_404(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    assert_error(await api.get("/v1/subscribers/nobody"), 404, "Subscriber: nobody was not found")
    subscriber = await create_subscriber(api)
    for client in (production_api, other_org_api):
        response = await client.get(f"/v1/subscribers/{subscriber['subscriberId']}")
        assert_error(response, 404, f"Subscriber: {subscriber['subscriberId']} was not found")


async def test_get_with_include_topics_lists_topic_keys(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    for key in ("news", "alerts"):
        response = await api.post(f"/v1/topics/{key}/subscribers", json={"subscribers": [subscriber["subscriberId"]]})
        assert response.status_code == 200, response.text
    response = await api.get(f"/v1/subscribers/{subscriber['subscriberId']}", params={"includeTopics": "true"})
    assert response.status_code == 200
    assert response.json()["data"]["topics"] == ["alerts", "news"]
    plain = (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}")).json()["data"]
    assert "topics" not in plain
    lonely = await create_subscriber(api)
    response = await api.get(f"/v1/subscribers/{lonely['subscriberId']}?includeTopics=true")
    assert response.json()["data"]["topics"] == []


async def test_list_is_paginated_oldest_first(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    created = [await create_subscriber(api) for _ in range(3)]
    await create_subscriber(production_api)
    first = await api.get("/v1/subscribers", params={"page": 0, "limit": 2})
    assert first.status_code == 200
    body = first.json()
    assert {key: body[key] for key in ("page", "pageSize", "totalCount", "hasMore")} == {
        "page": 0,
        "pageSize": 2,
        "totalCount": 3,
        "hasMore": True,
    }
    second = (await api.get("/v1/subscribers", params={"page": 1, "limit": 2})).json()
    assert second["hasMore"] is False and second["totalCount"] == 3
    listed = [item["subscriberId"] for item in body["data"] + second["data"]]
    assert listed == [item["subscriberId"] for item in created]
    assert SPEC_REQUIRED <= body["data"][0].keys()
    past_the_end = (await api.get("/v1/subscribers", params={"page": 5, "limit": 2})).json()
    assert past_the_end["data"] == [] and past_the_end["hasMore"] is False


@pytest.mark.parametrize("params", [{"limit": 101}, {"limit": 0}, {"page": -1}, {"limit": "many"}])
async def test_list_validates_paging(api: httpx.AsyncClient, params: dict[str, Any]) -> None:
    assert_error(await api.get("/v1/subscribers", params=params), 422, "Validation Error")


async def test_put_updates_only_the_fields_sent(api: httpx.AsyncClient) -> None:
    created = await create_subscriber(api, data={"keep": False})
    response = await api.put(
        f"/v1/subscribers/{created['subscriberId']}", json={"firstName": "Augusta", "timezone": "America/New_York"}
    )
    assert response.status_code == 200, response.text
    updated = response.json()["data"]
    assert updated["firstName"] == "Augusta"
    assert updated["timezone"] == "America/New_York"
    assert updated["email"] == created["email"]
    assert updated["data"] == {"keep": False}
    assert updated["__v"] == created["__v"] + 1


async def test_put_unknown_subscriber_is_404_and_validates(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient
) -> None:
    assert_error(await api.put("/v1/subscribers/ghost", json={"firstName": "x"}), 404, "Subscriber: ghost was not found")
    subscriber = await create_subscriber(api)
    assert_error(
        await production_api.put(f"/v1/subscribers/{subscriber['subscriberId']}", json={"firstName": "x"}), 404
    )
    response = await api.put(f"/v1/subscribers/{subscriber['subscriberId']}", json={"email": "nope"})
    assert "email" in assert_error(response, 422)["errors"]


async def _count(app: Any, model: Any, *conditions: Any) -> int:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(func.count()).select_from(model).where(*conditions))).scalar_one()


async def test_delete_removes_subscriber_memberships_and_messages(api: httpx.AsyncClient, app: Any) -> None:
    subscriber = await create_subscriber(api)
    bystander = await create_subscriber(api)
    both = [subscriber["subscriberId"], bystander["subscriberId"]]
    assert (await api.post("/v1/topics/team/subscribers", json={"subscribers": both})).status_code == 200
    await insert_in_app_message(app, subscriber)
    await insert_in_app_message(app, subscriber, channel="email")
    await insert_in_app_message(app, bystander)

    response = await api.delete(f"/v1/subscribers/{subscriber['subscriberId']}")
    assert response.status_code == 200, response.text
    assert response.json() == {"data": {"acknowledged": True, "status": "deleted"}}

    assert await _count(app, Subscriber, Subscriber.id == subscriber["_id"]) == 0
    assert await _count(app, TopicSubscriber, TopicSubscriber.subscriber_id == subscriber["_id"]) == 0
    assert await _count(app, Message, Message.subscriber_id == subscriber["_id"]) == 0
    # Nothing of anyone else's goes with it.
    assert await _count(app, TopicSubscriber, TopicSubscriber.subscriber_id == bystander["_id"]) == 1
    assert await _count(app, Message, Message.subscriber_id == bystander["_id"]) == 1
    assert (await api.get("/v1/topics/team")).json()["data"]["subscribers"] == [bystander["subscriberId"]]

    assert_error(await api.get(f"/v1/subscribers/{subscriber['subscriberId']}"), 404)
    assert_error(
        await api.delete(f"/v1/subscribers/{subscriber['subscriberId']}"),
        404,
        f"Subscriber: {subscriber['subscriberId']} was not found",
    )
    # The identifier is free again, for a new subscriber.
    again = await create_subscriber(api, subscriberId=subscriber["subscriberId"])
    assert again["_id"] != subscriber["_id"]


async def test_delete_from_another_environment_is_404_and_keeps_the_subscriber(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    subscriber = await create_subscriber(api)
    for client in (production_api, other_org_api):
        assert_error(await client.delete(f"/v1/subscribers/{subscriber['subscriberId']}"), 404)
    assert (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}")).status_code == 200


async def test_credentials_need_an_active_integration(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/credentials"
    body = {"providerId": "slack", "credentials": {"webhookUrl": "https://hooks.slack.com/x"}}
    assert_error(await api.put(path, json=body), 422, "No active integration found for provider slack")
    # An inactive one does not count.
    await create_integration(api, providerId="slack", channel="chat", active=False)
    assert_error(await api.put(path, json=body), 422, "No active integration found for provider slack")
    # Creating the subscriber with channels is refused the same way, and nothing is created.
    other_id = unique("user")
    response = await post_subscriber(api, subscriberId=other_id, channels=[body])
    assert_error(response, 422, "No active integration found for provider slack")
    assert_error(await api.get(f"/v1/subscribers/{other_id}"), 404)


async def test_put_credentials_sets_the_entry_with_its_integration(api: httpx.AsyncClient) -> None:
    integration = await create_integration(api, providerId="slack", channel="chat", active=True)
    subscriber = await create_subscriber(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/credentials"
    response = await api.put(
        path, json={"providerId": "slack", "credentials": {"webhookUrl": "https://hooks.slack.com/a", "channel": "#x"}}
    )
    assert response.status_code == 200, response.text
    updated = response.json()["data"]
    assert updated["channels"] == [
        {
            "providerId": "slack",
            "integrationIdentifier": integration["identifier"],
            # webhookUrl is a secret: answers carry its mask (herald.kit.crypto).
            "credentials": {"webhookUrl": mask_secret("https://hooks.slack.com/a"), "channel": "#x"},
            "_integrationId": integration["_id"],
        }
    ]
    assert updated["__v"] == subscriber["__v"] + 1
    # PUT replaces the entry's credentials: fields not sent are gone.
    response = await api.put(path, json={"providerId": "slack", "credentials": {"webhookUrl": "https://hooks.slack.com/b"}})
    assert response.json()["data"]["channels"][0]["credentials"] == {"webhookUrl": mask_secret("https://hooks.slack.com/b")}
    assert len(response.json()["data"]["channels"]) == 1


async def test_device_tokens_put_replaces_and_patch_appends(api: httpx.AsyncClient) -> None:
    await create_integration(api, providerId="fcm", channel="push", active=True)
    subscriber = await create_subscriber(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/credentials"

    def tokens(response: httpx.Response) -> list[str]:
        assert response.status_code == 200, response.text
        return response.json()["data"]["channels"][0]["credentials"]["deviceTokens"]

    assert tokens(await api.put(path, json={"providerId": "fcm", "credentials": {"deviceTokens": ["a", "b", "a"]}})) == ["a", "b"]
    assert tokens(await api.patch(path, json={"providerId": "fcm", "credentials": {"deviceTokens": ["b", "c"]}})) == ["a", "b", "c"]
    # Appending the same again changes nothing.
    before = (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}")).json()["data"]
    again = await api.patch(path, json={"providerId": "fcm", "credentials": {"deviceTokens": ["c"]}})
    assert tokens(again) == ["a", "b", "c"]
    assert again.json()["data"]["__v"] == before["__v"]
    # PATCH without tokens keeps them.
    assert tokens(await api.patch(path, json={"providerId": "fcm", "credentials": {"title": "x"}})) == ["a", "b", "c"]
    assert tokens(await api.put(path, json={"providerId": "fcm", "credentials": {"deviceTokens": ["z"]}})) == ["z"]


async def test_device_tokens_are_limited(api: httpx.AsyncClient) -> None:
    await create_integration(api, providerId="apns", channel="push", active=True)
    subscriber = await create_subscriber(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/credentials"
    response = await api.put(path, json={"providerId": "apns", "credentials": {"deviceTokens": [f"t{i}" for i in range(100)]}})
    assert response.status_code == 200
    response = await api.patch(path, json={"providerId": "apns", "credentials": {"deviceTokens": ["one-more"]}})
    assert_error(
        response,
        422,
        "Device tokens limit exceeded. Maximum allowed tokens per subscriber channel is 100, but got 101 tokens.",
    )


async def test_credentials_pick_the_integration_by_identifier(api: httpx.AsyncClient) -> None:
    first = await create_integration(api, providerId="discord", channel="chat", active=True, identifier="discord-a")
    second = await create_integration(api, providerId="discord", channel="chat", active=True, identifier="discord-b")
    subscriber = await create_subscriber(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/credentials"
    response = await api.put(
        path, json={"providerId": "discord", "integrationIdentifier": "discord-a", "credentials": {"webhookUrl": "https://a"}}
    )
    assert response.json()["data"]["channels"][0]["_integrationId"] == first["_id"]
    # Without an identifier the newest active integration of the provider is used: a second entry.
    response = await api.patch(path, json={"providerId": "discord", "credentials": {"webhookUrl": "https://b"}})
    channels = response.json()["data"]["channels"]
    assert [entry["_integrationId"] for entry in channels] == [first["_id"], second["_id"]]
    response = await api.put(
        path, json={"providerId": "discord", "integrationIdentifier": "nope", "credentials": {"webhookUrl": "https://c"}}
    )
    assert_error(response, 422, "No active integration found for provider discord with identifier nope")


async def test_delete_credentials_removes_the_provider_entry(api: httpx.AsyncClient) -> None:
    await create_integration(api, providerId="slack", channel="chat", active=True)
    await create_integration(api, providerId="fcm", channel="push", active=True)
    subscriber = await create_subscriber(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/credentials"
    await api.put(path, json={"providerId": "slack", "credentials": {"webhookUrl": "https://s"}})
    await api.put(path, json={"providerId": "fcm", "credentials": {"deviceTokens": ["t"]}})

    response = await api.delete(f"{path}/slack")
    assert response.status_code == 204
    assert response.content == b""
    channels = (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}")).json()["data"]["channels"]
    assert [entry["providerId"] for entry in channels] == ["fcm"]
    # Removing what is not there is not an error.
    assert (await api.delete(f"{path}/slack")).status_code == 204
    assert "providerId" in assert_error(await api.delete(f"{path}/sendgrid"), 422)["errors"]
    assert_error(await api.delete("/v1/subscribers/ghost/credentials/slack"), 404, "Subscriber: ghost was not found")


async def test_upsert_with_channels_adds_credentials(api: httpx.AsyncClient) -> None:
    integration = await create_integration(api, providerId="expo", channel="push", active=True)
    subscriber = await create_subscriber(
        api, channels=[{"providerId": "expo", "credentials": {"deviceTokens": ["ExponentPushToken[1]"]}}]
    )
    assert subscriber["channels"][0]["_integrationId"] == integration["_id"]
    response = await post_subscriber(
        api,
        subscriberId=subscriber["subscriberId"],
        channels=[{"providerId": "expo", "credentials": {"deviceTokens": ["ExponentPushToken[2]"]}}],
    )
    assert response.json()["data"]["channels"][0]["credentials"]["deviceTokens"] == [
        "ExponentPushToken[1]",
        "ExponentPushToken[2]",
    ]


async def test_credentials_routes_validate_and_404(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    await create_integration(api, providerId="slack", channel="chat", active=True)
    subscriber = await create_subscriber(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/credentials"
    for body, field in [
        ({"credentials": {}}, "providerId"),
        ({"providerId": "twilio", "credentials": {}}, "providerId"),
        ({"providerId": "slack"}, "credentials"),
        ({"providerId": "fcm", "credentials": {"deviceTokens": "abc"}}, "credentials.deviceTokens"),
        ({"providerId": "fcm", "credentials": {"deviceTokens": [""]}}, "credentials.deviceTokens"),
    ]:
        for method in (api.put, api.patch):
            response = await method(path, json=body)
            assert field in assert_error(response, 422, "Validation Error")["errors"], (body, response.text)
    body = {"providerId": "slack", "credentials": {"webhookUrl": "https://s"}}
    assert_error(await api.put("/v1/subscribers/ghost/credentials", json=body), 404, "Subscriber: ghost was not found")
    assert_error(await production_api.patch(path, json=body), 404)


async def test_online_status(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/online-status"
    online = await api.patch(path, json={"isOnline": True})
    assert online.status_code == 200, online.text
    assert online.json()["data"]["isOnline"] is True
    assert online.json()["data"]["lastOnlineAt"] is None
    offline = (await api.patch(path, json={"isOnline": False})).json()["data"]
    assert offline["isOnline"] is False
    assert offline["lastOnlineAt"].endswith("Z")
    assert "isOnline" in assert_error(await api.patch(path, json={}), 422)["errors"]
    assert "isOnline" in assert_error(await api.patch(path, json={"isOnline": "yes"}), 422)["errors"]
    assert_error(await api.patch("/v1/subscribers/ghost/online-status", json={"isOnline": True}), 404)
    assert_error(await production_api.patch(path, json={"isOnline": True}), 404)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/subscribers"),
        ("POST", "/v1/subscribers"),
        ("GET", "/v1/subscribers/someone"),
        ("PUT", "/v1/subscribers/someone"),
        ("DELETE", "/v1/subscribers/someone"),
        ("PUT", "/v1/subscribers/someone/credentials"),
        ("PATCH", "/v1/subscribers/someone/credentials"),
        ("DELETE", "/v1/subscribers/someone/credentials/slack"),
        ("PATCH", "/v1/subscribers/someone/online-status"),
        ("POST", "/v2/subscribers"),
        ("GET", "/v2/subscribers/someone"),
        ("PATCH", "/v2/subscribers/someone"),
        ("DELETE", "/v2/subscribers/someone"),
    ],
)
async def test_subscriber_routes_require_auth(anonymous: httpx.AsyncClient, method: str, path: str) -> None:
    body = {"subscriberId": "someone"} if method in ("POST", "PUT", "PATCH") else None
    assert_error(await anonymous.request(method, path, json=body), 401, "Missing authorization header")


async def test_concurrent_upserts_of_one_subscriber_make_one_subscriber(api: httpx.AsyncClient) -> None:
    import asyncio

    subscriber_id = unique("racer")
    responses = await asyncio.gather(
        *(post_subscriber(api, subscriberId=subscriber_id, firstName=f"N{i}") for i in range(6))
    )
    assert [response.status_code for response in responses] == [201] * 6, [r.text for r in responses]
    assert len({response.json()["data"]["_id"] for response in responses}) == 1
    listed = (await api.get("/v1/subscribers", params={"limit": 100})).json()
    assert [item["subscriberId"] for item in listed["data"]].count(subscriber_id) == 1


async def test_creating_a_subscriber_is_one_insert_without_a_savepoint(api: httpx.AsyncClient, app: FastAPI) -> None:
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        statements.append(statement)

    event.listen(app.state.engine.sync_engine, "before_cursor_execute", record)
    try:
        response = await post_subscriber(api, subscriberId=unique("one"), firstName="Ada")
    finally:
        event.remove(app.state.engine.sync_engine, "before_cursor_execute", record)
    assert response.status_code == 201, response.text
    # The audit entry is written by herald.audit.middleware after the request's transaction commits.
    request_statements = [statement for statement in statements if "INTO audit_entries" not in statement]
    assert len(request_statements) < len(statements), "the creation is recorded in the audit log"
    writes = [s for s in request_statements if "INSERT" in s.upper() or "SAVEPOINT" in s.upper()]
    assert len(writes) == 1 and "INTO subscribers" in writes[0], statements


async def test_channel_webhook_url_is_sealed_at_rest_and_shown_masked(api: httpx.AsyncClient, app) -> None:
    """A subscriber's webhook address is a credential: no answer carries it, the store keeps it sealed."""
    from sqlalchemy import select

    from herald.models import Subscriber

    hook = "https://hooks.slack.com/services/T000/B000/subscriberSecret99"
    await create_integration(api, providerId="slack", channel="chat", active=True, credentials={})
    subscriber = await create_subscriber(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/credentials"
    answers = [await api.patch(path, json={"providerId": "slack", "credentials": {"webhookUrl": hook, "channel": "#ops"}})]
    answers.append(await api.get(f"/v1/subscribers/{subscriber['subscriberId']}"))
    answers.append(await api.get(f"/v2/subscribers/{subscriber['subscriberId']}"))
    answers.append(await api.get("/v1/subscribers"))
    for response in answers:
        assert response.status_code == 200, response.text
        assert "subscriberSecret99" not in response.text
    shown = answers[1].json()["data"]
    assert shown["channels"][0]["credentials"] == {"webhookUrl": "htt****et99", "channel": "#ops"}

    async def stored() -> str:
        async with app.state.sessionmaker() as session:
            channels = (
                await session.execute(select(Subscriber.channels).where(Subscriber.id == subscriber["_id"]))
            ).scalar_one()
        return channels[0]["credentials"]["webhookUrl"]

    sealed = await stored()
    assert sealed.startswith("hsk1.") and app.state.secret_box.open(sealed) == hook
    # Sending back what was shown, or the same address, changes nothing.
    for same in ("htt****et99", hook):
        again = await api.patch(path, json={"providerId": "slack", "credentials": {"webhookUrl": same}})
        assert again.json()["data"]["__v"] == shown["__v"]
        assert await stored() == sealed
    # A new address replaces it.
    replaced = await api.put(path, json={"providerId": "slack", "credentials": {"webhookUrl": hook + "-new"}})
    assert replaced.json()["data"]["__v"] == shown["__v"] + 1
    assert app.state.secret_box.open(await stored()) == hook + "-new"
