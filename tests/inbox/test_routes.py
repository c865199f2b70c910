"""The Inbox API (/v1/inbox) as @novu/js 3.19 calls it: session, token, notifications, state, CORS."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
import jwt
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from herald.app import build_worker
from herald.engine.worker import Worker
from herald.kit.auth import subscriber_token_key
from herald.kit.time import isoformat, utcnow
from herald.models import ApiKey, Environment, Message
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.builders import create_subscriber, create_workflow, insert_in_app_message, unique


@pytest.fixture
async def worker(app: FastAPI) -> AsyncIterator[Worker]:
    engine_worker = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    yield engine_worker
    if engine_worker.http is not None:
        await engine_worker.http.aclose()


async def application_identifier(app: FastAPI, environment_id: str) -> str:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Environment.identifier).where(Environment.id == environment_id))).scalar_one()


async def in_app_integration(api: httpx.AsyncClient, environment_id: str) -> dict[str, Any]:
    [integration] = [
        item
        for item in (await api.get("/v1/integrations")).json()["data"]
        if item["channel"] == "in_app" and item["_environmentId"] == environment_id
    ]
    return integration


async def set_hmac(api: httpx.AsyncClient, environment_id: str, on: bool) -> None:
    integration = await in_app_integration(api, environment_id)
    response = await api.put(f"/v1/integrations/{integration['_id']}", json={"credentials": {"hmac": on}})
    assert response.status_code == 200, response.text


def subscriber_hash(api_key: str, subscriber_id: str) -> str:
    """As a backend computes it for Novu's Inbox."""
    return hmac.new(api_key.encode(), subscriber_id.encode(), hashlib.sha256).hexdigest()


class Inbox:
    """An inbox client: what @novu/js does, over HTTP."""

    def __init__(self, client: httpx.AsyncClient, session: dict[str, Any]) -> None:
        self.client = client
        self.session = session

    async def list(self, **params: Any) -> dict[str, Any]:
        response = await self.client.get("/v1/inbox/notifications", params=params)
        assert response.status_code == 200, response.text
        return response.json()

    async def ids(self, **params: Any) -> list[str]:
        return [item["id"] for item in (await self.list(**params))["data"]]

    async def counts(self, *filters: dict[str, Any]) -> list[int]:
        response = await self.client.get("/v1/inbox/notifications/count", params={"filters": json.dumps(list(filters))})
        assert response.status_code == 200, response.text
        return [item["count"] for item in response.json()["data"]]

    async def patch(self, notification_id: str, action: str, body: Any = None) -> dict[str, Any]:
        response = await self.client.patch(f"/v1/inbox/notifications/{notification_id}/{action}", json=body)
        assert response.status_code == 200, response.text
        return response.json()["data"]

    async def bulk(self, action: str, **body: Any) -> None:
        response = await self.client.post(f"/v1/inbox/notifications/{action}", json=body)
        assert response.status_code == 204, response.text


async def start_session(app: FastAPI, body: dict[str, Any]) -> httpx.Response:
    async with make_client(app) as client:
        return await client.post("/v1/inbox/session", json=body)


@pytest.fixture
async def inbox(app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient) -> AsyncIterator[Inbox]:
    subscriber = await create_subscriber(api)
    identifier = await application_identifier(app, tenancy.environment_id)
    response = await start_session(app, {"applicationIdentifier": identifier, "subscriber": {"subscriberId": subscriber["subscriberId"]}})
    assert response.status_code == 201, response.text
    session = response.json()["data"]
    async with make_client(app, Authorization=f"Bearer {session['token']}") as client:
        yield Inbox(client, {**session, "subscriber": subscriber})


async def message_for(app: FastAPI, inbox: Inbox, **fields: Any) -> Message:
    return await insert_in_app_message(app, inbox.session["subscriber"], **fields)


# -- session ----------------------------------------------------------------------------------


