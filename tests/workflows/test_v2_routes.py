"""/v2/workflows: Novu's v2 shape over the same workflows as /v1/workflows."""

from __future__ import annotations

import email
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from herald.app import build_worker
from herald.models import Message, Workflow
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow, unique
from tests.fixtures.peers import SmtpPeer

UNKNOWN_ID = "000000000000000000000000"

IN_APP = {
    "name": "Inbox",
    "stepId": "inbox",
    "type": "in_app",
    "controlValues": {
        "subject": "Order {{payload.order}}",
        "body": "Hello {{subscriber.firstName}}, order {{payload.order}} shipped",
        "avatar": "https://example.com/a.png",
        "redirect": {"url": "https://example.com/orders/{{payload.order}}", "target": "_blank"},
        "primaryAction": {"label": "Track", "redirect": {"url": "https://example.com/track", "target": "_self"}},
        "secondaryAction": {"label": "Dismiss"},
        "data": {"order": "{{payload.order}}"},
        "skip": {"==": [1, 2]},
        "disableOutputSanitization": False,
    },
}
EMAIL = {
    "name": "Mail",
    "stepId": "mail",
    "type": "email",
    "controlValues": {
        "subject": "Hi {{subscriber.firstName}}",
        "body": "<p>Your order {{payload.order}}</p>",
        "editorType": "html",
        "layoutId": "layout-1",
    },
}
DELAY = {"name": "Wait", "type": "delay", "controlValues": {"type": "regular", "amount": 5, "unit": "minutes"}}
DIGEST = {
    "name": "Batch",
    "type": "digest",
    "controlValues": {
        "amount": 1,
        "unit": "hours",
        "digestKey": "payload.group",
        "lookBackWindow": {"amount": 5, "unit": "minutes"},
    },
}


def body(**fields: Any) -> dict[str, Any]:
    return {"name": "Order shipped", "workflowId": unique("order-shipped"), "steps": [IN_APP], "active": True, **fields}


