"""novu.messages.retrieve, delete, delete_by_transaction_id."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from novu_py import Novu

from tests.sdk.operations.conftest import call
from tests.sdk.operations.runs import in_app_run


async def message_ids(api: httpx.AsyncClient, subscriber_id: str) -> set[str]:
    response = await api.get("/v1/messages", params={"subscriberId": subscriber_id, "limit": 100})
    assert response.status_code == 200, response.text
    return {item["_id"] for item in response.json()["data"]}


async def test_messages_retrieve(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    run = await in_app_run(api, app, count=3)
    page = await call(
        lambda: (
            novu.messages.retrieve(request={"subscriber_id": run.subscriber_id, "channel": "in_app", "limit": 2}).result
        )
    )
    assert len(page.data) == 2 and page.has_more is True
    assert {m.id for m in page.data} <= {m.id for m in run.messages}
    assert all(m.subscriber_id == run.subscriber["_id"] and m.channel.value == "in_app" for m in page.data)
    none = await call(
        lambda: novu.messages.retrieve(request={"subscriber_id": run.subscriber_id, "channel": "sms"}).result
    )
    assert none.data == []


async def test_messages_delete(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    run = await in_app_run(api, app, count=2)
    gone, kept = run.messages
    deleted = await call(lambda: novu.messages.delete(message_id=gone.id).result)
    assert deleted.acknowledged is True and deleted.status.value == "deleted"
    assert await message_ids(api, run.subscriber_id) == {kept.id}


async def test_messages_delete_by_transaction_id(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    run = await in_app_run(api, app, count=2)
    await call(lambda: novu.messages.delete_by_transaction_id(transaction_id=run.transaction_id))
    remaining = await message_ids(api, run.subscriber_id)
    assert remaining == {m.id for m in run.messages if m.transaction_id != run.transaction_id}
    assert len(remaining) == 1
