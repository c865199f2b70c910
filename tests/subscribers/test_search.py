"""GET /v2/subscribers: Novu's search, with its filters and cursor pages, in the caller's environment only."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import assert_error
from tests.fixtures.builders import create_subscriber, unique


async def search(api: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await api.get("/v2/subscribers", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def ids(page: dict[str, Any]) -> list[str]:
    return [item["subscriberId"] for item in page["data"]]


async def test_filters(api: httpx.AsyncClient) -> None:
    tag = unique("find")
    ada = await create_subscriber(
        api,
        subscriberId=f"{tag}-ada",
        email=f"Ada.{tag}@example.com",
        phone="+15550001",
        firstName="Ada",
        lastName="Lovelace",
    )
    grace = await create_subscriber(
        api,
        subscriberId=f"{tag}-grace",
        email=f"grace.{tag}@example.org",
        phone="+15550002",
        firstName="Grace",
        lastName="Hopper",
    )
    await create_subscriber(api, subscriberId=unique("else"), email="else@example.net")
    assert ids(await search(api, subscriberId=tag)) == [grace["subscriberId"], ada["subscriberId"]]
    assert ids(await search(api, email=f"ada.{tag}")) == [ada["subscriberId"]]
    assert ids(await search(api, phone="0002", subscriberId=tag)) == [grace["subscriberId"]]
    assert ids(await search(api, name="grace hop")) == [grace["subscriberId"]]
    # LIKE's wildcards are searched as characters.
    assert ids(await search(api, subscriberId="%")) == []
    page = await search(api, subscriberId=tag)
    assert page["totalCount"] == 2 and page["totalCountCapped"] is False
    assert page["next"] is None and page["previous"] is None
    assert page["data"][0]["email"] == f"grace.{tag}@example.org" and page["data"][0]["_id"] == grace["_id"]


async def test_cursor_pages_both_ways_and_stay_put_under_inserts(api: httpx.AsyncClient) -> None:
    tag = unique("page")
    made = [(await create_subscriber(api, subscriberId=f"{tag}-{n}"))["subscriberId"] for n in range(5)]
    newest_first = list(reversed(made))
    first = await search(api, subscriberId=tag, limit=2)
    assert ids(first) == newest_first[:2] and first["previous"] is None and first["next"]
    assert first["totalCount"] == 5
    # A subscriber added now falls before the first page: the next pages are unchanged.
    await create_subscriber(api, subscriberId=f"{tag}-new")
    second = await search(api, subscriberId=tag, limit=2, after=first["next"])
    assert ids(second) == newest_first[2:4] and second["previous"] and second["next"]
    third = await search(api, subscriberId=tag, limit=2, after=second["next"])
    assert ids(third) == newest_first[4:] and third["next"] is None
    back = await search(api, subscriberId=tag, limit=2, before=third["previous"])
    assert ids(back) == newest_first[2:4] and back["next"] and back["previous"]
    with_cursor = await search(api, subscriberId=tag, limit=2, after=second["next"], includeCursor="true")
    assert ids(with_cursor) == newest_first[3:5]
    # Oldest first, by createdAt.
    ascending = await search(api, subscriberId=tag, limit=3, orderDirection="ASC", orderBy="createdAt")
    assert ids(ascending) == made[:3]
    rest = await search(
        api, subscriberId=tag, limit=3, orderDirection="ASC", orderBy="createdAt", after=ascending["next"]
    )
    assert ids(rest) == [*made[3:], f"{tag}-new"] and rest["next"] is None
    by_update = await search(api, subscriberId=tag, limit=10, orderBy="updatedAt", orderDirection="DESC")
    assert len(by_update["data"]) == 6


async def test_refusals(api: httpx.AsyncClient) -> None:
    assert_error(await api.get("/v2/subscribers", params={"orderBy": "email"}), 422)
    assert_error(await api.get("/v2/subscribers", params={"orderDirection": "UP"}), 422)
    assert_error(await api.get("/v2/subscribers", params={"limit": 101}), 422)
    assert_error(await api.get("/v2/subscribers", params={"limit": "x"}), 422)
    assert_error(await api.get("/v2/subscribers", params={"after": "a", "before": "b"}), 400)
    assert_error(await api.get("/v2/subscribers", params={"after": "0" * 24, "orderBy": "updatedAt"}), 400)


async def test_scoped_to_the_environment(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    tag = unique("scoped")
    mine = await create_subscriber(api, subscriberId=f"{tag}-dev")
    await create_subscriber(production_api, subscriberId=f"{tag}-prod")
    assert ids(await search(api, subscriberId=tag)) == [mine["subscriberId"]]
    assert ids(await search(production_api, subscriberId=tag)) == [f"{tag}-prod"]
    # A development subscriber's _id is no cursor in production.
    assert_error(
        await production_api.get("/v2/subscribers", params={"after": mine["_id"], "orderBy": "createdAt"}), 400
    )
