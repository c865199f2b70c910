"""v2 email steps of Novu's block editor (editorType "block", a Maily JSON body) delivered as HTML mail."""

from __future__ import annotations

import email
import json
from collections.abc import Iterator
from dataclasses import replace
from email.message import Message as MailMessage
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.app import build_worker
from tests.conftest import assert_error
from tests.fixtures.builders import create_integration, create_subscriber, unique
from tests.fixtures.peers import SmtpPeer

DOCUMENT = {
    "type": "doc",
    "content": [
        {
            "type": "heading",
            "attrs": {"level": 2, "textAlign": "left"},
            "content": [
                {"type": "text", "text": "Order "},
                {"type": "variable", "attrs": {"id": "payload.order", "fallback": None}},
                {"type": "text", "text": " shipped", "marks": [{"type": "bold"}]},
            ],
        },
        {
            "type": "paragraph",
            "content": [
                {"type": "text", "text": "Hello "},
                {"type": "variable", "attrs": {"id": "subscriber.firstName"}},
                {"type": "text", "text": ", you ordered:"},
            ],
        },
        {
            "type": "repeat",
            "attrs": {"each": "payload.items"},
            "content": [
                {"type": "paragraph", "content": [{"type": "variable", "attrs": {"id": "payload.items.title"}}]}
            ],
        },
        {
            "type": "button",
            "attrs": {"text": "Track it", "url": "payload.trackUrl", "isUrlVariable": True, "alignment": "left"},
        },
        {
            "type": "paragraph",
            "attrs": {"showIfKey": "payload.gift"},
            "content": [{"type": "text", "text": "Gift wrapped"}],
        },
        {"type": "paragraph"},
    ],
}


@pytest.fixture
def smtp() -> Iterator[SmtpPeer]:
    server = SmtpPeer().start()
    yield server
    server.stop()


def block_step(body: str) -> dict[str, Any]:
    # What @novu/api sends for an email step's controls by default: editorType "block".
    return {
        "name": "Mail",
        "stepId": "mail",
        "type": "email",
        "controlValues": {"subject": "Order {{payload.order}}", "body": body, "editorType": "block"},
    }


async def workflow_with(api: httpx.AsyncClient, body: str) -> dict[str, Any]:
    response = await api.post(
        "/v2/workflows",
        json={"name": "Shipped", "workflowId": unique("shipped"), "steps": [block_step(body)], "active": True},
    )
    assert response.status_code == 201, response.text
    return response.json()["data"]


async def delivered(api: httpx.AsyncClient, app: FastAPI, smtp: SmtpPeer, workflow_id: str) -> MailMessage:
    await create_integration(
        api,
        providerId="nodemailer",
        active=True,
        credentials={"host": "127.0.0.1", "port": str(smtp.port), "from": "herald@example.com", "ignoreTls": True},
    )
    subscriber = await create_subscriber(api, email="ada@example.com", firstName="<Ada>")
    payload = {
        "order": "A-1",
        "items": [{"title": "Teapot"}, {"title": "Cups & saucers"}],
        "trackUrl": "https://shop.example.com/track/A-1",
        "gift": False,
    }
    response = await api.post(
        "/v1/events/trigger", json={"name": workflow_id, "to": subscriber["subscriberId"], "payload": payload}
    )
    assert response.status_code == 201, response.text
    worker = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    try:
        await worker.run_until_idle()
    finally:
        if worker.http is not None:
            await worker.http.aclose()
    [mail] = smtp.received
    return email.message_from_bytes(mail.data)


def part(message: MailMessage, subtype: str) -> str:
    [found] = [p for p in message.walk() if p.get_content_type() == f"text/{subtype}"]
    payload = found.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode(found.get_content_charset() or "utf-8")


async def test_a_block_editor_email_is_delivered_as_the_html_of_its_blocks(
    api: httpx.AsyncClient, app: FastAPI, smtp: SmtpPeer
) -> None:
    body = json.dumps(DOCUMENT)
    workflow = await workflow_with(api, body)
    # Read back as it was sent: the editor's document, not the HTML made of it.
    [step] = workflow["steps"]
    assert step["controlValues"]["body"] == body and step["controlValues"]["editorType"] == "block"
    assert not step.get("issues")

    mail = await delivered(api, app, smtp, workflow["workflowId"])
    assert mail["Subject"] == "Order A-1"
    html = part(mail, "html")
    assert '<h2 style="margin:0 0 12px;text-align:left;">Order A-1<strong> shipped</strong></h2>' in html
    assert "Hello &lt;Ada&gt;, you ordered:" in html
    assert '<p style="margin:0 0 16px;">Teapot</p><p style="margin:0 0 16px;">Cups &amp; saucers</p>' in html
    assert '<a href="https://shop.example.com/track/A-1" target="_blank"' in html and ">Track it</a>" in html
    assert "Gift wrapped" not in html and "{{" not in html and "{%" not in html
    text = part(mail, "plain")
    assert "Hello <Ada>, you ordered:" in text and "Teapot" in text


async def test_an_html_body_sent_with_the_block_editor_type_is_delivered_as_written(
    api: httpx.AsyncClient, app: FastAPI, smtp: SmtpPeer
) -> None:
    """@novu/api sends editorType "block" unless told otherwise, also with an HTML body: Novu sends it as HTML."""
    workflow = await workflow_with(api, "<p>Your order {{payload.order}}</p>")
    mail = await delivered(api, app, smtp, workflow["workflowId"])
    assert "<p>Your order A-1</p>" in part(mail, "html")


async def test_the_step_preview_renders_the_blocks(api: httpx.AsyncClient) -> None:
    workflow = await workflow_with(api, json.dumps(DOCUMENT))
    response = await api.post(
        f"/v2/workflows/{workflow['workflowId']}/step/mail/preview",
        json={"previewPayload": {"payload": {"order": "B-2", "items": [{"title": "Kettle"}], "gift": True}}},
    )
    assert response.status_code == 201, response.text
    preview = response.json()["data"]["result"]["preview"]
    assert "Order B-2" in preview["body"] and "Kettle" in preview["body"] and "Gift wrapped" in preview["body"]


async def test_a_document_with_a_broken_variable_is_refused_naming_the_body(api: httpx.AsyncClient) -> None:
    broken = {"type": "doc", "content": [{"type": "variable", "attrs": {"id": "payload.x }}{{ y"}}]}
    response = await api.post(
        "/v2/workflows",
        json={"name": "Broken", "workflowId": unique("broken"), "steps": [block_step(json.dumps(broken))]},
    )
    error = assert_error(response, 422)
    assert "steps.0.controlValues.body" in error["errors"], error
