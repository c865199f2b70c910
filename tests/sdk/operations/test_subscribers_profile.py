"""novu.subscribers.retrieve, patch, delete, create_bulk (novu.subscribers.create is in test_subscribers.py)."""

from __future__ import annotations

import httpx
import pytest
from novu_py import Novu, models

from tests.fixtures.builders import create_subscriber
from tests.sdk.operations.conftest import call


async def test_subscribers_retrieve(novu: Novu, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api, lastName="Lovelace", data={"plan": "pro"})
    fetched = await call(lambda: novu.subscribers.retrieve(subscriber_id=subscriber["subscriberId"]).result)
    assert fetched.id == subscriber["_id"] and fetched.subscriber_id == subscriber["subscriberId"]
    assert (fetched.first_name, fetched.last_name, fetched.email) == ("Ada", "Lovelace", "ada@example.com")
    assert fetched.data == {"plan": "pro"}
    with pytest.raises(models.ErrorDto) as missing:
        await call(lambda: novu.subscribers.retrieve(subscriber_id="nobody-here"))
    assert missing.value.data.status_code == 404


async def test_subscribers_patch(novu: Novu, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    patched = await call(
        lambda: (
            novu.subscribers.patch(
                subscriber_id=subscriber["subscriberId"],
                patch_subscriber_request_dto={"last_name": "Byron", "phone": "+15550001111", "data": {"tier": "gold"}},
            ).result
        )
    )
    assert (patched.first_name, patched.last_name, patched.phone) == ("Ada", "Byron", "+15550001111")
    stored = (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}")).json()["data"]
    assert (stored["firstName"], stored["lastName"], stored["data"]) == ("Ada", "Byron", {"tier": "gold"})


async def test_subscribers_delete(novu: Novu, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    removed = await call(lambda: novu.subscribers.delete(subscriber_id=subscriber["subscriberId"]).result)
    assert removed.acknowledged is True and removed.status == "deleted"
    assert (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}")).status_code == 404


async def test_subscribers_create_bulk(novu: Novu, api: httpx.AsyncClient) -> None:
    existing = await create_subscriber(api)
    outcome = await call(
        lambda: (
            novu.subscribers.create_bulk(
                bulk_subscriber_create_dto={
                    "subscribers": [
                        {"subscriber_id": "bulk-new", "first_name": "Fresh"},
                        {"subscriber_id": existing["subscriberId"], "last_name": "Known"},
                    ]
                }
            ).result
        )
    )
    assert [item.subscriber_id for item in outcome.created] == ["bulk-new"]
    assert [item.subscriber_id for item in outcome.updated] == [existing["subscriberId"]]
    assert outcome.failed == []
    assert (await api.get("/v1/subscribers/bulk-new")).json()["data"]["firstName"] == "Fresh"
    assert (await api.get(f"/v1/subscribers/{existing['subscriberId']}")).json()["data"]["lastName"] == "Known"
