"""novu.workflows.*: the v2 workflow operations, and the step operations under them."""

from __future__ import annotations

import email
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from novu_py import Novu, models
from novu_py.models import NovuError
from starlette.responses import JSONResponse

from tests.fixtures.builders import create_integration, create_subscriber
from tests.fixtures.peers import HttpPeer, SmtpPeer
from tests.sdk.operations.conftest import call
from tests.sdk.operations.runs import run_worker

# Controls are sent as Novu's server names them: the SDK passes a dict of controls through as it is.
IN_APP: dict[str, Any] = {
    "name": "Inbox",
    "step_id": "inbox",
    "type": "in_app",
    "control_values": {
        "subject": "Order {{payload.order}}",
        "body": "Hello {{subscriber.firstName}}, order {{payload.order}}",
        "redirect": {"url": "https://example.com/o/{{payload.order}}", "target": "_blank"},
        "primaryAction": {"label": "Track", "redirect": {"url": "https://example.com/t", "target": "_self"}},
    },
}
EMAIL: dict[str, Any] = {
    "name": "Mail",
    "step_id": "mail",
    "type": "email",
    "control_values": {
        "subject": "Hi {{subscriber.firstName}}",
        "body": "<p>{{payload.order}}</p>",
        "editorType": "html",
        "layoutId": "layout-1",
    },
}
DELAY: dict[str, Any] = {
    "name": "Wait",
    "type": "delay",
    "control_values": {"type": "regular", "amount": 5, "unit": "minutes"},
}


def create(novu: Novu, workflow_id: str, **fields: Any) -> models.WorkflowResponseDto:
    dto: dict[str, Any] = {
        "name": "Order shipped",
        "workflow_id": workflow_id,
        "steps": [IN_APP],
        "active": True,
        **fields,
    }
    return novu.workflows.create(create_workflow_dto=dto).result  # type: ignore[arg-type]


async def test_workflows_create(novu: Novu) -> None:
    created = await call(
        lambda: create(
            novu,
            "order-shipped",
            steps=[IN_APP, EMAIL, DELAY],
            tags=["orders"],
            validate_payload=True,
            payload_schema={"type": "object", "properties": {"order": {"type": "string"}}},
            preferences={
                "user": {"all": {"enabled": True, "read_only": True}, "channels": {"sms": {"enabled": False}}}
            },
        )
    )
    assert created.workflow_id == "order-shipped" and created.status == models.WorkflowStatusEnum.ACTIVE
    assert created.tags == ["orders"] and created.validate_payload is True
    assert created.preferences.default.all.read_only is True
    assert created.preferences.default.channels["sms"].enabled is False
    in_app, mail, delay = created.steps
    assert in_app.step_id == "inbox" and in_app.control_values.body == IN_APP["control_values"]["body"]
    assert in_app.control_values.primary_action.label == "Track"
    assert in_app.control_values.redirect.url == "https://example.com/o/{{payload.order}}"
    assert mail.control_values.layout_id == "layout-1" and mail.control_values.subject == "Hi {{subscriber.firstName}}"
    assert delay.control_values.amount == 5
    fetched = await call(lambda: novu.workflows.get(workflow_id=created.id).result)
    assert fetched.workflow_id == "order-shipped"


async def test_workflows_create_with_a_block_editor_email_step(
    novu: Novu, api: httpx.AsyncClient, app: FastAPI
) -> None:
    """An email step in Novu's block editor (a Maily JSON body) is taken and delivered as the HTML of its blocks."""
    document = {
        "type": "doc",
        "content": [
            {
                "type": "paragraph",
                "content": [{"type": "text", "text": "Order "}, {"type": "variable", "attrs": {"id": "payload.order"}}],
            },
            {
                "type": "button",
                "attrs": {"text": "Track", "url": "https://shop.example.com/track", "alignment": "left"},
            },
        ],
    }
    body = json.dumps(document)
    step = {
        "name": "Blocks",
        "step_id": "blocks",
        "type": "email",
        "control_values": {"subject": "Order {{payload.order}}", "body": body, "editorType": "block"},
    }
    created = await call(lambda: create(novu, "block-mail", steps=[step]))
    assert created.steps[0].control_values.editor_type == "block" and created.steps[0].control_values.body == body
    smtp = SmtpPeer().start()
    try:
        await create_integration(
            api,
            providerId="nodemailer",
            active=True,
            credentials={"host": "127.0.0.1", "port": str(smtp.port), "from": "herald@example.com", "ignoreTls": True},
        )
        subscriber = await create_subscriber(api, email="ada@example.com")
        await call(
            lambda: novu.trigger(
                trigger_event_request_dto={
                    "workflow_id": "block-mail",
                    "to": subscriber["subscriberId"],
                    "payload": {"order": "E-5"},
                }
            )
        )
        await run_worker(app)
        [mail] = smtp.received
    finally:
        smtp.stop()
    parsed = email.message_from_bytes(mail.data)
    [html_part] = [part for part in parsed.walk() if part.get_content_type() == "text/html"]
    html = html_part.get_payload(decode=True).decode()
    assert parsed["Subject"] == "Order E-5"
    assert '<p style="margin:0 0 16px;">Order E-5</p>' in html
    assert '<a href="https://shop.example.com/track" target="_blank"' in html and ">Track</a>" in html


