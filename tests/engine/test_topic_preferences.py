"""Topic subscriptions' preferences applied by the engine when a trigger goes to a topic (herald/engine/topic_preferences.py)."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from herald.engine.worker import Worker
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, messages_of, trigger
from tests.fixtures.builders import create_subscriber, create_workflow, unique

IN_APP = {"name": "inbox", "template": {"type": "in_app", "content": "Hello"}}
HIGH = {"==": [{"var": "payload.priority"}, "high"]}


def name_of(workflow: dict[str, Any]) -> str:
    return workflow["triggers"][0]["identifier"]


async def subscribe(api: httpx.AsyncClient, key: str, subscriber_id: str, preferences: list[Any] | None) -> None:
    body: dict[str, Any] = {"subscriptions": [subscriber_id]}
    if preferences is not None:
        body["preferences"] = preferences
    response = await api.post(f"/v2/topics/{key}/subscriptions", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["data"]["meta"]["failed"] == 0, response.text


async def reached(app: FastAPI, tenancy: Tenancy, transaction_id: str) -> set[str]:
    return {m.subscriber_id for m in await messages_of(app, tenancy.environment_id, transaction_id=transaction_id)}


async def test_a_subscriptions_condition_decides_who_a_topic_trigger_reaches(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    workflow = await create_workflow(api, steps=[IN_APP], tags=["alerts"])
    other_workflow = await create_workflow(api, steps=[IN_APP])
    identifier = name_of(workflow)
    high_only, muted, by_tag, plain, elsewhere = [await create_subscriber(api) for _ in range(5)]
    key = unique("alerts")
    await subscribe(api, key, high_only["subscriberId"], [{"workflowId": identifier, "condition": HIGH}])
    await subscribe(api, key, muted["subscriberId"], [{"workflowId": workflow["_id"], "enabled": False}])
    await subscribe(api, key, by_tag["subscriberId"], [{"filter": {"tags": ["alerts"]}, "condition": HIGH}])
    await subscribe(api, key, plain["subscriberId"], None)
    # A rule for another workflow says nothing of this one.
    await subscribe(api, key, elsewhere["subscriberId"], [{"workflowId": name_of(other_workflow), "enabled": False}])

    low = await trigger(api, identifier, {"type": "Topic", "topicKey": key}, payload={"priority": "low"})
    high = await trigger(api, identifier, {"type": "Topic", "topicKey": key}, payload={"priority": "high"})
    await worker.run_until_idle()

    assert await reached(app, tenancy, low["transactionId"]) == {plain["_id"], elsewhere["_id"]}
    assert await reached(app, tenancy, high["transactionId"]) == {
        high_only["_id"],
        by_tag["_id"],
        plain["_id"],
        elsewhere["_id"],
    }
    # Who was left out is in the trigger's execution detail.
    texts = [d.detail for d in await details_of(app, low["transactionId"])]
    assert any("3 topic subscribers left out by their subscription's preferences" in text for text in texts), texts


async def test_a_member_of_two_topics_is_reached_when_one_subscription_takes_it(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    workflow = await create_workflow(api, steps=[IN_APP])
    ada = await create_subscriber(api)
    first, second = unique("first"), unique("second")
    await subscribe(api, first, ada["subscriberId"], [{"workflowId": name_of(workflow), "condition": HIGH}])
    await subscribe(api, second, ada["subscriberId"], None)
    result = await trigger(
        api,
        name_of(workflow),
        [{"type": "Topic", "topicKey": first}, {"type": "Topic", "topicKey": second}],
        payload={"priority": "low"},
    )
    only_first = await trigger(
        api, name_of(workflow), {"type": "Topic", "topicKey": first}, payload={"priority": "low"}
    )
    await worker.run_until_idle()
    assert await reached(app, tenancy, result["transactionId"]) == {ada["_id"]}
    assert await reached(app, tenancy, only_first["transactionId"]) == set()


async def test_a_condition_that_cannot_be_evaluated_leaves_the_member_out_and_says_why(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    workflow = await create_workflow(api, steps=[IN_APP])
    ada = await create_subscriber(api)
    key = unique("broken")
    await subscribe(api, key, ada["subscriberId"], [{"workflowId": name_of(workflow), "condition": {"eval": ["x"]}}])
    result = await trigger(api, name_of(workflow), {"type": "Topic", "topicKey": key})
    await worker.run_until_idle()
    assert await reached(app, tenancy, result["transactionId"]) == set()
    texts = [d.detail for d in await details_of(app, result["transactionId"])]
    assert any("unknown operator 'eval'" in text for text in texts), texts
