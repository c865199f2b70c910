"""The Inbox's socket (/socket.io/) against a running server, as @novu/js 3.19's socket.io client uses it.

Each test serves a fresh app of the test's store (SQLite: the change reaches
the socket from the in-process worker's commit; PostgreSQL: through
LISTEN/NOTIFY) and connects with python-socketio's client.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest
import socketio
from fastapi import FastAPI
from sqlalchemy import select

from herald.inbox import service as inbox_service
from herald.kit.auth import subscriber_token_key
from herald.models import Environment, Subscriber
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.fixtures.processes import wait_until
from tests.realtime.helpers import InboxSocket, session_token


async def identifier_of(app: FastAPI, environment_id: str) -> str:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Environment.identifier).where(Environment.id == environment_id))).scalar_one()


async def subscriber_row(app: FastAPI, internal_id: str) -> Subscriber:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Subscriber).where(Subscriber.id == internal_id))).scalar_one()


async def open_inbox(app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket]) -> tuple[dict[str, Any], InboxSocket, dict[str, Any]]:
    """A subscriber with a session and a socket connected as @novu/js connects it."""
    subscriber = await create_subscriber(herald)
    session = await session_token(served, await identifier_of(app, tenancy.environment_id), subscriber["subscriberId"])
    socket = InboxSocket()
    sockets.append(socket)
    await socket.connect(served, session["token"])
    return subscriber, socket, session


async def trigger(herald: httpx.AsyncClient, workflow: dict[str, Any], subscriber_id: str, **payload: Any) -> None:
    response = await herald.post(
        "/v1/events/trigger", json={"name": workflow["triggers"][0]["identifier"], "to": subscriber_id, "payload": payload}
    )
    assert response.status_code == 201, response.text


async def test_a_bad_or_expired_token_is_refused(app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(herald)
    session = await session_token(served, await identifier_of(app, tenancy.environment_id), subscriber["subscriberId"])
    claims = jwt.decode(session["token"], options={"verify_signature": False})
    expired = jwt.encode(
        {**claims, "iat": int(time.time()) - 7200, "exp": int(time.time()) - 3600},
        subscriber_token_key(app.state.settings.secret_key),
        algorithm="HS256",
    )
    forged = jwt.encode(claims, b"not the key this server signs its tokens with", algorithm="HS256")
    for token in ("", "not-a-jwt", expired, forged):
        socket = InboxSocket()
        with pytest.raises(socketio.exceptions.ConnectionError):
            await socket.connect(served, token)
        assert not socket.client.connected
    # The API key is no subscriber token either.
    socket = InboxSocket()
    with pytest.raises(socketio.exceptions.ConnectionError):
        await socket.connect(served, tenancy.api_key)
    row = await subscriber_row(app, subscriber["_id"])
    assert row.is_online is not True


async def test_connecting_marks_the_subscriber_online_and_the_last_disconnect_offline(
    app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket]
) -> None:
    subscriber, first, session = await open_inbox(app, served, tenancy, herald, sockets)
    row = await subscriber_row(app, subscriber["_id"])
    assert row.is_online is True
    assert row.last_online_at is None
    second = InboxSocket()
    sockets.append(second)
    await second.connect(served, session["token"])

    await first.close()
    # Another tab still holds a socket: still online.
    await first.nothing_within(0.5)
    assert (await subscriber_row(app, subscriber["_id"])).is_online is True

    await second.close()

    async def offline() -> Subscriber | None:
        found = await subscriber_row(app, subscriber["_id"])
        return found if found.is_online is False else None

    row = await wait_until(offline, timeout=10, what="the subscriber to be offline")
    assert row.last_online_at is not None
    answer = (await herald.get(f"/v1/subscribers/{subscriber['subscriberId']}")).json()["data"]
    assert answer["isOnline"] is False
    assert answer["lastOnlineAt"]


async def test_a_trigger_reaches_its_subscribers_socket_only(
    app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket]
) -> None:
    workflow = await create_workflow(
        herald,
        steps=[
            {
                "name": "inbox",
                "template": {
                    "type": "in_app",
                    "content": "Hello {{payload.name}}",
                    "cta": {
                        "type": "redirect",
                        "data": {"url": "/orders/1"},
                        "action": {"buttons": [{"type": "primary", "content": "Open"}]},
                    },
                },
            }
        ],
    )
    ada, ada_socket, _ = await open_inbox(app, served, tenancy, herald, sockets)
    bob, bob_socket, _ = await open_inbox(app, served, tenancy, herald, sockets)

    await trigger(herald, workflow, ada["subscriberId"], name="Ada")

    received = await ada_socket.next("notification_received")
    message = received["message"]
    listed = (await herald.get("/v1/messages", params={"subscriberId": ada["subscriberId"]})).json()["data"]
    assert message["_id"] == listed[0]["_id"]
    # What @novu/js's mapToNotification reads.
    assert message["content"] == "Hello Ada"
    assert message["read"] is False and message["seen"] is False and message["archived"] is False
    assert message["channel"] == "in_app"
    assert message["createdAt"]
    assert message["subscriber"]["subscriberId"] == ada["subscriberId"]
    assert message["subscriber"]["_id"] == ada["_id"]
    assert message["cta"]["data"]["url"] == "/orders/1"
    assert message["cta"]["action"]["buttons"][0]["content"] == "Open"
    assert message["workflow"]["identifier"] == workflow["triggers"][0]["identifier"]
    assert message["tags"] == [] and message["severity"] == "none"
    assert await ada_socket.next("unseen_count_changed") == {"unseenCount": 1, "hasMore": False}
    unread = await ada_socket.next("unread_count_changed")
    assert unread == {
        "unreadCount": 1,
        "counts": {"total": 1, "severity": {"high": 0, "medium": 0, "low": 0, "none": 1}},
        "hasMore": False,
    }
    assert await bob_socket.nothing_within(0.5) == []
    assert bob["subscriberId"] != ada["subscriberId"]


async def test_marking_read_through_the_inbox_sends_the_counts(
    app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket]
) -> None:
    workflow = await create_workflow(herald)
    subscriber, socket, session = await open_inbox(app, served, tenancy, herald, sockets)
    await trigger(herald, workflow, subscriber["subscriberId"], name="one")
    await socket.next("notification_received")
    await trigger(herald, workflow, subscriber["subscriberId"], name="two")
    message = (await socket.next("notification_received"))["message"]
    assert (await socket.next("unread_count_changed"))["unreadCount"] == 2

    async with httpx.AsyncClient(base_url=served, headers={"Authorization": f"Bearer {session['token']}"}) as inbox:
        response = await inbox.patch(f"/v1/inbox/notifications/{message['_id']}/read")
        assert response.status_code == 200, response.text
        assert await socket.next("unseen_count_changed") == {"unseenCount": 1, "hasMore": False}
        unread = await socket.next("unread_count_changed")
        assert unread["unreadCount"] == 1 and unread["counts"]["total"] == 1

        response = await inbox.post("/v1/inbox/notifications/read", json={})
        assert response.status_code == 204, response.text
        assert (await socket.next("unread_count_changed"))["counts"] == {
            "total": 0,
            "severity": {"high": 0, "medium": 0, "low": 0, "none": 0},
        }

    # The v1 route (the backend's API key) moves the same counts.
    response = await herald.post(
        f"/v1/subscribers/{subscriber['subscriberId']}/messages/mark-as",
        json={"messageId": message["_id"], "markAs": "unread"},
    )
    assert response.status_code == 201, response.text
    assert (await socket.next("unread_count_changed"))["unreadCount"] == 1


async def test_a_snooze_that_ends_by_itself_is_received_again(
    app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket]
) -> None:
    """The worker brings the notification back at snoozedUntil: notification_received and both counts, as when created."""
    workflow = await create_workflow(herald)
    subscriber, socket, _ = await open_inbox(app, served, tenancy, herald, sockets)
    await trigger(herald, workflow, subscriber["subscriberId"], name="later")
    message_id = (await socket.next("notification_received"))["message"]["_id"]
    assert (await socket.next("unread_count_changed"))["unreadCount"] == 1

    until = datetime.now(UTC) + timedelta(seconds=2)
    # The route refuses a time already past; on a loaded machine the request may take longer than this short
    # snooze, so its clock runs a minute behind while it is called.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(inbox_service, "utcnow", lambda: datetime.now(UTC) - timedelta(minutes=1))
        response = await herald.patch(
            f"/v2/subscribers/{subscriber['subscriberId']}/notifications/{message_id}/snooze",
            json={"snoozeUntil": until.isoformat()},
        )
    assert response.status_code == 200, response.text
    # Snoozed: out of the unread count until its time (when the machine is not so slow that it is back already).
    assert (await socket.next("unread_count_changed"))["unreadCount"] in (0, 1)

    back = await socket.next("notification_received", timeout=15)
    assert back["message"]["_id"] == message_id
    assert datetime.now(UTC) >= until
    assert (await socket.next("unread_count_changed"))["unreadCount"] == 1
    listed = await herald.get(f"/v2/subscribers/{subscriber['subscriberId']}/notifications")
    [item] = listed.json()["data"]
    assert item["isSnoozed"] is False and len(item["deliveredAt"]) == 2


async def test_changes_with_the_api_key_send_the_counts(
    app: FastAPI, served: str, tenancy: Tenancy, herald: httpx.AsyncClient, sockets: list[InboxSocket]
) -> None:
    """/v2/subscribers/{id}/notifications is the Inbox's own implementation: the socket hears its changes too."""
    workflow = await create_workflow(herald)
    subscriber, socket, _ = await open_inbox(app, served, tenancy, herald, sockets)
    await trigger(herald, workflow, subscriber["subscriberId"], name="one")
    message_id = (await socket.next("notification_received"))["message"]["_id"]
    assert (await socket.next("unread_count_changed"))["unreadCount"] == 1
    notifications = f"/v2/subscribers/{subscriber['subscriberId']}/notifications"
    response = await herald.patch(f"{notifications}/{message_id}/read")
    assert response.status_code == 200, response.text
    assert await socket.next("unseen_count_changed") == {"unseenCount": 0, "hasMore": False}
    assert (await socket.next("unread_count_changed"))["unreadCount"] == 0
    response = await herald.post(f"{notifications}/delete", json={})
    assert response.status_code == 204, response.text
    assert (await socket.next("unread_count_changed"))["unreadCount"] == 0
