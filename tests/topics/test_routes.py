from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from herald.models import Subscriber, TopicSubscriber
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_subscriber, unique

TOPIC_KEYS = {"_id", "_organizationId", "_environmentId", "key", "name", "subscribers"}


async def create_topic(api: httpx.AsyncClient, key: str | None = None, name: str = "Topic") -> dict[str, Any]:
    response = await api.post("/v1/topics", json={"key": key or unique("topic"), "name": name})
    assert response.status_code == 201, response.text
    return response.json()["data"]


async def add(api: httpx.AsyncClient, key: str, *subscriber_ids: str) -> httpx.Response:
    return await api.post(f"/v1/topics/{key}/subscribers", json={"subscribers": list(subscriber_ids)})


async def insert_subscribers(app: FastAPI, tenancy: Tenancy, count: int) -> list[Subscriber]:
    """Subscribers written straight to the store: faster than the API for big topics."""
    subscribers = [
        Subscriber(
            environment_id=tenancy.environment_id,
            organization_id=tenancy.organization_id,
            subscriber_id=unique("bulk"),
            channels=[],
        )
        for _ in range(count)
    ]
    async with app.state.sessionmaker() as session:
        session.add_all(subscribers)
        await session.commit()
    return subscribers


async def test_create_topic(api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    response = await api.post("/v1/topics", json={"key": "product-updates", "name": "Product updates"})
    assert response.status_code == 201, response.text
    created = response.json()
    assert created.keys() == {"data"}
    assert created["data"].keys() == {"_id", "key"}
    assert created["data"]["key"] == "product-updates"
    topic = (await api.get("/v1/topics/product-updates")).json()["data"]
    assert TOPIC_KEYS <= topic.keys()
    assert topic["_id"] == created["data"]["_id"]
    assert topic["name"] == "Product updates"
    assert topic["subscribers"] == []
    assert topic["_environmentId"] == tenancy.environment_id
    assert topic["_organizationId"] == tenancy.organization_id


async def test_duplicate_key_is_409_but_other_environments_may_use_it(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    await create_topic(api, "dup")
    response = await api.post("/v1/topics", json={"key": "dup", "name": "Again"})
    assert_error(
        response,
        409,
        f"Topic exists with key dup in the environment {tenancy.environment_id} "
        f"of the organization {tenancy.organization_id}",
    )
    await create_topic(production_api, "dup")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "No key"}, "key"),
        ({"key": "", "name": "x"}, "key"),
        ({"key": "has space", "name": "x"}, "key"),
        ({"key": "slash/key", "name": "x"}, "key"),
        ({"key": "ok", "name": ""}, "name"),
        ({"key": "ok"}, "name"),
        ({"key": 5, "name": "x"}, "key"),
    ],
)
async def test_create_validates(api: httpx.AsyncClient, body: dict[str, Any], field: str) -> None:
    errors = assert_error(await api.post("/v1/topics", json=body), 422, "Validation Error")["errors"]
    assert field in errors, errors


async def test_create_trims_key_and_name(api: httpx.AsyncClient) -> None:
    created = await create_topic(api, "  spaced:key.1  ", name="  Spaced  ")
    assert created["key"] == "spaced:key.1"
    assert (await api.get("/v1/topics/spaced:key.1")).json()["data"]["name"] == "Spaced"


