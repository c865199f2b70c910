"""``npx novu sync`` (the real CLI 2.20.1) against a real Herald, and the other /v1/bridge routes."""

from __future__ import annotations

from pathlib import Path

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from herald.models import Environment
from tests.bridge.conftest import NodeBridge, novu_cli, sync
from tests.conftest import Tenancy, assert_error
from tests.console.test_editor import editor_fields
from tests.fixtures.builders import create_workflow
from tests.fixtures.console import ConsoleAs
from tests.fixtures.server import free_port


async def bridge_url_of(app: FastAPI, environment_id: str) -> str | None:
    async with app.state.sessionmaker() as session:
        return await session.scalar(select(Environment.bridge_url).where(Environment.id == environment_id))


async def test_the_cli_syncs_the_bridges_workflows(
    bridge: NodeBridge, herald_url: str, api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, tmp_path: Path
) -> None:
    completed = novu_cli(
        "sync", "--bridge-url", bridge.url, "--api-url", herald_url, "--secret-key", tenancy.api_key, cwd=tmp_path
    )

    assert completed.returncode == 0, completed.stderr
    # Herald signed its discover request, and the strict bridge answered it (the CLI's own is unsigned).
    signed = [item for item in bridge.requests("discover") if item["signature"]]
    assert len(signed) == 1
    listed = await api.get("/v2/workflows", params={"limit": 50})
    assert listed.status_code == 200, listed.text
    synced = {item["workflowId"]: item for item in listed.json()["data"]["workflows"]}
    assert set(synced) == {"every-channel", "skippable", "digested", "delayed", "greeting"}
    assert {item["origin"] for item in synced.values()} == {"external"}
    assert synced["every-channel"]["name"] == "Every channel" and synced["every-channel"]["tags"] == ["orders"]
    assert synced["every-channel"]["stepTypeOverviews"] == ["custom", "in_app", "email", "sms", "push", "chat"]
    detail = await api.get("/v2/workflows/every-channel")
    body = detail.json()["data"]
    assert body["payloadSchema"]["required"] == ["orderId"] and body["validatePayload"] is False
    assert [step["stepId"] for step in body["steps"]] == ["lookup", "inbox", "mail", "text", "push", "chat"]
    assert await bridge_url_of(app, tenancy.environment_id) == bridge.url


async def test_a_bad_key_makes_the_cli_fail(bridge: NodeBridge, herald_url: str, tmp_path: Path) -> None:
    completed = novu_cli("sync", "-b", bridge.url, "-a", herald_url, "-s", "not-a-key", cwd=tmp_path)

    assert completed.returncode == 1
    assert "401" in completed.stderr + completed.stdout


