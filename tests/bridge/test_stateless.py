"""A trigger that carries ``bridgeUrl`` runs stateless on that bridge: discovered there, no sync needed."""

from __future__ import annotations

import json
import os
import subprocess

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from herald.engine.worker import Worker
from herald.models import Event
from tests.bridge.conftest import NODE_DIR, NodeBridge, executed, messages_of, node_packages, settle, sync, trigger
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber


async def test_the_frameworks_own_trigger_runs_on_its_bridge_without_a_sync(
    bridge: NodeBridge, herald_url: str, api: httpx.AsyncClient, app: FastAPI, worker: Worker, tenancy: Tenancy
) -> None:
    subscriber = await create_subscriber(api)
    stored = await api.get("/v2/workflows", params={"limit": 50})
    assert stored.json()["data"]["workflows"] == []

    # NOVU_BRIDGE_ORIGIN is where the framework says its bridge is: it sends bridgeUrl = origin + /api/novu.
    completed = subprocess.run(
        [node_packages(), str(NODE_DIR / "trigger.mjs"), herald_url, tenancy.api_key, subscriber["subscriberId"], "S-1"],
        cwd=NODE_DIR,
        env={**os.environ, "NOVU_BRIDGE_ORIGIN": bridge.origin},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert completed.returncode == 0, completed.stderr
    answer = json.loads(completed.stdout.strip().splitlines()[-1])["data"]
    assert answer["status"] == "processed" and answer["acknowledged"] is True
    await settle(worker, app, answer["transactionId"])
    assert [message.content for message in await messages_of(app, answer["transactionId"])] == ["Order S-1", "After the note"]
    # Herald asked the bridge (signed) for the workflow, then executed each step there.
    assert [item["signature"] is not None for item in bridge.requests("discover")] == [True]
    assert [item["stepId"] for item in executed(bridge, "skippable")] == ["note", "after"]
    # Nothing was stored: the workflow lives in the bridge's code.
    stored = await api.get("/v2/workflows", params={"limit": 50})
    assert stored.json()["data"]["workflows"] == []
    # The run is in the activity feed like any other.
    feed = await api.get("/v1/notifications", params={"transactionId": answer["transactionId"]})
    assert feed.status_code == 200, feed.text
    assert [item["transactionId"] for item in feed.json()["data"]] == [answer["transactionId"]]


async def test_a_stateless_triggers_controls_are_sent_to_its_steps(
    bridge: NodeBridge, api: httpx.AsyncClient, app: FastAPI, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)

    transaction_id = await trigger(
        api,
        "greeting",
        subscriber["subscriberId"],
        payload={"name": "Ada"},
        bridgeUrl=bridge.url,
        controls={"steps": {"hello": {"greeting": "Good morning"}}},
    )

    await settle(worker, app, transaction_id)
    [message] = await messages_of(app, transaction_id)
    assert (message.content, message.subject) == ("Good morning, Ada", "Welcome")
    [request] = executed(bridge, "greeting")
    assert request["body"]["controls"] == {"greeting": "Good morning"}


async def test_a_workflow_its_bridge_does_not_serve_is_novus_422(bridge: NodeBridge, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)

    response = await api.post(
        "/v1/events/trigger",
        json={"name": "not-in-code", "to": subscriber["subscriberId"], "payload": {}, "bridgeUrl": bridge.url},
    )

    assert response.status_code == 422, response.text
    assert response.json()["message"] == "workflow_not_found"


async def test_a_bridge_that_cannot_be_reached_is_a_400(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)

    response = await api.post(
        "/v1/events/trigger",
        json={"name": "skippable", "to": subscriber["subscriberId"], "payload": {}, "bridgeUrl": "ftp://example.com/api/novu"},
    )

    assert response.status_code == 400, response.text
    assert "is not an http(s) URL" in response.json()["message"]


async def test_a_trigger_without_bridge_url_does_not_ask_the_bridge(
    bridge: NodeBridge, api: httpx.AsyncClient, app: FastAPI, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    await sync(api, bridge)

    transaction_id = await trigger(api, "greeting", subscriber["subscriberId"], payload={"name": "Ada"})
    await settle(worker, app, transaction_id)

    # The sync's discover only: the synced workflow is read from the store.
    assert len(bridge.requests("discover")) == 1
    [message] = await messages_of(app, transaction_id)
    assert message.content == "Hello, Ada"


async def test_a_stateless_run_of_a_synced_workflow_is_recorded_under_its_id(
    bridge: NodeBridge, api: httpx.AsyncClient, app: FastAPI
) -> None:
    subscriber = await create_subscriber(api)
    synced = {item["triggers"][0]["identifier"]: item["_id"] for item in await sync(api, bridge)}

    stateless = await trigger(api, "greeting", subscriber["subscriberId"], payload={"name": "Ada"}, bridgeUrl=bridge.url)
    delete = await api.delete(f"/v1/workflows/{synced['greeting']}")
    assert delete.status_code == 200, delete.text
    first = await trigger(api, "greeting", subscriber["subscriberId"], payload={"name": "Ada"}, bridgeUrl=bridge.url)
    second = await trigger(api, "greeting", subscriber["subscriberId"], payload={"name": "Bo"}, bridgeUrl=bridge.url)

    async with app.state.sessionmaker() as session:
        ids = dict((await session.execute(select(Event.transaction_id, Event.workflow_id))).all())
    assert ids[stateless] == synced["greeting"]
    # Without a stored workflow of that workflowId: one id for every run of it, so digests gather them.
    assert ids[first] == ids[second] != synced["greeting"]