async def test_list_topics_paginates_and_filters(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    keys = [(await create_topic(api, name=f"T{i}"))["key"] for i in range(3)]
    await create_topic(production_api)
    first = (await api.get("/v1/topics", params={"page": 0, "pageSize": 2})).json()
    assert (first["page"], first["pageSize"], first["totalCount"], first["hasMore"]) == (0, 2, 3, True)
    second = (await api.get("/v1/topics", params={"page": 1, "pageSize": 2})).json()
    assert (second["page"], second["totalCount"], second["hasMore"]) == (1, 3, False)
    assert [topic["key"] for topic in first["data"] + second["data"]] == keys
    assert TOPIC_KEYS <= first["data"][0].keys()
    by_key = (await api.get("/v1/topics", params={"key": keys[1]})).json()
    assert [topic["key"] for topic in by_key["data"]] == [keys[1]] and by_key["totalCount"] == 1
    by_name = (await api.get("/v1/topics", params={"name": "T2"})).json()
    assert [topic["key"] for topic in by_name["data"]] == [keys[2]]
    assert (await api.get("/v1/topics", params={"key": "none"})).json()["totalCount"] == 0


@pytest.mark.parametrize("params", [{"pageSize": 101}, {"pageSize": 0}, {"page": -1}])
async def test_list_topics_validates_paging(api: httpx.AsyncClient, params: dict[str, Any]) -> None:
    assert_error(await api.get("/v1/topics", params=params), 422, "Validation Error")


async def test_list_shows_at_most_100_members_per_topic_and_get_shows_all(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    subscribers = await insert_subscribers(app, tenancy, 105)
    # Named newest first: members are listed in the order they joined, not the order they were created.
    ids = [subscriber.subscriber_id for subscriber in reversed(subscribers)]
    response = await add(api, "crowd", *ids)
    assert response.status_code == 200
    small = await create_subscriber(api)
    assert (await add(api, "small", small["subscriberId"])).status_code == 200
    listed = {topic["key"]: topic for topic in (await api.get("/v1/topics")).json()["data"]}
    assert listed["crowd"]["subscribers"] == ids[:100]
    assert listed["small"]["subscribers"] == [small["subscriberId"]]
    assert (await api.get("/v1/topics/crowd")).json()["data"]["subscribers"] == ids


async def test_get_unknown_or_foreign_topic_is_404(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    assert_error(
        await api.get("/v1/topics/missing"),
        404,
        f"Topic not found for id missing in the environment {tenancy.environment_id}",
    )
    topic = await create_topic(api)
    for client in (production_api, other_org_api):
        assert_error(await client.get(f"/v1/topics/{topic['key']}"), 404)
        assert_error(await client.patch(f"/v1/topics/{topic['key']}", json={"name": "x"}), 404)
        assert_error(await client.delete(f"/v1/topics/{topic['key']}"), 404)


async def test_rename_topic(api: httpx.AsyncClient) -> None:
    topic = await create_topic(api, name="Before")
    subscriber = await create_subscriber(api)
    await add(api, topic["key"], subscriber["subscriberId"])
    response = await api.patch(f"/v1/topics/{topic['key']}", json={"name": "After"})
    assert response.status_code == 200, response.text
    renamed = response.json()["data"]
    assert renamed["name"] == "After"
    assert renamed["key"] == topic["key"]
    assert renamed["subscribers"] == [subscriber["subscriberId"]]
    assert (await api.get(f"/v1/topics/{topic['key']}")).json()["data"]["name"] == "After"
    for body in ({}, {"name": ""}, {"name": 3}):
        assert "name" in assert_error(await api.patch(f"/v1/topics/{topic['key']}", json=body), 422)["errors"]


async def test_delete_topic_refuses_while_it_has_members(api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    topic = await create_topic(api)
    subscriber = await create_subscriber(api)
    await add(api, topic["key"], subscriber["subscriberId"])
    assert_error(
        await api.delete(f"/v1/topics/{topic['key']}"),
        409,
        f"Topic with key {topic['key']} in the environment {tenancy.environment_id} can't be deleted "
        "as it still has subscribers assigned",
    )
    removal = await api.post(f"/v1/topics/{topic['key']}/subscribers/removal", json={"subscribers": [subscriber["subscriberId"]]})
    assert removal.status_code == 204
    response = await api.delete(f"/v1/topics/{topic['key']}")
    assert response.status_code == 204 and response.content == b""
    assert_error(await api.get(f"/v1/topics/{topic['key']}"), 404)
    assert_error(await api.delete(f"/v1/topics/{topic['key']}"), 404)
    # The key is free again.
    await create_topic(api, topic["key"])


async def test_add_subscribers_reports_unknown_ones(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    topic = await create_topic(api)
    first = await create_subscriber(api)
    second = await create_subscriber(api)
    foreign = await create_subscriber(production_api)
    response = await add(api, topic["key"], first["subscriberId"], "ghost", second["subscriberId"], foreign["subscriberId"])
    assert response.status_code == 200, response.text
    assert response.json() == {
        "data": {
            "succeeded": [first["subscriberId"], second["subscriberId"]],
            "failed": {"notFound": ["ghost", foreign["subscriberId"]]},
        }
    }
    members = (await api.get(f"/v1/topics/{topic['key']}")).json()["data"]["subscribers"]
    assert members == [first["subscriberId"], second["subscriberId"]]


async def test_add_subscribers_is_idempotent(api: httpx.AsyncClient, app: FastAPI) -> None:
    topic = await create_topic(api)
    subscriber = await create_subscriber(api)
    for _ in range(2):
        response = await add(api, topic["key"], subscriber["subscriberId"], subscriber["subscriberId"])
        assert response.json() == {"data": {"succeeded": [subscriber["subscriberId"]]}}
    async with app.state.sessionmaker() as session:
        count = (
            await session.execute(
                select(func.count()).select_from(TopicSubscriber).where(TopicSubscriber.subscriber_id == subscriber["_id"])
            )
        ).scalar_one()
    assert count == 1
    assert (await api.get(f"/v1/topics/{topic['key']}")).json()["data"]["subscribers"] == [subscriber["subscriberId"]]


async def test_add_subscribers_creates_a_missing_topic(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    response = await add(api, "born-on-the-fly", subscriber["subscriberId"])
    assert response.status_code == 200
    topic = (await api.get("/v1/topics/born-on-the-fly")).json()["data"]
    assert topic["name"] == "Autogenerated-born-on-the-fly"
    assert topic["subscribers"] == [subscriber["subscriberId"]]
    # Even when nobody could be added, the topic exists afterwards (as in Novu).
    response = await add(api, "empty-on-the-fly", "ghost")
    assert response.json() == {"data": {"succeeded": [], "failed": {"notFound": ["ghost"]}}}
    assert (await api.get("/v1/topics/empty-on-the-fly")).status_code == 200


async def test_add_subscribers_validates(api: httpx.AsyncClient) -> None:
    errors = assert_error(await add(api, "bad key!", "x"), 422, "Validation Error")["errors"]
    assert "topicKey" in errors
    for body in ({}, {"subscribers": "x"}, {"subscribers": [1]}):
        response = await api.post("/v1/topics/fine/subscribers", json=body)
        assert "subscribers" in " ".join(assert_error(response, 422)["errors"]), body
        assert_error(await api.post("/v1/topics/fine/subscribers/removal", json=body), 422)
    # Nothing was created by the refused requests.
    assert_error(await api.get("/v1/topics/fine"), 404)


async def test_remove_subscribers(api: httpx.AsyncClient) -> None:
    topic = await create_topic(api)
    keep, drop = await create_subscriber(api), await create_subscriber(api)
    await add(api, topic["key"], keep["subscriberId"], drop["subscriberId"])
    path = f"/v1/topics/{topic['key']}/subscribers/removal"
    for _ in range(2):  # removing twice is fine
        response = await api.post(path, json={"subscribers": [drop["subscriberId"], "ghost"]})
        assert response.status_code == 204 and response.content == b""
    assert (await api.get(f"/v1/topics/{topic['key']}")).json()["data"]["subscribers"] == [keep["subscriberId"]]
    # The subscriber itself stays.
    assert (await api.get(f"/v1/subscribers/{drop['subscriberId']}")).status_code == 200
    assert (await api.post("/v1/topics/no-such-topic/subscribers/removal", json={"subscribers": ["x"]})).status_code == 204
    assert_error(await api.get("/v1/topics/no-such-topic"), 404)


async def test_get_topic_subscriber(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    topic = await create_topic(api)
    member, outsider = await create_subscriber(api), await create_subscriber(api)
    await add(api, topic["key"], member["subscriberId"])
    response = await api.get(f"/v1/topics/{topic['key']}/subscribers/{member['subscriberId']}")
    assert response.status_code == 200, response.text
    assert response.json()["data"] == {
        "_organizationId": tenancy.organization_id,
        "_environmentId": tenancy.environment_id,
        "_subscriberId": member["_id"],
        "_topicId": topic["_id"],
        "topicKey": topic["key"],
        "externalSubscriberId": member["subscriberId"],
    }
    message = f"Subscriber {outsider['subscriberId']} not found for topic {topic['key']} in the environment {tenancy.environment_id}"
    assert_error(await api.get(f"/v1/topics/{topic['key']}/subscribers/{outsider['subscriberId']}"), 404, message)
    assert_error(await api.get(f"/v1/topics/{topic['key']}/subscribers/ghost"), 404)
    assert_error(await api.get(f"/v1/topics/nope/subscribers/{member['subscriberId']}"), 404)
    assert_error(await production_api.get(f"/v1/topics/{topic['key']}/subscribers/{member['subscriberId']}"), 404)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/topics"),
        ("GET", "/v1/topics"),
        ("GET", "/v1/topics/k"),
        ("PATCH", "/v1/topics/k"),
        ("DELETE", "/v1/topics/k"),
        ("POST", "/v1/topics/k/subscribers"),
        ("POST", "/v1/topics/k/subscribers/removal"),
        ("GET", "/v1/topics/k/subscribers/s"),
    ],
)
async def test_topic_routes_require_auth(anonymous: httpx.AsyncClient, method: str, path: str) -> None:
    body = {"key": "k", "name": "n", "subscribers": []} if method in ("POST", "PATCH") else None
    assert_error(await anonymous.request(method, path, json=body), 401, "Missing authorization header")


async def test_concurrent_adds_to_a_missing_topic_make_one_topic(api: httpx.AsyncClient) -> None:
    import asyncio

    subscribers = [await create_subscriber(api) for _ in range(4)]
    responses = await asyncio.gather(*(add(api, "racing", s["subscriberId"]) for s in subscribers))
    assert [response.status_code for response in responses] == [200] * 4, [r.text for r in responses]
    listed = (await api.get("/v1/topics", params={"key": "racing"})).json()
    assert listed["totalCount"] == 1
    assert sorted(listed["data"][0]["subscribers"]) == sorted(s["subscriberId"] for s in subscribers)