async def test_workflows_create_with_an_http_request_step(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    """An http_request step as @novu/api and novu-py describe it, run by the engine against a local server."""
    peer = HttpPeer().start()
    try:
        peer.route("PUT", "/hooks/{order}", lambda request: JSONResponse({"ok": True}))
        step = {
            "name": "Notify backend",
            "step_id": "notify-backend",
            "type": "http_request",
            "control_values": {
                "method": "PUT",
                "url": peer.url + "/hooks/{{payload.order}}",
                "headers": [{"key": "X-Source", "value": "herald"}],
                "body": '{"order": "{{payload.order}}"}',
            },
        }
        created = await call(lambda: create(novu, "http-call", steps=[step]))
        assert created.steps[0].type == "http_request" and created.steps[0].step_id == "notify-backend"
        subscriber = await create_subscriber(api)
        await call(
            lambda: novu.trigger(
                trigger_event_request_dto={
                    "workflow_id": "http-call",
                    "to": subscriber["subscriberId"],
                    "payload": {"order": "F-6"},
                }
            )
        )
        await run_worker(app)
        [sent] = peer.requests_to("/hooks/")
    finally:
        peer.stop()
    assert (sent.method, sent.path, sent.headers["x-source"]) == ("PUT", "/hooks/F-6", "herald")
    assert json.loads(sent.body) == {"order": "F-6"}


async def test_workflows_list(novu: Novu) -> None:
    await call(lambda: create(novu, "first", tags=["a"]))
    second = await call(lambda: create(novu, "second", tags=["b"], name="Second one"))
    listed = await call(lambda: novu.workflows.list(request={"limit": 10}).result)
    assert listed.total_count == 2 and [item.workflow_id for item in listed.workflows] == ["second", "first"]
    found = await call(lambda: novu.workflows.list(request={"query": "second"}).result)
    assert [item.id for item in found.workflows] == [second.id]
    assert found.workflows[0].step_type_overviews == [models.StepTypeEnum.IN_APP]
    tagged = await call(lambda: novu.workflows.list(request={"tags": ["a"]}).result)
    assert [item.workflow_id for item in tagged.workflows] == ["first"]


async def test_workflows_get(novu: Novu) -> None:
    created = await call(lambda: create(novu, "get-me"))
    for key in (created.id, created.workflow_id, created.slug):
        fetched = await call(lambda key=key: novu.workflows.get(workflow_id=key).result)
        assert fetched.id == created.id and fetched.steps[0].control_values.subject == "Order {{payload.order}}"
    with pytest.raises(NovuError) as raised:
        await call(lambda: novu.workflows.get(workflow_id="missing"))
    assert raised.value.status_code == 404


async def test_workflows_update(novu: Novu) -> None:
    created = await call(lambda: create(novu, "update-me", steps=[IN_APP, EMAIL]))
    step_id = created.steps[0].id
    dto: dict[str, Any] = {
        "name": "Updated",
        "steps": [{**IN_APP, "control_values": {"body": "Changed {{payload.order}}"}}],
        "preferences": {"workflow": {"all": {"enabled": True}, "channels": {"email": {"enabled": False}}}},
        "severity": models.SeverityLevelEnum.HIGH,
    }
    updated = await call(lambda: novu.workflows.update(workflow_id=created.workflow_id, update_workflow_dto=dto).result)  # type: ignore[arg-type]
    assert updated.name == "Updated" and updated.severity == models.SeverityLevelEnum.HIGH
    assert [step.id for step in updated.steps] == [step_id]
    assert updated.steps[0].control_values.body == "Changed {{payload.order}}"
    assert updated.preferences.default.channels["email"].enabled is False
    fetched = await call(lambda: novu.workflows.get(workflow_id=created.id).result)
    assert len(fetched.steps) == 1 and fetched.name == "Updated"


async def test_workflows_patch(novu: Novu) -> None:
    created = await call(lambda: create(novu, "patch-me", description="kept"))
    patched = await call(
        lambda: novu.workflows.patch(workflow_id=created.id, patch_workflow_dto={"active": False, "tags": ["p"]}).result
    )
    assert patched.status == models.WorkflowStatusEnum.INACTIVE and patched.active is False
    assert patched.tags == ["p"] and patched.description == "kept"
    fetched = await call(lambda: novu.workflows.get(workflow_id=created.id).result)
    assert fetched.active is False


async def test_workflows_delete(novu: Novu) -> None:
    created = await call(lambda: create(novu, "delete-me"))
    await call(lambda: novu.workflows.delete(workflow_id=created.workflow_id))
    with pytest.raises(NovuError) as raised:
        await call(lambda: novu.workflows.get(workflow_id=created.id))
    assert raised.value.status_code == 404
    listed = await call(lambda: novu.workflows.list(request={}).result)
    assert listed.total_count == 0


async def test_workflows_sync(novu: Novu, server_url: str) -> None:
    # Into an unprotected environment: Production takes changes from its own keys only.
    staging = await call(
        lambda: novu.environments.create(create_environment_request_dto={"name": "Staging", "color": "#000"}).result
    )
    assert staging.api_keys
    created = await call(lambda: create(novu, "sync-me", steps=[IN_APP, DELAY]))
    synced = await call(
        lambda: (
            novu.workflows.sync(workflow_id=created.id, sync_workflow_dto={"target_environment_id": staging.id}).result
        )
    )
    assert synced.workflow_id == "sync-me" and synced.id != created.id
    assert [step.step_id for step in synced.steps] == [step.step_id for step in created.steps]
    staged = Novu(secret_key=staging.api_keys[0].key, server_url=server_url)
    seen = await call(lambda: staged.workflows.get(workflow_id="sync-me").result)
    assert seen.id == synced.id and seen.steps[0].control_values.body == IN_APP["control_values"]["body"]


async def test_workflows_steps_retrieve(novu: Novu) -> None:
    created = await call(lambda: create(novu, "steps", steps=[IN_APP, EMAIL]))
    step = await call(lambda: novu.workflows.steps.retrieve(workflow_id=created.workflow_id, step_id="mail").result)
    assert step.id == created.steps[1].id and step.type == models.StepTypeEnum.EMAIL
    assert step.workflow_database_id == created.id and step.control_values["layoutId"] == "layout-1"
    with pytest.raises(NovuError) as raised:
        await call(lambda: novu.workflows.steps.retrieve(workflow_id=created.id, step_id="missing"))
    assert raised.value.status_code == 404


async def test_workflows_steps_generate_preview(novu: Novu) -> None:
    created = await call(lambda: create(novu, "preview", steps=[IN_APP, EMAIL]))
    preview = await call(
        lambda: (
            novu.workflows.steps.generate_preview(
                workflow_id=created.id,
                step_id="inbox",
                generate_preview_request_dto={
                    "preview_payload": {"payload": {"order": "C-3"}, "subscriber": {"first_name": "Lin"}}
                },
            ).result
        )
    )
    # novu-py's result union takes any object as its Dict[str, Any] member: the result reads as a dict.
    result = preview.result
    assert isinstance(result, dict)
    assert result["type"] == "in_app" and result["preview"]["body"] == "Hello Lin, order C-3"
    assert result["preview"]["redirect"]["url"] == "https://example.com/o/C-3"
    assert result["preview"]["primaryAction"]["label"] == "Track"
    # Each answer also validates as Novu's in-app render output.
    assert models.InAppRenderOutput.model_validate(result["preview"]).subject == "Order C-3"
    assert preview.preview_payload_example.payload == {"order": "C-3"}
    mail = await call(
        lambda: (
            novu.workflows.steps.generate_preview(
                workflow_id=created.workflow_id,
                step_id="mail",
                generate_preview_request_dto={
                    "preview_payload": {"payload": {"order": "D-4"}, "subscriber": {"first_name": "Lin"}}
                },
            ).result
        )
    )
    rendered = models.EmailRenderOutput.model_validate(mail.result["preview"])  # type: ignore[index]
    assert rendered.subject == "Hi Lin" and "D-4" in rendered.body
