"""/v2/subscribers/{subscriberId}/notifications: the API key's view of a subscriber's inbox.

One implementation with the Inbox API (/v1/inbox): what one changes the other sees.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from herald.kit.time import isoformat, utcnow
from herald.models import Message
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_subscriber, create_workflow, insert_in_app_message
from tests.inbox.test_routes import Inbox, inbox  # noqa: F401  (the fixture)


def path(subscriber_id: str, rest: str = "") -> str:
    return f"/v2/subscribers/{subscriber_id}/notifications{rest}"


async def stored(app: FastAPI, message_id: str) -> Message | None:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Message).where(Message.id == message_id))).scalar_one_or_none()


async def patch(api: httpx.AsyncClient, subscriber_id: str, rest: str, body: Any = None) -> dict[str, Any]:
    response = await api.patch(path(subscriber_id, rest), json=body)
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def test_list_filters_and_cursor(app: FastAPI, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    sid = subscriber["subscriberId"]
    workflow = await create_workflow(api, tags=["billing"])
    first = await insert_in_app_message(app, subscriber, workflow_id=workflow["_id"], data={"kind": "invoice"})
    second = await insert_in_app_message(app, subscriber, read=True, seen=True)
    third = await insert_in_app_message(app, subscriber)
    response = await api.get(path(sid), params={"limit": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [item["id"] for item in body["data"]] == [third.id, second.id] and body["hasMore"] is True
    rest = (await api.get(path(sid), params={"limit": "2.0", "after": second.id})).json()
    assert [item["id"] for item in rest["data"]] == [first.id] and rest["hasMore"] is False
    unread = (await api.get(path(sid), params={"read": "false"})).json()
    assert [item["id"] for item in unread["data"]] == [third.id, first.id] and unread["filter"] == {"read": False}
    by_data = (await api.get(path(sid), params={"data": json.dumps({"kind": "invoice"})})).json()
    assert [item["id"] for item in by_data["data"]] == [first.id]
    assert by_data["data"][0]["workflow"]["identifier"] == workflow["triggers"][0]["identifier"]
    assert_error(await api.get(path(sid), params={"limit": 0}), 422)


async def test_count(app: FastAPI, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    await insert_in_app_message(app, subscriber)
    await insert_in_app_message(app, subscriber, read=True, seen=True)
    response = await api.get(
        path(subscriber["subscriberId"], "/count"), params={"filters": json.dumps([{}, {"read": False}])}
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"] == [{"count": 2, "filter": {}}, {"count": 1, "filter": {"read": False}}]
    assert_error(await api.get(path(subscriber["subscriberId"], "/count"), params={"filters": "nope"}), 422)


async def test_state_changes_are_the_inbox_s(app: FastAPI, api: httpx.AsyncClient, inbox: Inbox) -> None:  # noqa: F811
    subscriber = inbox.session["subscriber"]
    sid = subscriber["subscriberId"]
    message = await insert_in_app_message(app, subscriber)
    read = await patch(api, sid, f"/{message.id}/read")
    assert read["isRead"] is True and read["isSeen"] is True and read["readAt"]
    assert (await inbox.list(read="true"))["data"][0]["id"] == message.id
    unread = await patch(api, sid, f"/{message.id}/unread")
    assert unread["isRead"] is False
    archived = await patch(api, sid, f"/{message.id}/archive")
    assert archived["isArchived"] is True and archived["isRead"] is True
    assert await inbox.ids(archived="true") == [message.id]
    unarchived = await patch(api, sid, f"/{message.id}/unarchive")
    assert unarchived["isArchived"] is False
    until = isoformat(utcnow() + timedelta(hours=1))
    snoozed = await patch(api, sid, f"/{message.id}/snooze", {"snoozeUntil": until})
    assert snoozed["isSnoozed"] is True
    assert await inbox.ids(snoozed="true") == [message.id]
    unsnoozed = await patch(api, sid, f"/{message.id}/unsnooze")
    assert unsnoozed["isSnoozed"] is False and len(unsnoozed["deliveredAt"]) == 2
    assert_error(await api.patch(path(sid, f"/{message.id}/snooze"), json={"snoozeUntil": isoformat(utcnow())}), 400)
    row = await stored(app, message.id)
    assert row is not None and row.snoozed_until is None and row.read is True and row.archived is False


async def test_actions(app: FastAPI, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    cta = {"action": {"buttons": [{"type": "primary", "content": "Open"}, {"type": "secondary", "content": "Later"}]}}
    message = await insert_in_app_message(app, subscriber, cta=cta)
    sid = subscriber["subscriberId"]
    done = await patch(api, sid, f"/{message.id}/actions/primary/complete")
    assert done["primaryAction"] == {"label": "Open", "isCompleted": True}
    assert done["secondaryAction"]["isCompleted"] is False
    reverted = await patch(api, sid, f"/{message.id}/actions/primary/revert")
    assert reverted["primaryAction"]["isCompleted"] is False
    row = await stored(app, message.id)
    assert row is not None and row.cta["action"]["status"] == "pending"
    assert_error(await api.patch(path(sid, f"/{message.id}/actions/tertiary/complete")), 422)


async def test_delete_and_bulk(app: FastAPI, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    sid = subscriber["subscriberId"]
    gone = await insert_in_app_message(app, subscriber)
    response = await api.delete(path(sid, f"/{gone.id}"))
    assert response.status_code == 204, response.text
    assert await stored(app, gone.id) is None
    one = await insert_in_app_message(app, subscriber)
    two = await insert_in_app_message(app, subscriber)
    assert (await api.post(path(sid, "/seen"), json={"notificationIds": [one.id]})).status_code == 204
    assert (await stored(app, one.id)).seen is True and (await stored(app, two.id)).seen is False  # type: ignore[union-attr]
    assert (await api.post(path(sid, "/read"), json={})).status_code == 204
    assert all([(await stored(app, m.id)).read for m in (one, two)])  # type: ignore[union-attr]
    assert (await api.post(path(sid, "/read-archive"), json={"tags": {}})).status_code == 204
    assert all([(await stored(app, m.id)).archived for m in (one, two)])  # type: ignore[union-attr]
    three = await insert_in_app_message(app, subscriber)
    assert (await api.post(path(sid, "/archive"), json={})).status_code == 204
    assert (await stored(app, three.id)).archived is True  # type: ignore[union-attr]
    assert (await api.post(path(sid, "/delete"), json={})).status_code == 204
    assert [await stored(app, m.id) for m in (one, two, three)] == [None, None, None]


async def test_unknown_subscriber_and_other_environments_answer_404(
    app: FastAPI, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    subscriber = await create_subscriber(api)
    sid = subscriber["subscriberId"]
    message = await insert_in_app_message(app, subscriber)
    assert_error(await api.get(path("nobody")), 404, "Subscriber: nobody was not found")
    # Production holds no such subscriber: every route is a 404, and nothing changes.
    assert_error(await production_api.get(path(sid)), 404)
    assert_error(await production_api.get(path(sid, "/count"), params={"filters": "[{}]"}), 404)
    assert_error(await production_api.patch(path(sid, f"/{message.id}/read")), 404)
    assert_error(await production_api.delete(path(sid, f"/{message.id}")), 404)
    assert_error(await production_api.post(path(sid, "/read"), json={}), 404)
    # The same subscriberId in production: its inbox does not hold the development message.
    await create_subscriber(production_api, subscriberId=sid)
    assert (await production_api.get(path(sid))).json()["data"] == []
    assert_error(await production_api.patch(path(sid, f"/{message.id}/archive")), 404)
    assert_error(await production_api.delete(path(sid, f"/{message.id}")), 404)
    # Another subscriber's notification is not this subscriber's either.
    other = await create_subscriber(api)
    assert_error(await api.patch(path(other["subscriberId"], f"/{message.id}/read")), 404)
    row = await stored(app, message.id)
    assert row is not None and row.read is False and row.archived is False