async def created(api: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await api.post("/v2/workflows", json=body(**fields))
    assert response.status_code == 201, response.text
    return response.json()["data"]


@pytest.fixture
def smtp() -> Iterator[SmtpPeer]:
    server = SmtpPeer().start()
    yield server
    server.stop()


async def test_create_answers_novu_shape_and_controls_round_trip(api: httpx.AsyncClient) -> None:
    workflow = await created(
        api,
        steps=[IN_APP, EMAIL, DELAY, DIGEST],
        description="When an order ships",
        tags=["orders"],
        severity="high",
        preferences={"user": {"all": {"enabled": True, "readOnly": True}, "channels": {"email": {"enabled": False}}}},
    )
    assert workflow["name"] == "Order shipped" and workflow["status"] == "ACTIVE" and workflow["active"] is True
    assert workflow["slug"].endswith("_wf_" + workflow["_id"])
    assert (workflow["description"], workflow["tags"], workflow["severity"]) == (
        "When an order ships",
        ["orders"],
        "high",
    )
    default = workflow["preferences"]["default"]
    assert default["all"]["readOnly"] is True
    assert default["channels"]["email"]["enabled"] is False and default["channels"]["in_app"]["enabled"] is True
    in_app, mail, delay, digest = workflow["steps"]
    assert in_app["stepId"] == "inbox" and in_app["type"] == "in_app"
    assert in_app["controlValues"] == IN_APP["controlValues"]
    assert mail["controlValues"] == EMAIL["controlValues"]
    assert delay["controlValues"] == DELAY["controlValues"] and delay["stepId"] == "wait"
    assert digest["controlValues"] == DIGEST["controlValues"]
    assert in_app["workflowId"] == workflow["workflowId"] and in_app["workflowDatabaseId"] == workflow["_id"]


async def test_v2_workflow_is_a_v1_workflow(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    workflow = await created(
        api,
        steps=[IN_APP, EMAIL, DIGEST],
        preferences={
            "workflow": {"all": {"enabled": True, "readOnly": False}, "channels": {"sms": {"enabled": False}}}
        },
    )
    v1 = (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"]
    assert v1["triggers"][0]["identifier"] == workflow["workflowId"]
    assert v1["preferenceSettings"]["sms"] is False and v1["critical"] is False
    in_app, mail, digest = v1["steps"]
    assert in_app["template"]["content"] == IN_APP["controlValues"]["body"]
    assert in_app["template"]["cta"]["data"] == {
        "url": "https://example.com/orders/{{payload.order}}",
        "target": "_blank",
    }
    assert [b["content"] for b in in_app["template"]["cta"]["action"]["buttons"]] == ["Track", "Dismiss"]
    assert mail["template"]["layoutId"] == "layout-1" and mail["template"]["contentType"] == "customHtml"
    assert digest["metadata"] == {
        "type": "regular",
        "amount": 1,
        "unit": "hours",
        "digestKey": "payload.group",
        "backoff": True,
        "backoffAmount": 5,
        "backoffUnit": "minutes",
    }
    assert {"name": "order"} in v1["triggers"][0]["variables"]
    # A workflow made with v1 reads as v2.
    made = await create_workflow(
        api, steps=[{"name": "Text", "template": {"type": "sms", "content": "Hi {{payload.x}}"}}]
    )
    read = (await api.get(f"/v2/workflows/{made['triggers'][0]['identifier']}")).json()["data"]
    assert read["_id"] == made["_id"] and read["steps"][0]["controlValues"] == {"body": "Hi {{payload.x}}"}
    assert read["steps"][0]["stepId"] == "text"


async def test_created_with_v2_triggers_like_v1(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, smtp: SmtpPeer
) -> None:
    await create_integration(
        api,
        providerId="nodemailer",
        active=True,
        credentials={"host": "127.0.0.1", "port": str(smtp.port), "from": "herald@example.com", "ignoreTls": True},
    )
    subscriber = await create_subscriber(api, email="ada@example.com", firstName="Ada")
    workflow = await created(api, steps=[IN_APP, EMAIL])
    response = await api.post(
        "/v1/events/trigger",
        json={"name": workflow["workflowId"], "to": subscriber["subscriberId"], "payload": {"order": "A-1"}},
    )
    assert response.status_code == 201 and response.json()["data"]["status"] == "processed", response.text
    worker = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    try:
        await worker.run_until_idle()
    finally:
        if worker.http is not None:
            await worker.http.aclose()
    async with app.state.sessionmaker() as session:
        messages = (
            (await session.execute(select(Message).where(Message.environment_id == tenancy.environment_id)))
            .scalars()
            .all()
        )
    by_channel = {message.channel: message for message in messages}
    in_app = by_channel["in_app"]
    assert in_app.content == "Hello Ada, order A-1 shipped"
    assert in_app.subject == "Order A-1"
    assert in_app.cta["data"]["url"] == "https://example.com/orders/A-1"
    assert in_app.data == {"order": "A-1"}
    assert by_channel["email"].status == "sent"
    [mail] = smtp.received
    parsed = email.message_from_bytes(mail.data)
    assert parsed["Subject"] == "Hi Ada"
    bodies = [part.get_payload(decode=True).decode() for part in parsed.walk() if part.get_content_maintype() == "text"]
    assert any("Your order A-1" in text for text in bodies)


async def test_validate_payload_refuses_a_payload_off_the_schema(api: httpx.AsyncClient) -> None:
    schema = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}
    workflow = await created(api, validatePayload=True, payloadSchema=schema)
    assert workflow["validatePayload"] is True and workflow["payloadSchema"] == schema
    subscriber = await create_subscriber(api)
    refused = await api.post(
        "/v1/events/trigger",
        json={"name": workflow["workflowId"], "to": subscriber["subscriberId"], "payload": {"order": 5}},
    )
    error = assert_error(refused, 400)
    assert error["type"] == "PAYLOAD_VALIDATION_ERROR" and error["message"].startswith("Payload validation failed")
    assert error["errors"][0]["field"] == "/order" and error["schema"] == schema
    missing = await api.post(
        "/v1/events/trigger", json={"name": workflow["workflowId"], "to": subscriber["subscriberId"]}
    )
    assert assert_error(missing, 400)["errors"][0]["message"] == "'order' is a required property"
    accepted = await api.post(
        "/v1/events/trigger",
        json={"name": workflow["workflowId"], "to": subscriber["subscriberId"], "payload": {"order": "A"}},
    )
    assert accepted.status_code == 201 and accepted.json()["data"]["status"] == "processed"
    # Switched off, the schema no longer refuses anything.
    patched = await api.patch(f"/v2/workflows/{workflow['_id']}", json={"validatePayload": False})
    assert patched.status_code == 200 and patched.json()["data"]["validatePayload"] is False
    again = await api.post(
        "/v1/events/trigger",
        json={"name": workflow["workflowId"], "to": subscriber["subscriberId"], "payload": {"order": 5}},
    )
    assert again.status_code == 201, again.text


async def test_addressed_by_id_identifier_or_slug(api: httpx.AsyncClient) -> None:
    workflow = await created(api)
    for key in (workflow["_id"], workflow["workflowId"], workflow["slug"]):
        response = await api.get(f"/v2/workflows/{key}")
        assert response.status_code == 200 and response.json()["data"]["_id"] == workflow["_id"]
    step = workflow["steps"][0]
    for key in (step["stepId"], step["_id"], step["slug"]):
        response = await api.get(f"/v2/workflows/{workflow['workflowId']}/steps/{key}")
        assert response.status_code == 200 and response.json()["data"]["_id"] == step["_id"]
    assert_error(await api.get(f"/v2/workflows/{workflow['_id']}/steps/nope"), 404)
    missing = assert_error(await api.get(f"/v2/workflows/{UNKNOWN_ID}"), 404, "Workflow cannot be found")
    assert missing["ctx"] == {"workflowId": UNKNOWN_ID}
    assert_error(await api.get("/v2/workflows/no-such-workflow"), 404)


async def test_update_keeps_step_ids_and_replaces_steps(api: httpx.AsyncClient) -> None:
    workflow = await created(api, steps=[IN_APP, EMAIL])
    in_app_id = workflow["steps"][0]["_id"]
    changed = {**IN_APP, "controlValues": {"body": "New body"}}
    response = await api.put(
        f"/v2/workflows/{workflow['workflowId']}",
        json={"name": "Renamed", "steps": [changed], "preferences": {}, "tags": ["a"], "active": False},
    )
    assert response.status_code == 200, response.text
    updated = response.json()["data"]
    assert updated["name"] == "Renamed" and updated["status"] == "INACTIVE" and updated["tags"] == ["a"]
    assert [step["_id"] for step in updated["steps"]] == [in_app_id]
    assert updated["steps"][0]["controlValues"] == {"body": "New body"}
    assert updated["workflowId"] == workflow["workflowId"]


async def test_v1_update_keeps_what_only_v2_reads(api: httpx.AsyncClient) -> None:
    workflow = await created(api, steps=[{**IN_APP, "stepId": "custom-key"}])
    v1 = (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"]
    step = v1["steps"][0]
    step["template"]["content"] = "Edited in v1"
    response = await api.put(f"/v1/workflows/{workflow['_id']}", json={"steps": [step]})
    assert response.status_code == 200, response.text
    read = (await api.get(f"/v2/workflows/{workflow['_id']}")).json()["data"]["steps"][0]
    assert read["stepId"] == "custom-key" and read["controlValues"]["body"] == "Edited in v1"
    assert read["controlValues"]["skip"] == IN_APP["controlValues"]["skip"]
    # Sent again through v2 without them, the kept controls go.
    again = await api.put(
        f"/v2/workflows/{workflow['_id']}",
        json={
            "name": "x",
            "steps": [{"name": "Inbox", "stepId": "custom-key", "type": "in_app", "controlValues": {"body": "b"}}],
        },
    )
    assert again.json()["data"]["steps"][0]["controlValues"] == {"body": "b"}
    assert again.json()["data"]["steps"][0]["_id"] == read["_id"]


async def test_patch_changes_only_what_is_sent(api: httpx.AsyncClient) -> None:
    workflow = await created(api, description="kept", tags=["x"])
    response = await api.patch(f"/v2/workflows/{workflow['_id']}", json={"active": False, "name": "Patched"})
    patched = response.json()["data"]
    assert (patched["name"], patched["active"], patched["description"], patched["tags"]) == (
        "Patched",
        False,
        "kept",
        ["x"],
    )
    assert patched["steps"][0]["controlValues"] == IN_APP["controlValues"]


async def test_delete_frees_the_identifier(api: httpx.AsyncClient) -> None:
    workflow = await created(api)
    response = await api.delete(f"/v2/workflows/{workflow['workflowId']}")
    assert response.status_code == 204 and response.content == b""
    assert_error(await api.get(f"/v2/workflows/{workflow['_id']}"), 404)
    assert_error(await api.get(f"/v1/workflows/{workflow['_id']}"), 404)
    assert_error(await api.delete(f"/v2/workflows/{workflow['_id']}"), 404)
    again = await api.post("/v2/workflows", json=body(workflowId=workflow["workflowId"]))
    assert again.status_code == 201


async def test_list_searches_filters_and_pages(api: httpx.AsyncClient) -> None:
    first = await created(api, name="Alpha", tags=["billing"])
    second = await created(api, name="Beta", tags=["orders"], active=False)
    third = await created(api, name="Gamma", tags=["orders"])
    listed = (await api.get("/v2/workflows")).json()["data"]
    assert listed["totalCount"] == 3
    assert [item["_id"] for item in listed["workflows"]] == [third["_id"], second["_id"], first["_id"]]
    assert listed["workflows"][0]["stepTypeOverviews"] == ["in_app"]
    page = (await api.get("/v2/workflows", params={"limit": 1, "offset": 1, "orderDirection": "ASC"})).json()["data"]
    assert page["totalCount"] == 3 and [item["name"] for item in page["workflows"]] == ["Beta"]
    tagged = (await api.get("/v2/workflows", params={"tags": "orders"})).json()["data"]
    assert {item["name"] for item in tagged["workflows"]} == {"Beta", "Gamma"}
    inactive = (await api.get("/v2/workflows", params={"status": "INACTIVE"})).json()["data"]
    assert [item["name"] for item in inactive["workflows"]] == ["Beta"]
    found = (await api.get("/v2/workflows", params={"query": "alp"})).json()["data"]
    assert [item["name"] for item in found["workflows"]] == ["Alpha"]
    assert_error(await api.get("/v2/workflows", params={"limit": 0}), 422)


async def test_sync_copies_into_another_environment(app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    # An unprotected environment: Production takes changes from its own keys only.
    staging = (await api.post("/v1/environments", json={"name": "Staging"})).json()["data"]
    workflow = await created(api, steps=[IN_APP, DELAY], tags=["t"])
    response = await api.put(f"/v2/workflows/{workflow['_id']}/sync", json={"targetEnvironmentId": staging["_id"]})
    assert response.status_code == 200, response.text
    copy = response.json()["data"]
    assert copy["_id"] != workflow["_id"] and copy["workflowId"] == workflow["workflowId"]
    assert [s["controlValues"] for s in copy["steps"]] == [s["controlValues"] for s in workflow["steps"]]
    assert {s["_id"] for s in copy["steps"]}.isdisjoint({s["_id"] for s in workflow["steps"]})
    async with make_client(app, staging["apiKeys"][0]["key"]) as staged:
        seen = (await staged.get(f"/v2/workflows/{workflow['workflowId']}")).json()["data"]
        assert seen["_id"] == copy["_id"] and seen["tags"] == ["t"]
    # A second sync brings the copy up to date, keeping its ids.
    await api.patch(f"/v2/workflows/{workflow['_id']}", json={"name": "Renamed"})
    again = (
        await api.put(f"/v2/workflows/{workflow['_id']}/sync", json={"targetEnvironmentId": staging["_id"]})
    ).json()["data"]
    assert again["_id"] == copy["_id"] and again["name"] == "Renamed"
    assert [s["_id"] for s in again["steps"]] == [s["_id"] for s in copy["steps"]]
    assert_error(await api.put(f"/v2/workflows/{workflow['_id']}/sync", json={"targetEnvironmentId": UNKNOWN_ID}), 404)
    assert_error(
        await api.put(f"/v2/workflows/{workflow['_id']}/sync", json={"targetEnvironmentId": tenancy.environment_id}),
        400,
    )


async def test_sync_refuses_another_organizations_environment(app: FastAPI, api: httpx.AsyncClient) -> None:
    from herald.organizations.service import create_organization

    async with app.state.sessionmaker() as session:
        other = await create_organization(session, box=app.state.secret_box)
        await session.commit()
    workflow = await created(api)
    foreign = other.environments[0].environment.id
    assert_error(await api.put(f"/v2/workflows/{workflow['_id']}/sync", json={"targetEnvironmentId": foreign}), 404)
    async with app.state.sessionmaker() as session:
        rows = (await session.execute(select(Workflow).where(Workflow.environment_id == foreign))).scalars().all()
    assert rows == []


async def test_other_environment_cannot_see_or_change(app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    workflow = await created(api)
    async with make_client(app, tenancy.production_api_key) as production:
        for key in (workflow["_id"], workflow["workflowId"], workflow["slug"]):
            assert_error(await production.get(f"/v2/workflows/{key}"), 404)
        assert_error(await production.patch(f"/v2/workflows/{workflow['_id']}", json={"name": "x"}), 404)
        assert_error(await production.delete(f"/v2/workflows/{workflow['_id']}"), 404)
        assert (await production.get("/v2/workflows")).json()["data"]["totalCount"] == 0
    assert (await api.get(f"/v2/workflows/{workflow['_id']}")).json()["data"]["name"] == "Order shipped"


async def test_validation_errors(api: httpx.AsyncClient) -> None:
    taken = await created(api)
    assert_error(await api.post("/v2/workflows", json=body(workflowId=taken["workflowId"])), 409)
    assert_error(await api.post("/v2/workflows", json={"name": "x", "steps": []}), 422)
    bad_type = assert_error(await api.post("/v2/workflows", json=body(steps=[{"name": "t", "type": "tool"}])), 422)
    assert "steps.0.type" in bad_type["errors"]
    # A throttle's controls are its metadata: checked as a v1 throttle step's.
    no_window = assert_error(
        await api.post("/v2/workflows", json=body(steps=[{"name": "t", "type": "throttle", "controlValues": {"unit": "hours"}}])),
        422,
    )
    assert "steps.0.controlValues.amount" in no_window["errors"], no_window["errors"]
    no_amount = assert_error(
        await api.post(
            "/v2/workflows", json=body(steps=[{"name": "d", "type": "delay", "controlValues": {"unit": "minutes"}}])
        ),
        422,
    )
    assert any(field.startswith("steps.0.controlValues") for field in no_amount["errors"]), no_amount
    twice = assert_error(await api.post("/v2/workflows", json=body(steps=[IN_APP, IN_APP])), 422)
    assert "steps.1.stepId" in twice["errors"]
    # A block-editor document deeper than the limit cannot be made into a template.
    deep: dict = {"type": "paragraph", "content": [{"type": "text", "text": "x"}]}
    for _ in range(40):
        deep = {"type": "blockquote", "content": [deep]}
    block = {
        **EMAIL,
        "controlValues": {
            **EMAIL["controlValues"],
            "editorType": "block",
            "body": json.dumps({"type": "doc", "content": [deep]}),
        },
    }
    too_deep = assert_error(await api.post("/v2/workflows", json=body(steps=[block])), 422)
    assert "steps.0.controlValues.body" in too_deep["errors"], too_deep["errors"]
    bad_schema = assert_error(await api.post("/v2/workflows", json=body(payloadSchema={"type": "nonsense"})), 422)
    assert "payloadSchema" in bad_schema["errors"]
    assert_error(await api.post("/v2/workflows", json=body(workflowId="has spaces")), 422)
    too_long = assert_error(
        await api.post("/v2/workflows", json=body(name="x" * 65, description="d" * 257, tags=["t" * 33])), 422
    )
    assert {"name", "description", "tags.0"} <= set(too_long["errors"]), too_long["errors"]


async def test_step_preview_renders_with_payload(api: httpx.AsyncClient) -> None:
    workflow = await created(api, steps=[IN_APP, EMAIL])
    response = await api.post(
        f"/v2/workflows/{workflow['workflowId']}/step/inbox/preview",
        json={"previewPayload": {"payload": {"order": "B-2"}, "subscriber": {"firstName": "Grace"}}},
    )
    assert response.status_code == 201, response.text
    preview = response.json()["data"]
    assert preview["result"]["type"] == "in_app"
    assert preview["result"]["preview"]["body"] == "Hello Grace, order B-2 shipped"
    assert preview["result"]["preview"]["redirect"]["url"] == "https://example.com/orders/B-2"
    assert preview["result"]["preview"]["primaryAction"]["label"] == "Track"
    assert preview["previewPayloadExample"]["payload"] == {"order": "B-2"}
    mail = (
        await api.post(
            f"/v2/workflows/{workflow['_id']}/step/mail/preview",
            json={
                "controlValues": {"subject": "S {{payload.x}}", "body": "<b>{{payload.x}}</b>"},
                "previewPayload": {"payload": {"x": "<i>"}},
            },
        )
    ).json()["data"]
    assert mail["result"]["preview"]["subject"] == "S <i>"
    assert "<b>&lt;i&gt;</b>" in mail["result"]["preview"]["body"]
    broken = (
        await api.post(
            f"/v2/workflows/{workflow['_id']}/step/inbox/preview", json={"controlValues": {"body": "{% if %}"}}
        )
    ).json()["data"]
    assert broken["result"]["error"]["message"]
    assert_error(await api.post(f"/v2/workflows/{workflow['_id']}/step/nope/preview", json={}), 404)


async def test_step_preview_of_delay_and_digest_names_their_schedule(api: httpx.AsyncClient) -> None:
    workflow = await created(api, steps=[DELAY, DIGEST])
    delay = (await api.post(f"/v2/workflows/{workflow['_id']}/step/wait/preview", json={})).json()["data"]
    assert delay["result"] == {"type": "delay", "preview": {"type": "regular", "amount": 5, "unit": "minutes"}}
    digest = (await api.post(f"/v2/workflows/{workflow['_id']}/step/batch/preview", json={})).json()["data"]
    assert digest["result"]["preview"] == DIGEST["controlValues"]


async def test_a_throttle_step_round_trips_its_controls(api: httpx.AsyncClient) -> None:
    controls = {"type": "fixed", "amount": 1, "unit": "hours", "threshold": 2, "throttleKey": "orderId"}
    response = await api.post(
        "/v2/workflows",
        json=body(steps=[{"name": "limit", "type": "throttle", "controlValues": controls}, {"name": "inbox", "type": "in_app", "controlValues": {"body": "Hi"}}]),
    )
    assert response.status_code == 201, response.text
    workflow = response.json()["data"]
    assert workflow["steps"][0]["type"] == "throttle" and workflow["steps"][0]["controlValues"] == controls
    # The v1 view runs it as the engine's throttle step.
    v1 = (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"]
    assert v1["steps"][0]["template"]["type"] == "throttle" and v1["steps"][0]["metadata"] == controls