async def test_session_creates_the_subscriber_and_answers_what_novu_js_reads(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient
) -> None:
    identifier = await application_identifier(app, tenancy.environment_id)
    subscriber_id = unique("browser")
    response = await start_session(
        app,
        {
            "applicationIdentifier": identifier,
            "subscriber": {"subscriberId": subscriber_id, "firstName": "Grace", "timezone": "Europe/Paris"},
        },
    )
    assert response.status_code == 201, response.text
    session = response.json()["data"]
    assert session["totalUnreadCount"] == 0
    assert session["unreadCount"] == {"total": 0, "severity": {"high": 0, "medium": 0, "low": 0, "none": 0}}
    assert session["removeNovuBranding"] is False
    assert session["isDevelopmentMode"] is True
    assert session["maxSnoozeDurationHours"] > 0
    assert session["applicationIdentifier"] == identifier
    created = (await api.get(f"/v1/subscribers/{subscriber_id}")).json()["data"]
    assert created["firstName"] == "Grace" and created["timezone"] == "Europe/Paris"
    claims = jwt.decode(session["token"], options={"verify_signature": False})
    assert claims["aud"] == "widget_user" and claims["iss"] == "novu_api"
    assert claims["subscriberId"] == subscriber_id and claims["_id"] == created["_id"]
    assert claims["environmentId"] == tenancy.environment_id
    # The top-level subscriberId of Novu's older clients works too.
    again = await start_session(app, {"applicationIdentifier": identifier, "subscriberId": subscriber_id})
    assert again.status_code == 201, again.text
    # An existing subscriber is changed only by a session that proves it (a valid hash), as in Novu.
    renamed = {"subscriberId": subscriber_id, "firstName": "Mallory", "email": "mallory@example.com"}
    unproven = await start_session(app, {"applicationIdentifier": identifier, "subscriber": renamed})
    assert unproven.status_code == 201, unproven.text
    kept = (await api.get(f"/v1/subscribers/{subscriber_id}")).json()["data"]
    assert kept["firstName"] == "Grace" and kept.get("email") != "mallory@example.com"
    proven = await start_session(
        app,
        {"applicationIdentifier": identifier, "subscriber": renamed, "subscriberHash": subscriber_hash(tenancy.api_key, subscriber_id)},
    )
    assert proven.status_code == 201, proven.text
    changed = (await api.get(f"/v1/subscribers/{subscriber_id}")).json()["data"]
    assert changed["firstName"] == "Mallory" and changed["email"] == "mallory@example.com"
    # No subscriberId at all: Novu's 422.
    missing = await start_session(app, {"applicationIdentifier": identifier, "subscriber": {"firstName": "Nobody"}})
    assert_error(missing, 422, "Validation Error")


async def test_session_counts_unread_by_workflow_severity(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient
) -> None:
    subscriber = await create_subscriber(api)
    high = await create_workflow(api, severity="high")
    assert high["severity"] == "high"
    plain = await create_workflow(api)
    assert plain["severity"] == "none"
    await insert_in_app_message(app, subscriber, workflow_id=high["_id"])
    await insert_in_app_message(app, subscriber, workflow_id=high["_id"], read=True)
    await insert_in_app_message(app, subscriber, workflow_id=plain["_id"])
    await insert_in_app_message(app, subscriber, workflow_id=plain["_id"], archived=True)
    await insert_in_app_message(app, subscriber, workflow_id=plain["_id"], snoozed_until=utcnow() + timedelta(hours=1))
    identifier = await application_identifier(app, tenancy.environment_id)
    response = await start_session(app, {"applicationIdentifier": identifier, "subscriber": {"subscriberId": subscriber["subscriberId"]}})
    session = response.json()["data"]
    assert session["totalUnreadCount"] == 2
    assert session["unreadCount"] == {"total": 2, "severity": {"high": 1, "medium": 0, "low": 0, "none": 1}}


async def test_session_refuses_an_unknown_application_identifier_and_a_missing_in_app_integration(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient
) -> None:
    assert_error(
        await start_session(app, {"applicationIdentifier": "nope", "subscriberId": "s1"}),
        400,
        "Please provide a valid application identifier",
    )
    identifier = await application_identifier(app, tenancy.environment_id)
    integration = await in_app_integration(api, tenancy.environment_id)
    assert integration["providerId"] == "novu" and integration["active"] is True
    assert (await api.put(f"/v1/integrations/{integration['_id']}", json={"active": False})).status_code == 200
    assert_error(
        await start_session(app, {"applicationIdentifier": identifier, "subscriberId": "s1"}),
        404,
        "The active in-app integration could not be found",
    )


