from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from novu_py import models as novu
from novu_py._hooks.novuhook import NovuHooks
from novu_py.utils.unmarshal_json_response import unmarshal_json_response
from sqlalchemy import select, text

from herald.kit import pagination
from herald.kit.ids import new_id
from herald.kit.time import parse_iso, utcnow
from herald.messages.repository import FeedFilter, MessageRepository
from herald.models import Message
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_subscriber, insert_in_app_message

# Spec §2.2: every field of Message (plus updatedAt, _jobId and archived), with the JSON types it may take.
SPEC_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "_id": (str,),
    "_templateId": (str, type(None)),
    "_environmentId": (str,),
    "_messageTemplateId": (str, type(None)),
    "_organizationId": (str,),
    "_notificationId": (str,),
    "_subscriberId": (str,),
    "templateIdentifier": (str,),
    "createdAt": (str,),
    "deliveredAt": (list,),
    "lastSeenDate": (str,),
    "lastReadDate": (str,),
    "content": (list, str),
    "transactionId": (str,),
    "subject": (str,),
    "channel": (str,),
    "read": (bool,),
    "seen": (bool,),
    "snoozedUntil": (str,),
    "email": (str,),
    "phone": (str,),
    "directWebhookUrl": (str,),
    "providerId": (str,),
    "deviceTokens": (list,),
    "title": (str,),
    "cta": (dict,),
    "_feedId": (str, type(None)),
    "status": (str,),
    "errorId": (str,),
    "errorText": (str,),
    "payload": (dict,),
    "overrides": (dict,),
    "contextKeys": (list,),
    "updatedAt": (str,),
    # Read by Novu's feed clients (the SDK's NotificationFeedItemDto requires them).
    "_jobId": (str,),
    "archived": (bool,),
}
SPEC_REQUIRED = {
    "_environmentId",
    "_organizationId",
    "_notificationId",
    "_subscriberId",
    "createdAt",
    "transactionId",
    "channel",
    "read",
    "seen",
    "cta",
    "status",
}


@pytest.fixture
async def subscriber(api: httpx.AsyncClient) -> dict[str, Any]:
    return await create_subscriber(api)


@pytest.fixture
async def other_subscriber(api: httpx.AsyncClient) -> dict[str, Any]:
    return await create_subscriber(api)


async def stored(app: FastAPI, message_id: str) -> Message | None:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Message).where(Message.id == message_id))).scalar_one_or_none()


async def insert_messages(app: FastAPI, subscriber: dict[str, Any], count: int, **fields: Any) -> list[Message]:
    """``count`` messages, oldest first, one second apart."""
    start = utcnow() - timedelta(hours=1)
    return [
        await insert_in_app_message(app, subscriber, created_at=start + timedelta(seconds=index), **fields)
        for index in range(count)
    ]


def sdk_parse(response: httpx.Response, typ: Any) -> Any:
    """Parse an answer as the novu-py SDK does: its response hook, then its model."""
    return unmarshal_json_response(typ, NovuHooks().after_success(None, response))  # type: ignore[arg-type]


def assert_spec_message(message: dict[str, Any]) -> None:
    assert SPEC_REQUIRED <= message.keys(), SPEC_REQUIRED - message.keys()
    assert message.keys() <= SPEC_FIELD_TYPES.keys(), message.keys() - SPEC_FIELD_TYPES.keys()
    for field, value in message.items():
        assert isinstance(value, SPEC_FIELD_TYPES[field]), (field, value)
    assert message["channel"] in {"in_app", "email", "sms", "chat", "push"}
    assert message["status"] in {"sent", "error", "warning"}
    for field in ("createdAt", "updatedAt", "lastSeenDate", "lastReadDate", "snoozedUntil"):
        if field in message:
            assert message[field].endswith("Z"), (field, message[field])
            parse_iso(message[field])


# -- POST /v1/subscribers/{subscriberId}/messages/mark-as ------------------------------


async def test_mark_as_read_sets_read_seen_and_both_dates(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    message = await insert_in_app_message(app, subscriber)
    before = utcnow()
    response = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as",
        json={"messageId": message.id, "markAs": "read"},
    )
    assert response.status_code == 201, response.text
    [answer] = response.json()["data"]
    assert answer["_id"] == message.id
    assert answer["read"] is True and answer["seen"] is True
    assert parse_iso(answer["lastReadDate"]) >= before.replace(microsecond=0)
    assert answer["lastSeenDate"] == answer["lastReadDate"]
    row = await stored(app, message.id)
    assert row is not None and row.read is True and row.seen is True
    assert row.last_read_date is not None and row.last_seen_date is not None
    assert row.updated_at > message.updated_at


async def test_mark_as_unread_clears_only_read(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    read_at = utcnow() - timedelta(days=1)
    message = await insert_in_app_message(
        app, subscriber, read=True, seen=True, last_read_date=read_at, last_seen_date=read_at
    )
    response = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as",
        json={"messageId": [message.id], "markAs": "unread"},
    )
    assert response.status_code == 201, response.text
    [answer] = response.json()["data"]
    assert answer["read"] is False
    assert answer["seen"] is True
    row = await stored(app, message.id)
    assert row is not None and row.read is False and row.seen is True
    assert row.last_read_date == read_at


