"""The bench counts stored messages exactly, although GET /v1/messages' totalCount stops a bound past the page."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from bench import loadgen
from herald.kit import pagination
from tests.fixtures.builders import create_subscriber, insert_in_app_message


async def test_count_messages_is_exact_past_the_bound(api: httpx.AsyncClient, app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pagination, "COUNT_AHEAD", 3)
    monkeypatch.setattr(loadgen, "PAGE", 2)
    subscriber = await create_subscriber(api)
    for index in range(13):
        await insert_in_app_message(app, subscriber, transaction_id=f"txn-{index % 2}")
    counter = loadgen.Api("http://herald.test", "unused")
    await counter.client.aclose()
    counter.client = api  # the test app's client, already signed in with the environment's key
    assert (await api.get("/v1/messages", params={"limit": 2})).json()["totalCount"] == 5  # the bound
    assert await counter.count_messages() == 13
    assert await counter.count_messages("txn-0") == 7
    for index in range(4):
        await insert_in_app_message(app, subscriber)
    assert await counter.count_messages() == 17  # from the last count on
