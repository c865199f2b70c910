"""/v2/topics and their subscriptions, over the same rows as /v1/topics."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from herald.models import Context, TopicSubscriber
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_subscriber, create_workflow


async def subscribe(api: httpx.AsyncClient, key: str, body: dict[str, Any]) -> httpx.Response:
    return await api.post(f"/v2/topics/{key}/subscriptions", json=body)


async def subscriptions_in_store(app: FastAPI, topic_key: str, environment_id: str) -> list[TopicSubscriber]:
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            select(TopicSubscriber).where(
                TopicSubscriber.topic_key == topic_key, TopicSubscriber.environment_id == environment_id
            )
        )
        return list(result.scalars())


async def test_upsert_creates_201_then_answers_200_and_renames(api: httpx.AsyncClient) -> None:
    created = await api.post("/v2/topics", json={"key": "news", "name": "News"})
    assert created.status_code == 201, created.text
    topic = created.json()["data"]
    assert topic["key"] == "news" and topic["name"] == "News" and topic["createdAt"]
    again = await api.post("/v2/topics", json={"key": "news", "name": "Daily news"})
    assert again.status_code == 200
    assert again.json()["data"]["_id"] == topic["_id"]
    assert again.json()["data"]["name"] == "Daily news"
    # The v1 route sees the same topic.
    assert (await api.get("/v1/topics/news")).json()["data"]["name"] == "Daily news"
    conflict = assert_error(await api.post("/v2/topics?failIfExists=true", json={"key": "news"}), 409)
    assert conflict["_id"] == topic["_id"] and conflict["key"] == "news"
    unnamed = (await api.post("/v2/topics", json={"key": "plain"})).json()["data"]
    assert unnamed["name"] == "plain"


async def test_upsert_refuses_an_invalid_key(api: httpx.AsyncClient) -> None:
    assert_error(await api.post("/v2/topics", json={"key": "has space"}), 422)


async def test_list_pages_with_cursors_both_ways(api: httpx.AsyncClient) -> None:
    keys = [f"t{index}" for index in range(5)]
    for key in keys:
        assert (await api.post("/v2/topics", json={"key": key})).status_code == 201
    first = (await api.get("/v2/topics", params={"limit": 2, "orderDirection": "ASC"})).json()
    assert [item["key"] for item in first["data"]] == ["t0", "t1"]
    assert first["totalCount"] == 5 and first["totalCountCapped"] is False
    assert first["previous"] is None and first["next"] == first["data"][-1]["_id"]
    second = (await api.get("/v2/topics", params={"limit": 2, "orderDirection": "ASC", "after": first["next"]})).json()
    assert [item["key"] for item in second["data"]] == ["t2", "t3"]
    assert second["previous"] == second["data"][0]["_id"]
    last = (await api.get("/v2/topics", params={"limit": 2, "orderDirection": "ASC", "after": second["next"]})).json()
    assert [item["key"] for item in last["data"]] == ["t4"] and last["next"] is None
    back = (
        await api.get("/v2/topics", params={"limit": 2, "orderDirection": "ASC", "before": second["previous"]})
    ).json()
    assert [item["key"] for item in back["data"]] == ["t0", "t1"] and back["previous"] is None
    assert back["next"] == back["data"][-1]["_id"]
    newest = (await api.get("/v2/topics", params={"limit": 1})).json()
    assert newest["data"][0]["key"] == "t4"
    with_cursor = (
        await api.get(
            "/v2/topics",
            params={"limit": 2, "orderDirection": "ASC", "after": first["next"], "includeCursor": "true"},
        )
    ).json()
    assert [item["key"] for item in with_cursor["data"]] == ["t1", "t2"]
    assert [item["key"] for item in (await api.get("/v2/topics", params={"key": "t3"})).json()["data"]] == ["t3"]
    assert_error(await api.get("/v2/topics", params={"orderBy": "colour"}), 422)
    assert_error(await api.get("/v2/topics", params={"limit": 101}), 422)


async def test_get_update_delete(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    await create_subscriber(api, subscriberId="ada")
    await api.post("/v2/topics", json={"key": "ops", "name": "Ops"})
    assert (await subscribe(api, "ops", {"subscriptions": ["ada"]})).status_code == 201
    fetched = (await api.get("/v2/topics/ops")).json()["data"]
    assert fetched["name"] == "Ops"
    renamed = await api.patch("/v2/topics/ops", json={"name": "Operations"})
    assert renamed.status_code == 200 and renamed.json()["data"]["name"] == "Operations"
    deleted = await api.delete("/v2/topics/ops")
    assert deleted.status_code == 200 and deleted.json() == {"data": {"acknowledged": True}}
    assert_error(await api.get("/v2/topics/ops"), 404)
    assert await subscriptions_in_store(app, "ops", tenancy.environment_id) == []
    assert_error(await api.patch("/v2/topics/ops", json={"name": "x"}), 404)
    assert_error(await api.delete("/v2/topics/ops"), 404)


async def test_topics_of_another_environment_are_not_found(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    await api.post("/v2/topics", json={"key": "private"})
    for other in (production_api, other_org_api):
        assert_error(await other.get("/v2/topics/private"), 404)
        assert_error(await other.patch("/v2/topics/private", json={"name": "x"}), 404)
        assert_error(await other.delete("/v2/topics/private"), 404)
        assert_error(await other.get("/v2/topics/private/subscriptions"), 404)
        assert (await other.get("/v2/topics")).json()["data"] == []
    assert (await api.get("/v2/topics/private")).status_code == 200


async def test_subscriptions_create_reports_unknown_subscribers_and_creates_the_topic(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    await create_subscriber(api, subscriberId="ada")
    await create_subscriber(api, subscriberId="bob")
    workflow = await create_workflow(api)
    response = await subscribe(
        api,
        "launches",
        {
            "name": "Launches",
            "subscriptions": ["ada", {"subscriberId": "bob", "identifier": "bob-launches", "name": "Bob's"}, "ghost"],
            "preferences": [
                {"workflowId": workflow["triggers"][0]["identifier"], "enabled": False, "condition": {"==": [1, 1]}}
            ],
            "context": {"tenant": "acme", "app": {"id": "jira", "data": {"plan": "pro"}}},
        },
    )
    assert response.status_code == 201, response.text
    body = response.json()["data"]
    assert body["meta"] == {"totalCount": 3, "successful": 2, "failed": 1}
    assert body["errors"] == [
        {"subscriberId": "ghost", "code": "SUBSCRIBER_NOT_FOUND", "message": body["errors"][0]["message"]}
    ]
    by_subscriber = {item["subscriber"]["subscriberId"]: item for item in body["data"]}
    assert by_subscriber["ada"]["identifier"] == "tk_launches:si_ada"
    assert by_subscriber["bob"]["identifier"] == "bob-launches" and by_subscriber["bob"]["name"] == "Bob's"
    assert by_subscriber["ada"]["contextKeys"] == ["app:jira", "tenant:acme"]
    preference = by_subscriber["ada"]["preferences"][0]
    assert preference["enabled"] is False and preference["condition"] == {"==": [1, 1]}
    assert preference["workflow"]["id"] == workflow["_id"]
    assert preference["subscriptionId"] == by_subscriber["ada"]["_id"]
    # The topic was made, named as asked; v1 sees the members.
    assert (await api.get("/v2/topics/launches")).json()["data"]["name"] == "Launches"
    assert (await api.get("/v1/topics/launches")).json()["data"]["subscribers"] == ["ada", "bob"]
    stored = {
        row.external_subscriber_id: row for row in await subscriptions_in_store(app, "launches", tenancy.environment_id)
    }
    assert stored["bob"].identifier == "bob-launches"
    assert stored["ada"].context_keys == ["app:jira", "tenant:acme"]
    async with app.state.sessionmaker() as session:
        contexts = {
            (row.type, row.key): row.data
            for row in (await session.execute(select(Context))).scalars()
            if row.environment_id == tenancy.environment_id
        }
    assert contexts == {("tenant", "acme"): {}, ("app", "jira"): {"plan": "pro"}}


async def test_subscribing_again_keeps_one_subscription(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    await create_subscriber(api, subscriberId="ada")
    first = (await subscribe(api, "t", {"subscriptions": ["ada"]})).json()["data"]["data"][0]
    second = (await subscribe(api, "t", {"subscriberIds": ["ada"]})).json()["data"]["data"][0]
    assert first["_id"] == second["_id"]
    assert len(await subscriptions_in_store(app, "t", tenancy.environment_id)) == 1
    assert_error(await subscribe(api, "t", {"subscriptions": []}), 422)
    assert_error(await subscribe(api, "bad key", {"subscriptions": ["ada"]}), 422)
    assert_error(await subscribe(api, "t", {"subscriptions": ["ada"], "context": {"bad type": "x"}}), 422)


async def test_v1_members_are_v2_subscriptions(api: httpx.AsyncClient) -> None:
    await create_subscriber(api, subscriberId="ada")
    await api.post("/v1/topics", json={"key": "legacy", "name": "Legacy"})
    await api.post("/v1/topics/legacy/subscribers", json={"subscribers": ["ada"]})
    listed = (await api.get("/v2/topics/legacy/subscriptions")).json()
    assert [item["identifier"] for item in listed["data"]] == ["tk_legacy:si_ada"]
    assert listed["data"][0]["topic"]["key"] == "legacy"
    details = (await api.get("/v2/topics/legacy/subscriptions/tk_legacy:si_ada")).json()["data"]
    assert details["identifier"] == "tk_legacy:si_ada"


async def test_list_get_update_and_delete_subscriptions(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    for name in ("ada", "bob", "cy"):
        await create_subscriber(api, subscriberId=name)
    await subscribe(api, "team", {"subscriptions": ["ada", "bob", {"subscriberId": "cy", "identifier": "cy-sub"}]})
    page = (await api.get("/v2/topics/team/subscriptions", params={"limit": 2, "orderDirection": "ASC"})).json()
    assert [item["subscriber"]["subscriberId"] for item in page["data"]] == ["ada", "bob"]
    assert page["totalCount"] == 3 and page["next"]
    rest = (
        await api.get(
            "/v2/topics/team/subscriptions", params={"limit": 2, "orderDirection": "ASC", "after": page["next"]}
        )
    ).json()
    assert [item["subscriber"]["subscriberId"] for item in rest["data"]] == ["cy"]
    only = (await api.get("/v2/topics/team/subscriptions", params={"subscriberId": "bob"})).json()
    assert [item["identifier"] for item in only["data"]] == ["tk_team:si_bob"]

    details = (await api.get("/v2/topics/team/subscriptions/cy-sub")).json()["data"]
    assert details["identifier"] == "cy-sub"
    assert_error(await api.get("/v2/topics/team/subscriptions/nope"), 404)

    updated = await api.patch(
        "/v2/topics/team/subscriptions/cy-sub", json={"name": "Cy", "preferences": ["some-workflow"]}
    )
    assert updated.status_code == 200, updated.text
    body = updated.json()["data"]
    assert body["name"] == "Cy"
    assert body["preferences"] == [{"subscriptionId": body["_id"], "enabled": True, "workflow": None}]
    assert_error(await api.patch("/v2/topics/team/subscriptions/nope", json={"name": "x"}), 404)

    removed = await api.request(
        "DELETE", "/v2/topics/team/subscriptions", json={"subscriptions": ["ada", {"identifier": "cy-sub"}, "ghost"]}
    )
    assert removed.status_code == 200, removed.text
    result = removed.json()["data"]
    assert sorted(item["identifier"] for item in result["data"]) == ["cy-sub", "tk_team:si_ada"]
    assert result["meta"] == {"totalCount": 3, "successful": 2, "failed": 1}
    assert result["errors"][0]["subscriberId"] == "ghost"
    left = await subscriptions_in_store(app, "team", tenancy.environment_id)
    assert [row.external_subscriber_id for row in left] == ["bob"]


async def test_subscriptions_of_another_environment_are_not_found(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    await create_subscriber(api, subscriberId="ada")
    await subscribe(api, "shared-key", {"subscriptions": ["ada"]})
    assert_error(await production_api.get("/v2/topics/shared-key/subscriptions/tk_shared-key:si_ada"), 404)
    assert_error(
        await production_api.patch("/v2/topics/shared-key/subscriptions/tk_shared-key:si_ada", json={"name": "x"}), 404
    )
    assert_error(
        await production_api.request("DELETE", "/v2/topics/shared-key/subscriptions", json={"subscriptions": ["ada"]}),
        404,
    )
    # The same key in production is another topic; ada is not a subscriber there.
    other = (await subscribe(production_api, "shared-key", {"subscriptions": ["ada"]})).json()["data"]
    assert other["meta"]["successful"] == 0 and other["errors"][0]["code"] == "SUBSCRIBER_NOT_FOUND"
    assert_error(await production_api.get("/v2/subscribers/ada/subscriptions"), 404)
    assert len(await subscriptions_in_store(app, "shared-key", tenancy.environment_id)) == 1


async def test_a_subscribers_subscriptions(api: httpx.AsyncClient) -> None:
    await create_subscriber(api, subscriberId="ada")
    await create_subscriber(api, subscriberId="bob")
    for key in ("a1", "a2", "a3"):
        await subscribe(api, key, {"subscriptions": ["ada"]})
    await subscribe(api, "b1", {"subscriptions": ["bob"]})
    listed = (await api.get("/v2/subscribers/ada/subscriptions", params={"orderDirection": "ASC", "limit": 2})).json()
    assert [item["topic"]["key"] for item in listed["data"]] == ["a1", "a2"]
    assert listed["totalCount"] == 3 and listed["next"]
    rest = (
        await api.get("/v2/subscribers/ada/subscriptions", params={"orderDirection": "ASC", "after": listed["next"]})
    ).json()
    assert [item["topic"]["key"] for item in rest["data"]] == ["a3"]
    assert [
        item["topic"]["key"]
        for item in (await api.get("/v2/subscribers/ada/subscriptions", params={"key": "a2"})).json()["data"]
    ] == ["a2"]
    assert_error(await api.get("/v2/subscribers/nobody/subscriptions"), 404)
