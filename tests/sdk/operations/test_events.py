"""novu.trigger, trigger_bulk, trigger_broadcast, cancel: the event operations at the SDK's root."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from novu_py import Novu

from tests.fixtures.builders import create_subscriber, create_workflow
from tests.sdk.operations.conftest import call
from tests.sdk.operations.runs import run_worker


async def notifications_of(api: httpx.AsyncClient, transaction_id: str) -> list[dict]:
    response = await api.get("/v1/notifications", params={"transactionId": transaction_id})
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def test_trigger(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    triggered = await call(
        lambda: (
            novu.trigger(
                trigger_event_request_dto={
                    "workflow_id": workflow["triggers"][0]["identifier"],
                    "to": subscriber["subscriberId"],
                    "payload": {"name": "Ada"},
                }
            ).result
        )
    )
    assert triggered.acknowledged is True and triggered.status.value == "processed"
    await run_worker(app)
    feed = (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed")).json()["data"]
    assert [item["content"] for item in feed] == ["Hello Ada"]
    assert feed[0]["transactionId"] == triggered.transaction_id


async def test_trigger_bulk(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    workflow = await create_workflow(api)
    first, second = await create_subscriber(api), await create_subscriber(api)
    name = workflow["triggers"][0]["identifier"]
    results = await call(
        lambda: (
            novu.trigger_bulk(
                bulk_trigger_event_dto={
                    "events": [
                        {"workflow_id": name, "to": first["subscriberId"], "payload": {"name": "A"}},
                        {"workflow_id": name, "to": second["subscriberId"], "payload": {"name": "B"}},
                    ]
                }
            ).result
        )
    )
    assert [result.status.value for result in results] == ["processed", "processed"]
    assert len({result.transaction_id for result in results}) == 2
    await run_worker(app)
    for result, subscriber in zip(results, (first, second), strict=True):
        [notification] = await notifications_of(api, result.transaction_id or "")
        assert notification["subscriber"]["subscriberId"] == subscriber["subscriberId"]


async def test_trigger_broadcast(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    workflow = await create_workflow(api)
    subscribers = [await create_subscriber(api) for _ in range(3)]
    result = await call(
        lambda: (
            novu.trigger_broadcast(
                trigger_event_to_all_request_dto={
                    "name": workflow["triggers"][0]["identifier"],
                    "payload": {"name": "all"},
                }
            ).result
        )
    )
    assert result.acknowledged is True and result.status.value == "processed"
    await run_worker(app)
    reached = {n["subscriber"]["subscriberId"] for n in await notifications_of(api, result.transaction_id or "")}
    assert reached == {subscriber["subscriberId"] for subscriber in subscribers}


async def test_cancel(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    workflow = await create_workflow(
        api,
        steps=[
            {
                "name": "wait",
                "template": {"type": "delay"},
                "metadata": {"type": "regular", "unit": "hours", "amount": 1},
            },
            {"name": "inbox", "template": {"type": "in_app", "content": "later"}},
        ],
    )
    subscriber = await create_subscriber(api)
    triggered = await call(
        lambda: (
            novu.trigger(
                trigger_event_request_dto={
                    "workflow_id": workflow["triggers"][0]["identifier"],
                    "to": subscriber["subscriberId"],
                }
            ).result
        )
    )
    await run_worker(app)
    canceled = await call(lambda: novu.cancel(transaction_id=triggered.transaction_id or "").result)
    assert canceled is True
    again = await call(lambda: novu.cancel(transaction_id=triggered.transaction_id or "").result)
    assert again is False
    [notification] = await notifications_of(api, triggered.transaction_id or "")
    assert {job["status"] for job in notification["jobs"]} == {"canceled"}