async def test_a_resync_removes_the_workflows_the_code_no_longer_has(
    bridge: NodeBridge, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    first = await sync(api, bridge)
    assert sorted(item["triggers"][0]["identifier"] for item in first) == ["delayed", "digested", "every-channel", "greeting", "skippable"]
    assert {(item["type"], item["origin"]) for item in first} == {("BRIDGE", "external")}
    kept_id = next(item["_id"] for item in first if item["triggers"][0]["identifier"] == "skippable")

    bridge.configure(tenancy.api_key, workflows=["skippable", "delayed"])
    second = await sync(api, bridge)

    assert sorted(item["triggers"][0]["identifier"] for item in second) == ["delayed", "skippable"]
    # Upserted by workflowId: the same workflow, not a new one.
    assert next(item["_id"] for item in second if item["triggers"][0]["identifier"] == "skippable") == kept_id
    gone = await api.get("/v2/workflows/digested")
    assert_error(gone, 404)
    listed = await api.get("/v2/workflows", params={"limit": 50})
    assert sorted(item["workflowId"] for item in listed.json()["data"]["workflows"]) == ["delayed", "skippable"]


async def test_a_workflow_made_in_herald_is_not_taken_over(bridge: NodeBridge, api: httpx.AsyncClient) -> None:
    mine = await create_workflow(api, name="Skippable", triggerIdentifier="skippable")

    response = await api.post("/v1/bridge/sync", params={"source": "cli"}, json={"bridgeUrl": bridge.url})

    assert_error(response, 400, "Workflow skippable was already created in Dashboard")
    still = await api.get(f"/v1/workflows/{mine['_id']}")
    assert still.json()["data"]["steps"][0]["template"]["type"] == "in_app"
    listed = await api.get("/v2/workflows", params={"limit": 50})
    assert [item["workflowId"] for item in listed.json()["data"]["workflows"]] == ["skippable"]


async def test_a_bridge_that_cannot_be_reached_fails_the_sync(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    down = f"http://127.0.0.1:{free_port()}/api/novu"

    response = await api.post("/v1/bridge/sync", json={"bridgeUrl": down})

    body = assert_error(response, 400)
    assert down in body["message"]
    assert await bridge_url_of(app, tenancy.environment_id) is None


async def test_an_address_the_outbound_policy_refuses_fails_the_sync(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/bridge/sync", json={"bridgeUrl": "http://169.254.169.254/api/novu"})

    body = assert_error(response, 400)
    assert "outbound policy refused 169.254.169.254" in body["message"]


async def test_not_a_url_is_refused(api: httpx.AsyncClient) -> None:
    assert_error(await api.post("/v1/bridge/sync", json={"bridgeUrl": "ftp://example.com"}), 400)
    assert_error(await api.post("/v1/bridge/sync", json={}), 422)


async def test_status_validate_and_diff(bridge: NodeBridge, api: httpx.AsyncClient) -> None:
    assert_error(await api.get("/v1/bridge/status"), 400, "Bridge URL not found")
    await sync(api, bridge)

    status = await api.get("/v1/bridge/status")
    assert status.status_code == 200, status.text
    assert status.json()["data"]["status"] == "ok"
    assert status.json()["data"]["discovered"] == {"workflows": 5, "steps": 13}

    valid = await api.post("/v1/bridge/validate", json={"bridgeUrl": bridge.url})
    assert valid.json() == {"data": {"isValid": True}}
    down = await api.post("/v1/bridge/validate", json={"bridgeUrl": f"http://127.0.0.1:{free_port()}/api/novu"})
    assert down.json() == {"data": {"isValid": False}}

    diff = await api.post("/v1/bridge/diff", json={"bridgeUrl": bridge.url})
    assert diff.status_code == 200, diff.text
    current = diff.json()["data"]["current"]
    assert current["bridgeUrl"] == bridge.url
    assert sorted(item["workflowId"] for item in current["workflows"]) == ["delayed", "digested", "every-channel", "greeting", "skippable"]
    assert diff.json()["data"]["new"] == {"bridgeUrl": bridge.url}


async def test_a_code_first_step_is_previewed_by_its_bridge(bridge: NodeBridge, api: httpx.AsyncClient) -> None:
    await sync(api, bridge)

    response = await api.post(
        "/v2/workflows/skippable/step/note/preview",
        json={"previewPayload": {"payload": {"orderId": "P-1"}, "subscriber": {"firstName": "Ada"}}},
    )

    assert response.status_code == 201, response.text
    result = response.json()["data"]["result"]
    assert result == {"type": "in_app", "preview": {"body": "Order P-1"}}
    [request] = bridge.requests("preview")
    assert request["signature"] and request["stepId"] == "note"
    assert request["body"]["payload"] == {"orderId": "P-1"}

    step = await api.get("/v2/workflows/skippable/steps/note")
    assert step.status_code == 200, step.text
    assert (step.json()["data"]["origin"], step.json()["data"]["controlValues"]) == ("external", {})


async def test_the_steps_of_a_code_first_workflow_change_in_code_only(bridge: NodeBridge, api: httpx.AsyncClient) -> None:
    [workflow, *_] = await sync(api, bridge)
    steps = [{"name": "inbox", "template": {"type": "in_app", "content": "Edited"}}]

    v1 = await api.put(f"/v1/workflows/{workflow['_id']}", json={"steps": steps})
    assert_error(v1, 400, f"Workflow {workflow['triggers'][0]['identifier']} is written in code and synced from its bridge: change its steps in the code and run novu sync")
    v2 = await api.put(
        f"/v2/workflows/{workflow['_id']}",
        json={"name": "Edited", "steps": [{"name": "inbox", "type": "in_app", "controlValues": {"body": "Edited"}}]},
    )
    assert_error(v2, 400)
    # What is not in code may still change, as in Novu (its status).
    status = await api.put(f"/v1/workflows/{workflow['_id']}/status", json={"active": False})
    assert status.status_code == 200, status.text


async def test_the_console_editor_shows_a_code_first_workflow_read_only_and_previews_it(
    bridge: NodeBridge, api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    synced = {item["triggers"][0]["identifier"]: item for item in await sync(api, bridge)}
    workflow_id = synced["skippable"]["_id"]
    author = await console_as("author")

    page = await author.get(f"/console/workflows/{workflow_id}/edit")

    assert page.status_code == 200, page.text
    assert "This workflow is written in code" in page.text
    assert 'value="save"' not in page.text
    fields = editor_fields(page)
    fields["test_payload"] = '{"orderId": "E-1"}'
    preview = await author.post_form(f"/console/workflows/{workflow_id}/edit/preview", {**fields, "preview_step": "0"})
    assert preview.status_code == 200, preview.text
    assert "Order E-1" in preview.text
    refused = await author.post_form(f"/console/workflows/{workflow_id}/edit", {**fields, "action": "save"})
    assert refused.status_code == 422
    assert "change it in the code and run novu sync" in refused.text