async def test_mark_as_seen_and_unseen(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    message = await insert_in_app_message(app, subscriber)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as"

    seen = (await api.post(path, json={"messageId": message.id, "markAs": "seen"})).json()["data"][0]
    assert seen["seen"] is True and seen["read"] is False
    assert "lastSeenDate" in seen and "lastReadDate" not in seen

    unseen = (await api.post(path, json={"messageId": message.id, "markAs": "unseen"})).json()["data"][0]
    assert unseen["seen"] is False and unseen["read"] is False
    row = await stored(app, message.id)
    assert row is not None and row.seen is False and row.read is False


async def test_mark_as_read_then_unseen_keeps_read(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    message = await insert_in_app_message(app, subscriber)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as"
    await api.post(path, json={"messageId": message.id, "markAs": "read"})
    answer = (await api.post(path, json={"messageId": message.id, "markAs": "unseen"})).json()["data"][0]
    assert answer["seen"] is False and answer["read"] is True


async def test_mark_as_answers_in_the_order_given_each_once(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    first, second, third = await insert_messages(app, subscriber, 3)
    response = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as",
        json={"messageId": [second.id, third.id, first.id, second.id], "markAs": "seen"},
    )
    assert response.status_code == 201, response.text
    assert [m["_id"] for m in response.json()["data"]] == [second.id, third.id, first.id]


async def test_mark_as_ignores_ids_that_are_not_the_subscribers(
    api: httpx.AsyncClient,
    production_api: httpx.AsyncClient,
    other_org_api: httpx.AsyncClient,
    app: FastAPI,
    subscriber,
    other_subscriber,
) -> None:
    own = await insert_in_app_message(app, subscriber)
    of_other_subscriber = await insert_in_app_message(app, other_subscriber)
    # The same subscriberId in the production environment is another subscriber.
    twin = await create_subscriber(production_api, subscriberId=subscriber["subscriberId"])
    of_other_environment = await insert_in_app_message(app, twin)
    stranger = await create_subscriber(other_org_api, subscriberId=subscriber["subscriberId"])
    of_other_organization = await insert_in_app_message(app, stranger)
    missing = new_id()

    response = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as",
        json={
            "messageId": [of_other_subscriber.id, own.id, of_other_environment.id, of_other_organization.id, missing],
            "markAs": "read",
        },
    )
    assert response.status_code == 201, response.text
    assert [m["_id"] for m in response.json()["data"]] == [own.id]
    for foreign in (of_other_subscriber, of_other_environment, of_other_organization):
        row = await stored(app, foreign.id)
        assert row is not None
        assert (row.read, row.seen, row.last_read_date, row.updated_at) == (False, False, None, foreign.updated_at)

    # Only in-app messages have inbox state: the subscriber's email is left alone.
    email = await insert_in_app_message(app, subscriber, channel="email", content=None)
    response = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as", json={"messageId": [email.id, own.id], "markAs": "seen"}
    )
    assert [m["_id"] for m in response.json()["data"]] == [own.id]
    row = await stored(app, email.id)
    assert (row.read, row.seen, row.updated_at) == (False, False, email.updated_at)

    only_foreign = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as",
        json={"messageId": of_other_subscriber.id, "markAs": "read"},
    )
    assert only_foreign.status_code == 201
    assert only_foreign.json() == {"data": []}