async def test_session_with_hmac_needs_the_hash_of_the_subscriber_keyed_by_an_api_key(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient
) -> None:
    identifier = await application_identifier(app, tenancy.environment_id)
    subscriber_id = unique("hmac")
    body = {"applicationIdentifier": identifier, "subscriber": {"subscriberId": subscriber_id}}
    # HMAC off: no hash needed.
    assert (await start_session(app, body)).status_code == 201
    await set_hmac(api, tenancy.environment_id, True)
    assert_error(await start_session(app, body), 400, "Please provide a valid HMAC hash")
    wrong = subscriber_hash(tenancy.production_api_key, subscriber_id)
    assert_error(await start_session(app, {**body, "subscriberHash": wrong}), 400, "Please provide a valid HMAC hash")
    other = subscriber_hash(tenancy.api_key, "someone-else")
    assert_error(await start_session(app, {**body, "subscriberHash": other}), 400, "Please provide a valid HMAC hash")
    right = subscriber_hash(tenancy.api_key, subscriber_id)
    response = await start_session(app, {**body, "subscriberHash": right})
    assert response.status_code == 201, response.text
    # The key is stored sealed, never in the clear.
    async with app.state.sessionmaker() as session:
        sealed = (await session.execute(select(ApiKey.sealed_key).where(ApiKey.environment_id == tenancy.environment_id))).scalars().all()
    assert sealed and all(value and tenancy.api_key not in value for value in sealed)
    # A revoked key no longer proves anything.
    async with app.state.sessionmaker() as session:
        await session.execute(update(ApiKey).where(ApiKey.environment_id == tenancy.environment_id).values(revoked_at=utcnow()))
        await session.commit()
    assert_error(await start_session(app, {**body, "subscriberHash": right}), 400, "Please provide a valid HMAC hash")
    await set_hmac(api, tenancy.environment_id, False)


# -- token ------------------------------------------------------------------------------------


def forged(app: FastAPI, claims: dict[str, Any], **changes: Any) -> str:
    return jwt.encode({**claims, **changes}, subscriber_token_key(app.state.settings.secret_key), algorithm="HS256")


