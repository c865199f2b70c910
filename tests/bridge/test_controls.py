"""Control values of code-first steps: saved in Herald, sent as ``controls`` on execute and preview."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from herald.engine.worker import Worker
from tests.bridge.conftest import NodeBridge, executed, messages_of, settle, sync, trigger
from tests.fixtures.builders import create_subscriber


async def test_a_saved_control_value_changes_what_is_delivered(
    bridge: NodeBridge, api: httpx.AsyncClient, app: FastAPI, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    await sync(api, bridge)
    unset = await api.get("/v1/bridge/controls/greeting/hello")
    assert unset.status_code == 200, unset.text
    assert unset.json()["data"] is None
    before = await trigger(api, "greeting", subscriber["subscriberId"], payload={"name": "Ada"})
    await settle(worker, app, before)

    saved = await api.put("/v1/bridge/controls/greeting/hello", json={"variables": {"greeting": "Good evening"}})
    assert saved.status_code == 200, saved.text
    after = await trigger(api, "greeting", subscriber["subscriberId"], payload={"name": "Ada"})
    await settle(worker, app, after)

    entity = saved.json()["data"]
    assert (entity["level"], entity["stepId"], entity["controls"]) == ("step_controls", "hello", {"greeting": "Good evening"})
    assert (await api.get("/v1/bridge/controls/greeting/hello")).json()["data"] == entity
    # The framework's schema defaults fill in what was not saved (the subject).
    [first] = await messages_of(app, before)
    [second] = await messages_of(app, after)
    assert (first.content, first.subject) == ("Hello, Ada", "Welcome")
    assert (second.content, second.subject) == ("Good evening, Ada", "Welcome")
    assert [item["body"]["controls"] for item in executed(bridge, "greeting")] == [{}, {"greeting": "Good evening"}]


async def test_saved_values_outlive_a_sync_and_replace_the_ones_before(bridge: NodeBridge, api: httpx.AsyncClient) -> None:
    await sync(api, bridge)
    first = await api.put("/v1/bridge/controls/greeting/hello", json={"variables": {"greeting": "Hi", "subject": "Hey"}})
    second = await api.put("/v1/bridge/controls/greeting/hello", json={"variables": {"greeting": "Hey"}})
    await sync(api, bridge)

    kept = (await api.get("/v1/bridge/controls/greeting/hello")).json()["data"]
    assert kept["controls"] == {"greeting": "Hey"}
    assert kept["_id"] == first.json()["data"]["_id"] == second.json()["data"]["_id"]


async def test_the_preview_route_renders_the_step_on_the_bridge_with_its_controls(
    bridge: NodeBridge, api: httpx.AsyncClient
) -> None:
    await sync(api, bridge)
    await api.put("/v1/bridge/controls/greeting/hello", json={"variables": {"greeting": "Good evening"}})

    saved = await api.post("/v1/bridge/preview/greeting/hello", json={"payload": {"name": "Ada"}})
    given = await api.post(
        "/v1/bridge/preview/greeting/hello", json={"payload": {"name": "Ada"}, "controls": {"greeting": "Hi"}}
    )

    assert saved.status_code == 201, saved.text
    assert saved.json()["data"]["outputs"] == {"subject": "Welcome", "body": "Good evening, Ada"}
    assert given.json()["data"]["outputs"]["body"] == "Hi, Ada"
    assert [item["body"]["controls"] for item in bridge.requests("preview")] == [{"greeting": "Good evening"}, {"greeting": "Hi"}]


async def test_unknown_workflows_steps_and_bad_values_are_refused_as_novu_does(
    bridge: NodeBridge, api: httpx.AsyncClient
) -> None:
    await sync(api, bridge)
    workflow = await api.get("/v1/bridge/controls/not-synced/hello")
    step = await api.put("/v1/bridge/controls/greeting/nope", json={"variables": {}})
    not_an_object = await api.put("/v1/bridge/controls/greeting/hello", json={"variables": "Hi"})
    too_big = await api.put("/v1/bridge/controls/greeting/hello", json={"variables": {"greeting": "x" * 70_000}})

    assert (workflow.status_code, workflow.json()["message"]) == (404, "Workflow not found")
    assert (step.status_code, step.json()["message"]) == (404, "Step not found")
    assert not_an_object.status_code == 422, not_an_object.text
    assert too_big.status_code == 400, too_big.text
    assert "statusCode" in too_big.json()


async def test_the_v2_step_preview_sends_the_saved_values(bridge: NodeBridge, api: httpx.AsyncClient) -> None:
    await sync(api, bridge)
    await api.put("/v1/bridge/controls/greeting/hello", json={"variables": {"greeting": "Good evening"}})

    response = await api.post(
        "/v2/workflows/greeting/step/hello/preview", json={"previewPayload": {"payload": {"name": "Ada"}}}
    )

    assert response.status_code == 201, response.text
    assert response.json()["data"]["result"]["preview"] == {"subject": "Welcome", "body": "Good evening, Ada"}


async def test_the_v2_step_shows_the_saved_values(bridge: NodeBridge, api: httpx.AsyncClient) -> None:
    await sync(api, bridge)
    await api.put("/v1/bridge/controls/greeting/hello", json={"variables": {"greeting": "Good evening"}})

    step = (await api.get("/v2/workflows/greeting/steps/hello")).json()["data"]

    assert step["controlValues"] == step["controls"]["values"] == {"greeting": "Good evening"}
    assert step["controls"]["dataSchema"]["properties"]["greeting"]["default"] == "Hello"