async def test_mark_as_unknown_subscriber_is_404(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v1/subscribers/nobody/messages/mark-as", json={"messageId": new_id(), "markAs": "read"}
    )
    assert_error(response, 404, "Subscriber nobody not found")
    # A subscriber of another environment is unknown here.
    elsewhere = await create_subscriber(production_api)
    response = await api.post(
        f"/v1/subscribers/{elsewhere['subscriberId']}/messages/mark-as",
        json={"messageId": new_id(), "markAs": "read"},
    )
    assert_error(response, 404, f"Subscriber {elsewhere['subscriberId']} not found")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messageId": "65f1c0ffee0000000000abcd", "markAs": "archived"}, "markAs"),
        ({"messageId": "65f1c0ffee0000000000abcd"}, "markAs"),
        ({"markAs": "read"}, "messageId"),
        ({"messageId": None, "markAs": "read"}, "messageId"),
        ({"messageId": [], "markAs": "read"}, "messageId"),
        ({"messageId": [1, 2], "markAs": "read"}, "messageId"),
        ({"messageId": 5, "markAs": "read"}, "messageId"),
        ({"messageId": ["65f1c0ffee0000000000abcd", None], "markAs": "read"}, "messageId"),
        ({"messageId": "not-an-id", "markAs": "read"}, "messageId"),
        ({"messageId": [new_id() for _ in range(1001)], "markAs": "read"}, "messageId"),
    ],
)
async def test_mark_as_validation(api: httpx.AsyncClient, subscriber, body: dict[str, Any], field: str) -> None:
    response = await api.post(f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as", json=body)
    error = assert_error(response, 422, "Validation Error")
    assert field in error["errors"], error
    assert error["errors"][field]["messages"]


async def test_mark_as_accepts_a_thousand_ids(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    message = await insert_in_app_message(app, subscriber)
    ids = [new_id() for _ in range(999)] + [message.id]
    response = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as", json={"messageId": ids, "markAs": "read"}
    )
    assert response.status_code == 201, response.text
    assert [m["_id"] for m in response.json()["data"]] == [message.id]


async def test_mark_as_requires_an_api_key(anonymous: httpx.AsyncClient) -> None:
    response = await anonymous.post(
        "/v1/subscribers/someone/messages/mark-as", json={"messageId": new_id(), "markAs": "read"}
    )
    assert_error(response, 401)


# -- the Message object ---------------------------------------------------------------------


async def test_message_has_the_spec_fields_and_types(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    cta = {
        "type": "redirect",
        "data": {"url": "https://example.com/orders/1"},
        "action": {
            "status": "pending",
            "buttons": [
                {"type": "primary", "content": "Accept", "resultContent": "Accepted"},
                {"type": "secondary", "content": "Decline"},
            ],
        },
    }
    content = [
        {"type": "text", "content": "Hello", "styles": {"textAlign": "left"}},
        {"type": "button", "content": "Open", "url": "https://example.com"},
    ]
    # Every field set, even those other channels use (mark-as answers in-app messages only).
    full = await insert_in_app_message(
        app,
        subscriber,
        content=content,
        cta=cta,
        payload={"order": 1},
        overrides={"email": {"from": "a@b.co"}},
        workflow_id=new_id(),
        message_template_id=new_id(),
        template_identifier="order-shipped",
        subject="Your order",
        title="Order",
        email="ada@example.com",
        phone="+15550100",
        direct_webhook_url="https://hooks.example.com/x",
        provider_id="sendgrid",
        device_tokens=["token-1"],
        feed_id=new_id(),
        status="error",
        error_id="provider_error",
        error_text="Rejected",
        snoozed_until=utcnow() + timedelta(hours=1),
        context_keys=["tenant:acme"],
        job_id=new_id(),
    )
    bare = await insert_in_app_message(app, subscriber)
    response = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as",
        json={"messageId": [full.id, bare.id], "markAs": "read"},
    )
    assert response.status_code == 201, response.text
    full_answer, bare_answer = response.json()["data"]

    for message in (full_answer, bare_answer):
        assert_spec_message(message)
    assert full_answer.keys() == SPEC_FIELD_TYPES.keys()
    assert full_answer["cta"] == cta
    assert full_answer["content"] == content
    assert full_answer["_templateId"] == full.workflow_id
    assert full_answer["_feedId"] == full.feed_id
    assert full_answer["_subscriberId"] == subscriber["_id"]
    assert full_answer["_environmentId"] == subscriber["_environmentId"]
    assert full_answer["_organizationId"] == subscriber["_organizationId"]
    assert full_answer["_notificationId"] == full.notification_id
    assert full_answer["transactionId"] == full.transaction_id
    assert full_answer["contextKeys"] == ["tenant:acme"]

    # Unset optional strings are left out; the spec's "string or null" fields are null.
    for absent in ("subject", "title", "email", "phone", "directWebhookUrl", "providerId", "deviceTokens",
                   "errorId", "errorText", "snoozedUntil", "templateIdentifier"):
        assert absent not in bare_answer, absent
    assert bare_answer["_templateId"] is None
    assert bare_answer["_messageTemplateId"] is None
    assert bare_answer["_feedId"] is None
    assert bare_answer["cta"] == {}
    assert bare_answer["content"] == "Hello"
    assert bare_answer["channel"] == "in_app"
    assert bare_answer["status"] == "sent"
    assert len(bare_answer["deliveredAt"]) == 1
    assert "subscriber" not in bare_answer and "template" not in bare_answer

    parsed = sdk_parse(response, list[novu.MessageResponseDto])
    assert [m.id for m in parsed] == [full.id, bare.id]
    assert parsed[0].cta.action.buttons[0].result_content == "Accepted"
    assert parsed[0].content[0].styles.text_align == "left"
    assert parsed[1].template_id is None


# -- POST /v1/subscribers/{subscriberId}/messages/mark-all ---------------------------------


async def test_mark_all_read_counts_the_changed_in_app_messages(
    api: httpx.AsyncClient, app: FastAPI, subscriber, other_subscriber
) -> None:
    unread = await insert_messages(app, subscriber, 3)
    already = await insert_in_app_message(app, subscriber, read=True, seen=True)
    seen_only = await insert_in_app_message(app, subscriber, seen=True)
    email = await insert_in_app_message(app, subscriber, channel="email")
    others = await insert_in_app_message(app, other_subscriber)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-all"

    response = await api.post(path, json={"markAs": "read"})
    assert response.status_code == 201, response.text
    assert response.json() == {"data": 4}
    assert sdk_parse(response, float) == 4.0
    for message in [*unread, seen_only]:
        row = await stored(app, message.id)
        assert row is not None and row.read and row.seen and row.last_read_date is not None
    assert (await stored(app, already.id)).last_read_date is None  # type: ignore[union-attr]
    for untouched in (email, others):
        row = await stored(app, untouched.id)
        assert row is not None and not row.read and not row.seen

    assert (await api.post(path, json={"markAs": "read"})).json() == {"data": 0}


async def test_mark_all_unread_unseen_and_seen(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    await insert_in_app_message(app, subscriber, read=True, seen=True)
    await insert_in_app_message(app, subscriber, seen=True)
    await insert_in_app_message(app, subscriber)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-all"
    assert (await api.post(path, json={"markAs": "unread"})).json() == {"data": 1}
    assert (await api.post(path, json={"markAs": "unseen"})).json() == {"data": 2}
    assert (await api.post(path, json={"markAs": "seen"})).json() == {"data": 3}
    assert (await api.post(path, json={"markAs": "seen"})).json() == {"data": 0}


async def test_mark_all_by_feed_identifier(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    feed_a, feed_b = new_id(), new_id()
    in_a = await insert_in_app_message(app, subscriber, feed_id=feed_a)
    in_b = await insert_in_app_message(app, subscriber, feed_id=feed_b)
    no_feed = await insert_in_app_message(app, subscriber)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-all"
    assert (await api.post(path, json={"markAs": "seen", "feedIdentifier": feed_a})).json() == {"data": 1}
    assert (await stored(app, in_a.id)).seen is True  # type: ignore[union-attr]
    assert (await stored(app, in_b.id)).seen is False  # type: ignore[union-attr]
    assert (await api.post(path, json={"markAs": "seen", "feedIdentifier": [feed_a, feed_b]})).json() == {"data": 1}
    assert (await stored(app, no_feed.id)).seen is False  # type: ignore[union-attr]


async def test_mark_all_unknown_subscriber_is_404(api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    response = await api.post("/v1/subscribers/nobody/messages/mark-all", json={"markAs": "read"})
    assert_error(
        response,
        404,
        f"Subscriber nobody does not exist in environment {tenancy.environment_id}, "
        "please provide a valid subscriber identifier",
    )


@pytest.mark.parametrize("body", [{}, {"markAs": "archived"}, {"markAs": "read", "feedIdentifier": 5}])
async def test_mark_all_validation(api: httpx.AsyncClient, subscriber, body: dict[str, Any]) -> None:
    response = await api.post(f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-all", json=body)
    error = assert_error(response, 422, "Validation Error")
    assert error["errors"]


# -- POST /v1/subscribers/{subscriberId}/messages/{messageId}/actions/{type} ----------------


async def test_action_records_status_and_result(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    buttons = [{"type": "primary", "content": "Accept"}, {"type": "secondary", "content": "Decline"}]
    message = await insert_in_app_message(
        app, subscriber, cta={"type": "redirect", "data": {"url": "/x"}, "action": {"status": "pending", "buttons": buttons}}
    )
    path = f"/v1/subscribers/{subscriber['subscriberId']}/messages/{message.id}/actions/primary"
    response = await api.post(path, json={"status": "done", "payload": {"answer": 42}})
    assert response.status_code == 201, response.text
    answer = response.json()["data"]
    assert_spec_message(answer)
    assert answer["cta"] == {
        "type": "redirect",
        "data": {"url": "/x"},
        "action": {"status": "done", "buttons": buttons, "result": {"type": "primary", "payload": {"answer": 42}}},
    }
    row = await stored(app, message.id)
    assert row is not None and row.cta["action"]["result"] == {"type": "primary", "payload": {"answer": 42}}
    assert sdk_parse(response, novu.MessageResponseDto).cta.action.status == "done"

    # Without a payload, the earlier payload stays and the type follows the button.
    again = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/{message.id}/actions/secondary",
        json={"status": "pending"},
    )
    assert again.json()["data"]["cta"]["action"]["result"] == {"type": "secondary", "payload": {"answer": 42}}
    assert again.json()["data"]["cta"]["action"]["status"] == "pending"


async def test_action_on_a_message_without_cta(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    message = await insert_in_app_message(app, subscriber)
    response = await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/{message.id}/actions/secondary",
        json={"status": "done"},
    )
    assert response.status_code == 201, response.text
    assert response.json()["data"]["cta"] == {"action": {"status": "done", "result": {"type": "secondary"}}}


async def test_action_errors(api: httpx.AsyncClient, app: FastAPI, subscriber, other_subscriber) -> None:
    message = await insert_in_app_message(app, subscriber)
    others = await insert_in_app_message(app, other_subscriber)
    base = f"/v1/subscribers/{subscriber['subscriberId']}/messages"

    error = assert_error(await api.post(f"{base}/{message.id}/actions/tertiary", json={"status": "done"}), 422)
    assert "type" in error["errors"]
    error = assert_error(await api.post(f"{base}/{message.id}/actions/primary", json={"status": "finished"}), 422)
    assert "status" in error["errors"]
    assert_error(await api.post(f"{base}/{message.id}/actions/primary", json={}), 422)
    assert_error(
        await api.post(f"{base}/{others.id}/actions/primary", json={"status": "done"}), 404, f"Message {others.id} not found"
    )
    assert (await stored(app, others.id)).cta == {}  # type: ignore[union-attr]
    assert_error(
        await api.post(f"/v1/subscribers/nobody/messages/{message.id}/actions/primary", json={"status": "done"}),
        404,
        "Subscriber nobody not found",
    )


# -- GET /v1/messages --------------------------------------------------------------------------


async def test_list_messages_paginates_newest_first(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    messages = await insert_messages(app, subscriber, 5)
    newest_first = [m.id for m in reversed(messages)]

    first = await api.get("/v1/messages", params={"page": 0, "limit": 2})
    assert first.status_code == 200, first.text
    body = first.json()
    assert {k: body[k] for k in ("page", "pageSize", "totalCount", "hasMore")} == {
        "page": 0, "pageSize": 2, "totalCount": 5, "hasMore": True,
    }
    assert [m["_id"] for m in body["data"]] == newest_first[:2]
    for message in body["data"]:
        assert_spec_message(message)
    parsed = sdk_parse(first, novu.MessagesResponseDto)
    assert parsed.total_count == 5 and parsed.has_more is True

    last = (await api.get("/v1/messages", params={"page": 2, "limit": 2})).json()
    assert [m["_id"] for m in last["data"]] == newest_first[4:]
    assert last["hasMore"] is False and last["totalCount"] == 5

    beyond = (await api.get("/v1/messages", params={"page": 9, "limit": 2})).json()
    assert beyond["data"] == [] and beyond["hasMore"] is False and beyond["totalCount"] == 5

    default = (await api.get("/v1/messages")).json()
    assert default["page"] == 0 and default["pageSize"] == 10 and len(default["data"]) == 5


async def test_list_and_feed_count_no_further_than_a_bound_past_the_page(
    api: httpx.AsyncClient, app: FastAPI, subscriber, monkeypatch: pytest.MonkeyPatch
) -> None:
    """totalCount stops counting COUNT_AHEAD matches past the page: a large store is not read whole for it."""
    monkeypatch.setattr(pagination, "COUNT_AHEAD", 3)
    await insert_messages(app, subscriber, 12)
    feed = f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed"
    for path in ("/v1/messages", feed):
        first = (await api.get(path, params={"limit": 2})).json()
        # The page (2) and 3 more: "at least 5", with more to come.
        assert (len(first["data"]), first["totalCount"], first["hasMore"]) == (2, 5, True), path
        near_the_end = (await api.get(path, params={"page": 4, "limit": 2})).json()
        assert (len(near_the_end["data"]), near_the_end["totalCount"], near_the_end["hasMore"]) == (2, 12, True), path
        last = (await api.get(path, params={"page": 5, "limit": 2})).json()
        assert (len(last["data"]), last["totalCount"], last["hasMore"]) == (2, 12, False), path
    # Narrowed to the subscriber or to transactions, the list counts them whole (a broadcast's progress).
    narrowed = await api.get("/v1/messages", params={"limit": 2, "subscriberId": subscriber["subscriberId"]})
    assert (narrowed.json()["totalCount"], narrowed.json()["hasMore"]) == (12, True)
    # Left at its value, the same store is counted exactly.
    monkeypatch.undo()
    assert (await api.get("/v1/messages", params={"limit": 2})).json()["totalCount"] == 12


async def test_a_transactions_messages_are_counted_whole(
    api: httpx.AsyncClient, app: FastAPI, subscriber, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pagination, "COUNT_AHEAD", 1)
    others = [await create_subscriber(api) for _ in range(4)]
    for each in [subscriber, *others]:
        await insert_in_app_message(app, each, transaction_id="broadcast-1")
    await insert_messages(app, subscriber, 3)
    body = (await api.get("/v1/messages", params={"transactionId": "broadcast-1", "limit": 1})).json()
    assert (len(body["data"]), body["totalCount"], body["hasMore"]) == (1, 5, True)
    # The whole environment's 8 are counted no further than the page and one more.
    assert (await api.get("/v1/messages", params={"limit": 1})).json()["totalCount"] == 2


async def test_list_messages_accepts_the_sdks_float_numbers(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    await insert_messages(app, subscriber, 3)
    body = (await api.get("/v1/messages", params={"page": "1.0", "limit": "2.0"})).json()
    assert body["page"] == 1 and body["pageSize"] == 2 and len(body["data"]) == 1


async def test_list_messages_filters(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, subscriber, other_subscriber
) -> None:
    mine = await insert_in_app_message(app, subscriber, transaction_id="txn-a")
    mine_email = await insert_in_app_message(app, subscriber, channel="email", transaction_id="txn-b")
    theirs = await insert_in_app_message(app, other_subscriber, transaction_id="txn-a")
    twin = await create_subscriber(production_api)
    await insert_in_app_message(app, twin, transaction_id="txn-a")

    async def ids(**params: Any) -> set[str]:
        response = await api.get("/v1/messages", params=params)
        assert response.status_code == 200, response.text
        assert response.json()["totalCount"] == len(response.json()["data"])
        return {m["_id"] for m in response.json()["data"]}

    assert await ids() == {mine.id, mine_email.id, theirs.id}
    assert await ids(subscriberId=subscriber["subscriberId"]) == {mine.id, mine_email.id}
    assert await ids(channel="email") == {mine_email.id}
    assert await ids(transactionId="txn-a") == {mine.id, theirs.id}
    assert await ids(transactionId=["txn-a", "txn-b"]) == {mine.id, mine_email.id, theirs.id}
    assert await ids(subscriberId=subscriber["subscriberId"], transactionId="txn-a", channel="in_app") == {mine.id}


async def test_list_messages_errors(api: httpx.AsyncClient) -> None:
    assert_error(await api.get("/v1/messages", params={"subscriberId": "nobody"}), 404, "Subscriber nobody not found")
    assert "channel" in assert_error(await api.get("/v1/messages", params={"channel": "fax"}), 422)["errors"]
    assert "limit" in assert_error(await api.get("/v1/messages", params={"limit": 101}), 422)["errors"]
    assert "page" in assert_error(await api.get("/v1/messages", params={"page": -1}), 422)["errors"]
    assert_error(await api.get("/v1/messages", params={"transactionId": [str(i) for i in range(101)]}), 422)


# -- DELETE /v1/messages/{messageId} and /v1/messages/transaction/{transactionId} -------------


async def test_delete_message(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, subscriber
) -> None:
    message = await insert_in_app_message(app, subscriber)
    assert_error(await production_api.delete(f"/v1/messages/{message.id}"), 404, f"Message with id {message.id} not found")
    assert await stored(app, message.id) is not None

    response = await api.delete(f"/v1/messages/{message.id}")
    assert response.status_code == 200, response.text
    assert response.json() == {"data": {"acknowledged": True, "status": "deleted"}}
    assert sdk_parse(response, novu.DeleteMessageResponseDto).acknowledged is True
    assert await stored(app, message.id) is None
    assert_error(await api.delete(f"/v1/messages/{message.id}"), 404, f"Message with id {message.id} not found")


async def test_delete_messages_by_transaction(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, subscriber, other_subscriber
) -> None:
    in_app = await insert_in_app_message(app, subscriber, transaction_id="txn-del")
    email = await insert_in_app_message(app, subscriber, channel="email", transaction_id="txn-del")
    theirs = await insert_in_app_message(app, other_subscriber, transaction_id="txn-del")
    other_txn = await insert_in_app_message(app, subscriber, transaction_id="txn-keep")
    twin = await create_subscriber(production_api)
    elsewhere = await insert_in_app_message(app, twin, transaction_id="txn-del")

    response = await api.delete("/v1/messages/transaction/txn-del", params={"channel": "email"})
    assert response.status_code == 204, response.text
    assert response.content == b""
    assert await stored(app, email.id) is None
    assert await stored(app, in_app.id) is not None

    assert_error(
        await api.delete("/v1/messages/transaction/txn-del", params={"channel": "sms"}),
        404,
        "Invalid transactionId or channel",
    )
    assert (await api.delete("/v1/messages/transaction/txn-del")).status_code == 204
    assert await stored(app, in_app.id) is None and await stored(app, theirs.id) is None
    assert await stored(app, other_txn.id) is not None
    assert await stored(app, elsewhere.id) is not None
    assert_error(await api.delete("/v1/messages/transaction/txn-del"), 404, "Invalid transactionId or channel")
    assert "channel" in assert_error(
        await api.delete("/v1/messages/transaction/txn-keep", params={"channel": "fax"}), 422
    )["errors"]


# -- GET /v1/subscribers/{subscriberId}/notifications/feed ------------------------------------


async def test_feed_is_the_in_app_messages_newest_first(
    api: httpx.AsyncClient, app: FastAPI, subscriber, other_subscriber
) -> None:
    messages = await insert_messages(app, subscriber, 12)
    await insert_in_app_message(app, subscriber, channel="email")
    await insert_in_app_message(app, other_subscriber)
    newest_first = [m.id for m in reversed(messages)]
    path = f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed"

    first = await api.get(path)
    assert first.status_code == 200, first.text
    body = first.json()
    assert set(body) == {"data", "page", "pageSize", "totalCount", "hasMore"}
    assert (body["page"], body["pageSize"], body["totalCount"], body["hasMore"]) == (0, 10, 12, True)
    assert [m["_id"] for m in body["data"]] == newest_first[:10]
    for message in body["data"]:
        assert_spec_message(message)
        assert message["channel"] == "in_app"

    second = (await api.get(path, params={"page": 1})).json()
    assert [m["_id"] for m in second["data"]] == newest_first[10:]
    assert (second["page"], second["totalCount"], second["hasMore"]) == (1, 12, False)

    small = (await api.get(path, params={"page": 2, "limit": 5})).json()
    assert [m["_id"] for m in small["data"]] == newest_first[10:]
    assert (small["pageSize"], small["totalCount"], small["hasMore"]) == (5, 12, False)


async def test_feed_ties_on_creation_time_break_by_id(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    moment = utcnow()
    messages = [await insert_in_app_message(app, subscriber, created_at=moment) for _ in range(3)]
    body = (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed")).json()
    assert [m["_id"] for m in body["data"]] == sorted((m.id for m in messages), reverse=True)


async def test_feed_read_and_seen_filters(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    fresh = await insert_in_app_message(app, subscriber)
    seen = await insert_in_app_message(app, subscriber, seen=True)
    read = await insert_in_app_message(app, subscriber, seen=True, read=True)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed"

    async def ids(**params: Any) -> set[str]:
        response = await api.get(path, params=params)
        assert response.status_code == 200, response.text
        assert response.json()["totalCount"] == len(response.json()["data"])
        return {m["_id"] for m in response.json()["data"]}

    assert await ids(seen="false") == {fresh.id}
    assert await ids(seen="true") == {seen.id, read.id}
    assert await ids(read="true") == {read.id}
    assert await ids(read="false") == {fresh.id, seen.id}
    assert await ids(read="false", seen="true") == {seen.id}
    assert "read" in assert_error(await api.get(path, params={"read": "maybe"}), 422)["errors"]


def encoded(value: Any) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


async def test_feed_payload_filter(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    order = await insert_in_app_message(
        app, subscriber, payload={"kind": "order", "order": {"id": 7, "paid": True, "tags": ["a", "b"]}}
    )
    other_order = await insert_in_app_message(
        app, subscriber, payload={"kind": "order", "order": {"id": 8, "paid": 1, "tags": ["b", "a"]}}
    )
    chat = await insert_in_app_message(app, subscriber, payload={"kind": "chat", "text": "ünïcode", "note": None})
    await insert_in_app_message(app, subscriber)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed"

    async def ids(partial: Any, **params: Any) -> list[str]:
        response = await api.get(path, params={"payload": encoded(partial), **params})
        assert response.status_code == 200, response.text
        return [m["_id"] for m in response.json()["data"]]

    assert await ids({"kind": "order"}) == [other_order.id, order.id]
    assert await ids({"order": {"id": 7}}) == [order.id]
    assert await ids({"order": {"id": 7.0}}) == [order.id]
    assert await ids({"order": {"paid": True}}) == [order.id]  # true is not 1
    assert await ids({"order": {"paid": 1}}) == [other_order.id]
    assert await ids({"order": {"tags": ["a", "b"]}}) == [order.id]
    assert await ids({"order": {}}) == [other_order.id, order.id]
    assert await ids({"text": "ünïcode"}) == [chat.id]
    assert await ids({"note": None}) == [chat.id]  # null matches null, not a missing key
    assert await ids({"kind": "order", "order": {"id": 8}}) == [other_order.id]
    assert await ids({"kind": "nothing"}) == []
    assert await ids({"order": "7"}) == []
    assert len(await ids({})) == 4  # an empty filter matches everything

    page = (await api.get(path, params={"payload": encoded({"kind": "order"}), "limit": 1, "page": 1})).json()
    assert [m["_id"] for m in page["data"]] == [order.id]
    assert (page["totalCount"], page["hasMore"]) == (2, False)

    url_safe = base64.urlsafe_b64encode(json.dumps({"kind": "chat"}).encode()).decode().rstrip("=")
    assert [m["_id"] for m in (await api.get(path, params={"payload": url_safe})).json()["data"]] == [chat.id]


@pytest.mark.parametrize("payload", ["%%%", encoded([1, 2]), encoded("text"), base64.b64encode(b"{not json").decode()])
async def test_feed_payload_must_be_base64_json_object(api: httpx.AsyncClient, subscriber, payload: str) -> None:
    response = await api.get(f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed", params={"payload": payload})
    assert "payload" in assert_error(response, 422, "Validation Error")["errors"]


async def test_feed_errors(api: httpx.AsyncClient, subscriber) -> None:
    assert_error(
        await api.get("/v1/subscribers/nobody/notifications/feed"),
        404,
        "Subscriber not found for this environment with the id: nobody. "
        "Make sure to create a subscriber before fetching the feed.",
    )
    path = f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed"
    assert "limit" in assert_error(await api.get(path, params={"limit": 101}), 422)["errors"]
    assert "limit" in assert_error(await api.get(path, params={"limit": 0}), 422)["errors"]
    assert "page" in assert_error(await api.get(path, params={"page": -1}), 422)["errors"]


async def test_feed_of_another_environment_is_404(
    production_api: httpx.AsyncClient, app: FastAPI, subscriber
) -> None:
    await insert_in_app_message(app, subscriber)
    response = await production_api.get(f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed")
    assert_error(response, 404)


# -- GET /v1/subscribers/{subscriberId}/notifications/unseen ----------------------------------


async def test_unseen_count(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, subscriber, other_subscriber) -> None:
    await insert_messages(app, subscriber, 4)
    await insert_in_app_message(app, subscriber, seen=True)
    await insert_in_app_message(app, subscriber, channel="email")
    await insert_in_app_message(app, other_subscriber)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/notifications/unseen"

    response = await api.get(path)
    assert response.status_code == 200, response.text
    assert response.json() == {"data": {"count": 4}}
    assert sdk_parse(response, novu.UnseenCountResponse).count == 4
    assert (await api.get(path, params={"seen": "true"})).json() == {"data": {"count": 1}}
    assert (await api.get(path, params={"limit": 3})).json() == {"data": {"count": 3}}
    assert "limit" in assert_error(await api.get(path, params={"limit": 0}), 422)["errors"]
    assert_error(
        await api.get("/v1/subscribers/nobody/notifications/unseen"),
        404,
        f"Subscriber nobody does not exist in environment {tenancy.environment_id}, "
        "please provide a valid subscriber identifier",
    )


async def test_unseen_count_follows_mark_as(api: httpx.AsyncClient, app: FastAPI, subscriber) -> None:
    first, second = await insert_messages(app, subscriber, 2)
    unseen = f"/v1/subscribers/{subscriber['subscriberId']}/notifications/unseen"
    await api.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as", json={"messageId": first.id, "markAs": "read"}
    )
    assert (await api.get(unseen)).json() == {"data": {"count": 1}}
    await api.post(f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-all", json={"markAs": "seen"})
    assert (await api.get(unseen)).json() == {"data": {"count": 0}}


# -- the inbox queries use the subscriber/channel index ------------------------------------


async def _plan(app: FastAPI, query: Any, *, analyze: bool = False, forbid_sort: bool = False) -> str:
    """The query's plan on this store.

    On PostgreSQL, ``analyze`` plans from the table's statistics as autovacuum
    keeps them, and ``forbid_sort`` asks whether an index can give the
    query's order (a few rows are cheaper to sort, so the planner would
    otherwise answer by what other tests left in the table).
    """
    async with app.state.sessionmaker() as session:
        dialect = session.get_bind().dialect
        sql = str(query.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
        if dialect.name == "postgresql":
            # With a few rows a sequential scan is cheapest; forbid it to see
            # which index the planner can use for this query.
            await session.execute(text("SET LOCAL enable_seqscan = off"))
            if analyze:
                await session.execute(text("ANALYZE messages"))
            if forbid_sort:
                await session.execute(text("SET LOCAL enable_sort = off"))
            rows = await session.execute(text(f"EXPLAIN {sql}"))
        else:
            rows = await session.execute(text(f"EXPLAIN QUERY PLAN {sql}"))
        plan = "\n".join(" ".join(str(column) for column in row) for row in rows)
        await session.rollback()
    return plan


async def test_feed_and_unseen_queries_use_the_subscriber_channel_index(app: FastAPI, subscriber, other_subscriber) -> None:
    """An inbox is read from its subscriber's index, not by filtering the environment's messages newest first."""
    await insert_messages(app, subscriber, 3)
    await insert_messages(app, other_subscriber, 60)  # the environment holds other inboxes too
    async with app.state.sessionmaker() as session:
        repository = MessageRepository(session)
        queries = [
            repository.feed_query(subscriber["_environmentId"], subscriber["_id"], FeedFilter()),
            repository.feed_query(subscriber["_environmentId"], subscriber["_id"], FeedFilter(read=False, seen=True)),
            repository.count_query(subscriber["_environmentId"], subscriber["_id"], seen=False, limit=100),
        ]
    for query in queries:
        plan = await _plan(app, query, analyze=True)
        assert "ix_messages_subscriber_channel_created" in plan, plan


# One channel's messages: from their own index on PostgreSQL (migration 0032), from the environment's on SQLite.
CHANNEL_INDEX = {"postgresql": "ix_messages_environment_channel_created", "sqlite": "ix_messages_environment_created"}


def _dialect(app: FastAPI) -> str:
    return str(app.state.engine.dialect.name)


async def test_the_message_list_reads_the_environment_newest_first_from_its_index(app: FastAPI, subscriber) -> None:
    """GET /v1/messages reads a page from the newest end of an index, not by sorting the environment's messages."""
    await insert_messages(app, subscriber, 3)
    async with app.state.sessionmaker() as session:
        repository = MessageRepository(session)
        queries = [
            repository.list_query(subscriber["_environmentId"], subscriber_id=None, channel=None, transaction_ids=None),
            repository.list_query(subscriber["_environmentId"], subscriber_id=None, channel="in_app", transaction_ids=None),
        ]
    for query, index in zip(queries, ["ix_messages_environment_created", CHANNEL_INDEX[_dialect(app)]], strict=True):
        plan = await _plan(app, query.limit(10), forbid_sort=True)
        assert index in plan, plan
        assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan


async def test_the_message_list_finds_given_transactions_by_their_index(app: FastAPI, subscriber, other_subscriber) -> None:
    """GET /v1/messages?transactionId=...: the few transactions' messages by their index, not a scan of the environment.

    The environment's newest-first index gives the list's order, and SQLite,
    with no statistics, preferred it: every message of the environment read to
    find a polling client's transactions.
    """
    mine = await insert_messages(app, subscriber, 2)
    await insert_messages(app, other_subscriber, 60)
    async with app.state.sessionmaker() as session:
        query = MessageRepository(session).list_query(
            subscriber["_environmentId"], subscriber_id=None, channel="in_app", transaction_ids=[m.transaction_id for m in mine]
        )
    plan = await _plan(app, query.limit(10), analyze=True)
    assert "ix_messages_environment_transaction" in plan, plan