async def test_routes_refuse_a_missing_expired_or_foreign_token(app: FastAPI, inbox: Inbox) -> None:
    claims = jwt.decode(inbox.session["token"], options={"verify_signature": False})
    now = int(time.time())
    async with make_client(app) as client:
        assert_error(await client.get("/v1/inbox/notifications"), 401, "Missing authorization header")
        cases = {
            "expired": forged(app, claims, iat=now - 7200, exp=now - 3600),
            "audience": forged(app, claims, aud="someone_else"),
            "issuer": forged(app, claims, iss="not_novu"),
            "signature": jwt.encode(claims, "another-key-entirely-0123456789abcdef", algorithm="HS256"),
        }
        for case, token in cases.items():
            response = await client.get("/v1/inbox/notifications", headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 401, (case, response.text)
        expired = await client.get("/v1/inbox/notifications", headers={"Authorization": f"Bearer {cases['expired']}"})
        assert_error(expired, 401, "Token has expired")
        # An API key is not a subscriber token.
        assert (await client.get("/v1/inbox/notifications", headers={"Authorization": "ApiKey abc"})).status_code == 401
    assert (await inbox.client.get("/v1/inbox/notifications")).status_code == 200


# -- notifications ----------------------------------------------------------------------------


async def test_a_triggered_notification_reaches_the_inbox_in_novu_js_shape(
    app: FastAPI, api: httpx.AsyncClient, inbox: Inbox, worker: Worker
) -> None:
    workflow = await create_workflow(
        api,
        tags=["billing"],
        severity="medium",
        steps=[
            {
                "name": "inbox",
                "template": {
                    "type": "in_app",
                    "subject": "Invoice {{payload.number}}",
                    "content": "Hello {{payload.name}}",
                    "data": {"invoice": "{{payload.number}}", "kind": "invoice"},
                    "avatar": "https://example.com/avatars/{{payload.name}}.png",
                    "cta": {
                        "type": "redirect",
                        "data": {"url": "https://example.com/invoices/{{payload.number}}"},
                        "action": {"buttons": [{"type": "primary", "content": "Pay"}, {"type": "secondary", "content": "Later"}]},
                    },
                },
            }
        ],
    )
    subscriber_id = inbox.session["subscriber"]["subscriberId"]
    response = await api.post(
        "/v1/events/trigger",
        json={"name": workflow["triggers"][0]["identifier"], "to": subscriber_id, "payload": {"name": "Ada", "number": "42"}},
    )
    assert response.status_code == 201, response.text
    await worker.run_until_idle()
    listed = await inbox.list()
    assert listed["hasMore"] is False
    [item] = listed["data"]
    assert item["transactionId"] == response.json()["data"]["transactionId"]
    assert item["subject"] == "Invoice 42" and item["body"] == "Hello Ada"
    assert item["to"]["subscriberId"] == subscriber_id
    assert (item["isRead"], item["isSeen"], item["isArchived"], item["isSnoozed"]) == (False, False, False, False)
    assert item["deliveredAt"] and item["createdAt"]
    assert item["channelType"] == "in_app"
    assert item["tags"] == ["billing"] and item["severity"] == "medium"
    assert item["data"] == {"invoice": "42", "kind": "invoice"}
    assert item["avatar"] == "https://example.com/avatars/Ada.png"
    assert item["redirect"] == {"url": "https://example.com/invoices/42"}
    assert item["primaryAction"] == {"label": "Pay", "isCompleted": False}
    assert item["secondaryAction"] == {"label": "Later", "isCompleted": False}
    assert item["workflow"] == {
        "id": workflow["_id"],
        "identifier": workflow["triggers"][0]["identifier"],
        "name": workflow["name"],
        "critical": False,
        "tags": ["billing"],
        "severity": "medium",
    }
    assert await inbox.ids(**{"tags[]": "billing"}) == [item["id"]]
    assert await inbox.ids(**{"tags[]": "other"}) == []
    # AND of OR groups: (billing or x) and (other).
    assert await inbox.ids(**{"tags[0][]": ["billing", "x"], "tags[1][]": "other"}) == []
    assert await inbox.ids(**{"tags[0][]": ["billing", "x"], "tags[1][]": ["other", "billing"]}) == [item["id"]]
    assert await inbox.ids(data=json.dumps({"kind": "invoice"})) == [item["id"]]
    assert await inbox.ids(data=json.dumps({"kind": ["receipt", "invoice"]})) == [item["id"]]
    assert await inbox.ids(data=json.dumps({"kind": "receipt"})) == []
    assert await inbox.counts({"severity": "medium"}, {"severity": ["high", "low"]}, {"tags": ["billing"], "read": False}) == [1, 0, 1]

    completed = await inbox.patch(item["id"], "complete", {"actionType": "primary"})
    assert completed["primaryAction"]["isCompleted"] is True and completed["secondaryAction"]["isCompleted"] is False
    reverted = await inbox.patch(item["id"], "revert", {"actionType": "primary"})
    assert reverted["primaryAction"]["isCompleted"] is False


async def test_list_is_newest_first_with_cursor_offset_and_filters(app: FastAPI, inbox: Inbox) -> None:
    now = utcnow()
    made = [await message_for(app, inbox, created_at=now - timedelta(minutes=10 - i)) for i in range(5)]
    newest_first = [m.id for m in reversed(made)]
    page = await inbox.list(limit=2)
    assert [item["id"] for item in page["data"]] == newest_first[:2] and page["hasMore"] is True
    assert page["filter"] == {}
    after = await inbox.list(limit=2, after=newest_first[1])
    assert [item["id"] for item in after["data"]] == newest_first[2:4] and after["hasMore"] is True
    last = await inbox.list(limit=2, after=newest_first[3])
    assert [item["id"] for item in last["data"]] == newest_first[4:] and last["hasMore"] is False
    assert await inbox.ids(limit=2, offset=3) == newest_first[3:5]
    await inbox.patch(made[0].id, "read")
    await inbox.patch(made[1].id, "archive")
    assert await inbox.ids(read="false", archived="false") == newest_first[:3]
    assert await inbox.ids(archived="true") == [made[1].id]
    assert set(await inbox.ids(read="true")) == {made[0].id, made[1].id}
    assert await inbox.ids(seen="false") == newest_first[:3]
    filtered = await inbox.list(read="false", archived="false", snoozed="false")
    assert filtered["filter"] == {"read": False, "archived": False, "snoozed": False}
    assert await inbox.counts({"read": False, "archived": False}, {"archived": True}, {}) == [3, 1, 5]
    assert_error(await inbox.client.get("/v1/inbox/notifications", params={"limit": 101}), 422)
    unsupported = "Filtering for unread and archived notifications is not supported."
    assert_error(await inbox.client.get("/v1/inbox/notifications", params={"read": "false", "archived": "true"}), 400, unsupported)
    refused = await inbox.client.get(
        "/v1/inbox/notifications/count", params={"filters": json.dumps([{"read": False, "archived": True}])}
    )
    assert_error(refused, 400, unsupported)
    assert_error(await inbox.client.get("/v1/inbox/notifications/count", params={"filters": "not json"}), 422)


async def test_read_unread_archive_unarchive_seen_and_delete(app: FastAPI, inbox: Inbox) -> None:
    message = await message_for(app, inbox)
    read = await inbox.patch(message.id, "read")
    assert read["isRead"] is True and read["isSeen"] is True and read["readAt"] and read["firstSeenAt"]
    unread = await inbox.patch(message.id, "unread")
    assert unread["isRead"] is False and unread["readAt"] is None and unread["isSeen"] is True
    archived = await inbox.patch(message.id, "archive")
    assert archived["isArchived"] is True and archived["archivedAt"] and archived["isRead"] is True
    unarchived = await inbox.patch(message.id, "unarchive")
    assert unarchived["isArchived"] is False and unarchived["archivedAt"] is None and unarchived["isRead"] is True

    other = await message_for(app, inbox)
    await inbox.bulk("seen", notificationIds=[other.id])
    assert (await inbox.list())["data"][0]["isSeen"] is True

    response = await inbox.client.delete(f"/v1/inbox/notifications/{message.id}/delete")
    assert response.status_code == 204
    assert message.id not in await inbox.ids()
    assert_error(await inbox.client.patch(f"/v1/inbox/notifications/{message.id}/read"), 404)


async def test_bulk_routes_read_archive_read_archive_and_delete(app: FastAPI, api: httpx.AsyncClient, inbox: Inbox) -> None:
    tagged = await create_workflow(api, tags=["team"])
    a = await message_for(app, inbox, workflow_id=tagged["_id"])
    b = await message_for(app, inbox)
    c = await message_for(app, inbox, data={"project": "x"})
    await inbox.bulk("read", tags=["team"])
    assert [item["isRead"] for item in (await inbox.list())["data"]] == [False, False, True]
    await inbox.bulk("read", data=json.dumps({"project": "x"}))
    assert await inbox.ids(read="true") == [c.id, a.id]
    await inbox.bulk("read-archive")
    assert await inbox.ids(archived="true") == [c.id, a.id]
    assert await inbox.ids(archived="false") == [b.id]
    await inbox.bulk("archive")
    assert await inbox.ids(archived="false") == []
    await inbox.bulk("delete", tags=["team"])
    assert await inbox.ids() == [c.id, b.id]
    await inbox.bulk("read")
    await inbox.bulk("delete")
    assert await inbox.ids() == []


async def test_snoozed_notification_leaves_the_list_until_its_time(app: FastAPI, inbox: Inbox) -> None:
    message = await message_for(app, inbox)
    until = isoformat(utcnow() + timedelta(hours=2))
    snoozed = await inbox.patch(message.id, "snooze", {"snoozeUntil": until})
    assert snoozed["isSnoozed"] is True and snoozed["snoozedUntil"] and snoozed["isSeen"] is True
    # Out of the inbox's tabs (they ask for snoozed=false), in the snoozed one; a list that does not ask has it.
    assert await inbox.ids(snoozed="false") == [] and await inbox.ids(read="false", snoozed="false") == []
    assert await inbox.ids(snoozed="true") == [message.id]
    assert await inbox.ids() == [message.id]
    assert await inbox.counts({"read": False, "snoozed": False}, {"snoozed": True}) == [0, 1]
    unsnoozed = await inbox.patch(message.id, "unsnooze")
    assert unsnoozed["isSnoozed"] is False and len(unsnoozed["deliveredAt"]) == 2
    assert await inbox.ids(snoozed="false") == [message.id]

    await inbox.patch(message.id, "snooze", {"snoozeUntil": until})
    assert await inbox.ids(snoozed="false") == []
    # Its time passes (the store is set as a snooze that has run its course would be): it is back by itself.
    async with app.state.sessionmaker() as session:
        await session.execute(update(Message).where(Message.id == message.id).values(snoozed_until=utcnow() - timedelta(seconds=1)))
        await session.commit()
    [back] = (await inbox.list(snoozed="false"))["data"]
    assert back["id"] == message.id and back["isSnoozed"] is False and back["snoozedUntil"] is None
    assert await inbox.ids(snoozed="true") == []

    past = isoformat(utcnow() - timedelta(minutes=1))
    assert_error(await inbox.client.patch(f"/v1/inbox/notifications/{message.id}/snooze", json={"snoozeUntil": past}), 400)
    too_far = isoformat(utcnow() + timedelta(days=365))
    assert_error(await inbox.client.patch(f"/v1/inbox/notifications/{message.id}/snooze", json={"snoozeUntil": too_far}), 400)


async def test_another_subscribers_notifications_are_out_of_reach(
    app: FastAPI, api: httpx.AsyncClient, inbox: Inbox, other_org_api: httpx.AsyncClient
) -> None:
    mine = await message_for(app, inbox)
    neighbour = await create_subscriber(api)
    theirs = await insert_in_app_message(app, neighbour)
    email = await message_for(app, inbox, channel="email")
    assert await inbox.ids() == [mine.id]
    assert await inbox.counts({}) == [1]
    for notification_id in (theirs.id, email.id):
        for action in ("read", "unread", "archive", "unarchive", "unsnooze"):
            assert_error(await inbox.client.patch(f"/v1/inbox/notifications/{notification_id}/{action}"), 404)
        snooze = {"snoozeUntil": isoformat(utcnow() + timedelta(hours=1))}
        assert_error(await inbox.client.patch(f"/v1/inbox/notifications/{notification_id}/snooze", json=snooze), 404)
        for action in ("complete", "revert"):
            body = {"actionType": "primary"}
            assert_error(await inbox.client.patch(f"/v1/inbox/notifications/{notification_id}/{action}", json=body), 404)
        assert_error(await inbox.client.delete(f"/v1/inbox/notifications/{notification_id}/delete"), 404)
    # Bulk routes naming its id, or all, leave it alone.
    await inbox.bulk("seen", notificationIds=[theirs.id])
    await inbox.bulk("read")
    await inbox.bulk("delete")
    async with app.state.sessionmaker() as session:
        row = (await session.execute(select(Message).where(Message.id == theirs.id))).scalar_one()
    assert (row.read, row.seen) == (False, False)
    assert_error(await inbox.client.get("/v1/inbox/notifications", params={"after": theirs.id}), 400)


async def test_the_v1_feed_sees_inbox_state(app: FastAPI, api: httpx.AsyncClient, inbox: Inbox) -> None:
    message = await message_for(app, inbox)
    subscriber_id = inbox.session["subscriber"]["subscriberId"]
    await inbox.patch(message.id, "archive")
    [item] = (await api.get(f"/v1/subscribers/{subscriber_id}/notifications/feed")).json()["data"]
    assert item["_id"] == message.id and item["read"] is True and item["seen"] is True and item["archived"] is True
    await inbox.patch(message.id, "unread")
    [item] = (await api.get(f"/v1/subscribers/{subscriber_id}/notifications/feed")).json()["data"]
    assert item["read"] is False and item["archived"] is False
    # And the other way round: v1 mark-as is what the inbox sees.
    response = await api.post(
        f"/v1/subscribers/{subscriber_id}/messages/mark-as", json={"messageId": message.id, "markAs": "read"}
    )
    assert response.status_code == 201, response.text
    [seen] = (await inbox.list())["data"]
    assert seen["isRead"] is True and seen["firstSeenAt"]


async def test_cors_preflight_is_answered_for_inbox_routes_only(app: FastAPI, anonymous: httpx.AsyncClient) -> None:
    headers = {
        "Origin": "https://app.example.com",
        "Access-Control-Request-Method": "PATCH",
        "Access-Control-Request-Headers": "authorization, content-type, novu-api-version, novu-client-version",
    }
    response = await anonymous.options("/v1/inbox/notifications/abc/read", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["access-control-allow-origin"] == "*"
    assert "PATCH" in response.headers["access-control-allow-methods"]
    assert "authorization" in response.headers["access-control-allow-headers"].lower()
    answered = await anonymous.post("/v1/inbox/session", json={}, headers={"Origin": "https://app.example.com"})
    assert answered.headers["access-control-allow-origin"] == "*"
    # Server-to-server routes answer no preflight.
    other = await anonymous.options("/v1/integrations", headers=headers)
    assert "access-control-allow-origin" not in other.headers


async def test_cors_origins_can_be_limited(app: FastAPI) -> None:
    from herald.app import create_app

    limited = create_app(replace(app.state.settings, cors_origins=("https://app.example.com",)))
    try:
        async with make_client(limited) as client:
            headers = {"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"}
            allowed = await client.options("/v1/inbox/notifications", headers={**headers, "Origin": "https://app.example.com"})
            assert allowed.status_code == 200
            assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
            refused = await client.options("/v1/inbox/notifications", headers={**headers, "Origin": "https://evil.example"})
            assert refused.status_code == 400
            assert "access-control-allow-origin" not in refused.headers
    finally:
        await limited.state.engine.dispose()
