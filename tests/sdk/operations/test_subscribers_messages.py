"""novu.subscribers.messages.update_as_seen, mark_all, mark_all_as: the v1 inbox state of messages."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from novu_py import Novu

from tests.sdk.operations.conftest import call
from tests.sdk.operations.runs import in_app_run


async def feed(api: httpx.AsyncClient, subscriber_id: str) -> dict[str, dict]:
    response = await api.get(f"/v1/subscribers/{subscriber_id}/notifications/feed")
    assert response.status_code == 200, response.text
    return {item["_id"]: item for item in response.json()["data"]}


async def test_subscribers_messages_update_as_seen(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    run = await in_app_run(
        api,
        app,
        steps=[
            {
                "name": "inbox",
                "template": {
                    "type": "in_app",
                    "content": "Accept?",
                    "cta": {
                        "type": "redirect",
                        "data": {"url": "/"},
                        "action": {"buttons": [{"type": "primary", "content": "Yes"}]},
                    },
                },
            }
        ],
    )
    [message] = run.messages
    updated = await call(
        lambda: (
            novu.subscribers.messages.update_as_seen(
                request={
                    "message_id": message.id,
                    "type": "primary",
                    "subscriber_id": run.subscriber_id,
                    "mark_message_action_as_seen_dto": {"status": "done"},
                }
            ).result
        )
    )
    assert updated.id == message.id
    assert updated.cta.action is not None and updated.cta.action.status.value == "done"
    assert updated.cta.action.result is not None and updated.cta.action.result.type.value == "primary"
    stored = (await feed(api, run.subscriber_id))[message.id]
    assert stored["cta"]["action"]["status"] == "done"


async def test_subscribers_messages_mark_all(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    run = await in_app_run(api, app, count=2)
    marked = await call(
        lambda: (
            novu.subscribers.messages.mark_all(
                subscriber_id=run.subscriber_id, mark_all_message_as_request_dto={"mark_as": "read"}
            ).result
        )
    )
    assert marked == 2
    assert all(item["read"] for item in (await feed(api, run.subscriber_id)).values())


async def test_subscribers_messages_mark_all_as(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    run = await in_app_run(api, app, count=2)
    first, second = run.messages
    marked = await call(
        lambda: (
            novu.subscribers.messages.mark_all_as(
                subscriber_id=run.subscriber_id,
                message_mark_as_request_dto={"message_id": [first.id], "mark_as": "seen"},
            ).result
        )
    )
    assert [m.id for m in marked] == [first.id] and marked[0].seen is True
    stored = await feed(api, run.subscriber_id)
    assert (stored[first.id]["seen"], stored[second.id]["seen"]) == (True, False)
