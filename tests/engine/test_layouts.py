"""Email steps wrapped in the environment's layouts, delivered to a real SMTP server on loopback."""

from __future__ import annotations

import email
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.engine.worker import Worker
from herald.layouts.cache import layout_cache
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, messages_of, set_aside_other_jobs, statements_while, trigger
from tests.engine.test_delivery import name_of, settle
from tests.engine.test_environment_variables import _variable
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow
from tests.fixtures.peers import SmtpPeer

V1_LAYOUT = (
    "<html><body><div id='v1'>Hello {{subscriber.firstName}}</div>{{{body}}}<footer>v1 footer</footer></body></html>"
)
V2_LAYOUT = "<html><body><div id='v2'>{{payload.brand}}</div>{{content}}<footer>v2 footer</footer></body></html>"


@pytest.fixture
def smtp() -> Iterator[SmtpPeer]:
    server = SmtpPeer().start()
    yield server
    server.stop()


def email_step(**template: Any) -> dict[str, Any]:
    return {
        "name": "mail",
        "template": {
            "type": "email",
            "subject": "Order",
            "content": "<p>Order {{payload.order}}</p>",
            "contentType": "customHtml",
            **template,
        },
    }


async def smtp_integration(api: httpx.AsyncClient, smtp: SmtpPeer) -> None:
    await create_integration(
        api,
        providerId="nodemailer",
        active=True,
        credentials={"host": "127.0.0.1", "port": str(smtp.port), "from": "herald@example.com", "ignoreTls": True},
    )


def html_of(mail: Any) -> str:
    parsed = email.message_from_bytes(mail.data)
    [html] = [
        part.get_payload(decode=True).decode() for part in parsed.walk() if part.get_content_type() == "text/html"
    ]
    # SMTP carries lines ended by CRLF, and a last line break.
    return html.replace("\r\n", "\n").rstrip("\n")


async def v1_layout(api: httpx.AsyncClient, identifier: str, content: str = V1_LAYOUT, **fields: Any) -> dict[str, Any]:
    response = await api.post(
        "/v1/layouts", json={"name": identifier, "identifier": identifier, "content": content, **fields}
    )
    assert response.status_code == 201, response.text
    return response.json()["data"]


async def v2_layout(api: httpx.AsyncClient, layout_id: str, body: str = V2_LAYOUT) -> dict[str, Any]:
    created = await api.post("/v2/layouts", json={"layoutId": layout_id, "name": layout_id})
    assert created.status_code == 201, created.text
    updated = await api.put(
        f"/v2/layouts/{layout_id}",
        json={"name": layout_id, "controlValues": {"email": {"body": body, "editorType": "html"}}},
    )
    assert updated.status_code == 200, updated.text
    return updated.json()["data"]


async def send(
    api: httpx.AsyncClient,
    app: FastAPI,
    worker: Worker,
    workflow: dict[str, Any],
    overrides: dict[str, Any] | None = None,
    **payload: Any,
) -> str:
    subscriber = await create_subscriber(api, email="ada@example.com", firstName="Ada")
    extra = {"overrides": overrides} if overrides is not None else {}
    result = await trigger(
        api, name_of(workflow), subscriber["subscriberId"], payload={"order": "A-1", **payload}, **extra
    )
    [job] = await settle(worker, app, result["transactionId"])
    assert job.status == "completed", job.status
    return str(result["transactionId"])


async def test_a_named_layout_wraps_the_email(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, smtp: SmtpPeer
) -> None:
    await smtp_integration(api, smtp)
    await v1_layout(api, "default-one")  # the environment's default, not named below
    await v2_layout(api, "brand")
    workflow = await create_workflow(api, steps=[email_step(layoutId="brand")])
    transaction = await send(api, app, worker, workflow, brand="<Acme>")
    [mail] = smtp.received
    html = html_of(mail)
    assert html.startswith("<html><body><div id='v2'>&lt;Acme&gt;</div><p>Order A-1</p><footer>v2 footer</footer>")
    assert "v1 footer" not in html
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=transaction)
    assert message.content == html
    assert not [d for d in await details_of(app, transaction) if d.status == "Warning"]


async def test_the_default_layout_wraps_an_email_that_names_none(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, smtp: SmtpPeer
) -> None:
    await smtp_integration(api, smtp)
    await v1_layout(api, "first")
    second = await v1_layout(api, "second", content="<main>{{{body}}}<hr>second</main>")
    workflow = await create_workflow(api, steps=[email_step()])
    await send(api, app, worker, workflow)
    assert html_of(smtp.received[0]).startswith("<html><body><div id='v1'>Hello Ada</div><p>Order A-1</p>")

    # Another default applies to the next email at once (this process's snapshot is dropped on write).
    assert (await api.post(f"/v1/layouts/{second['_id']}/default")).status_code == 204
    await send(api, app, worker, workflow)
    assert html_of(smtp.received[1]) == "<main><p>Order A-1</p><hr>second</main>"


async def test_layout_id_null_opts_out_of_the_default(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, smtp: SmtpPeer
) -> None:
    await smtp_integration(api, smtp)
    await v1_layout(api, "first")
    workflow = await create_workflow(api, steps=[email_step(layoutId=None)])
    assert workflow["steps"][0]["template"]["layoutId"] is None
    await send(api, app, worker, workflow)
    html = html_of(smtp.received[0])
    assert "v1 footer" not in html and "Hello Ada" not in html
    assert "<p>Order A-1</p>" in html


async def test_a_deleted_layout_is_left_out_and_the_details_say_so(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, smtp: SmtpPeer
) -> None:
    await smtp_integration(api, smtp)
    await v2_layout(api, "brand")
    workflow = await create_workflow(api, steps=[email_step(layoutId="brand")])
    await send(api, app, worker, workflow, brand="Acme")
    assert "v2 footer" in html_of(smtp.received[0])

    assert (await api.delete("/v2/layouts/brand")).status_code == 204
    transaction = await send(api, app, worker, workflow, brand="Acme")
    html = html_of(smtp.received[1])
    assert "v2 footer" not in html and "<p>Order A-1</p>" in html
    warnings = [d.detail for d in await details_of(app, transaction) if d.status == "Warning"]
    assert warnings == ["Layout brand was not found in this environment (deleted?); the email was sent without it"]
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=transaction)
    assert message.status == "sent"


async def test_an_environment_without_layouts_reads_them_once_not_per_email(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, smtp: SmtpPeer
) -> None:
    await smtp_integration(api, smtp)
    workflow = await create_workflow(api, steps=[email_step()])
    layout_cache.invalidate(tenancy.environment_id)
    subscribers = [await create_subscriber(api, email=f"r{n}@example.com") for n in range(3)]

    async def deliver_all() -> None:
        for subscriber in subscribers:
            result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "B"})
            await settle(worker, app, result["transactionId"])

    await set_aside_other_jobs(app, tenancy.environment_id)
    reads = await statements_while(app, deliver_all(), lambda statement: "FROM layouts" in statement)
    assert len(smtp.received) == 3
    assert len(reads) == 1, reads


async def test_the_triggers_overrides_name_the_layout_or_opt_out(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, smtp: SmtpPeer
) -> None:
    await smtp_integration(api, smtp)
    await v1_layout(api, "first")
    await v2_layout(api, "brand")
    workflow = await create_workflow(api, steps=[email_step()])
    await send(api, app, worker, workflow, overrides={"layoutIdentifier": "brand"}, brand="Acme")
    assert "v2 footer" in html_of(smtp.received[0])
    await send(
        api, app, worker, workflow, overrides={"channels": {"email": {"layoutId": None}}, "layoutIdentifier": "brand"}
    )
    opted_out = html_of(smtp.received[1])
    assert "v2 footer" not in opted_out and "v1 footer" not in opted_out and "<p>Order A-1</p>" in opted_out
    await send(api, app, worker, workflow)
    assert "v1 footer" in html_of(smtp.received[2])


async def test_a_layout_and_the_blocks_it_wraps_count_toward_the_output_limit_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, smtp: SmtpPeer
) -> None:
    await smtp_integration(api, smtp)
    await _variable(api, "TEN_KB", {tenancy.environment_id: "y" * 10_000})
    await v1_layout(api, "wraps-once", content="<main>{{{body}}}</main>")
    block = {"type": "text", "content": "{% for i in (1..40) %}{{env.TEN_KB}}{% endfor %}"}
    # Three blocks of 400 KB: each render within the limit, the email (1.2 MB, in the built-in layout) past it.
    too_long = await create_workflow(api, steps=[email_step(content=[block] * 3, contentType="editor", layoutId=None)])
    # Two blocks in a layout that places them: 800 KB, the body counted once.
    fits = await create_workflow(api, steps=[email_step(content=[block] * 2, contentType="editor", layoutId="wraps-once")])
    subscriber = await create_subscriber(api, email="ada@example.com")
    first = await trigger(api, name_of(too_long), subscriber["subscriberId"], payload={})
    [refused] = await settle(worker, app, first["transactionId"])
    assert (refused.status, refused.attempts) == ("failed", 1), (refused.status, refused.error_text)
    assert "the step's output exceeds 1,000,000 bytes, all its parts together (render limit)" in (refused.error_text or "")
    assert await messages_of(app, tenancy.environment_id, transaction_id=first["transactionId"]) == []
    second = await trigger(api, name_of(fits), subscriber["subscriberId"], payload={})
    [sent] = await settle(worker, app, second["transactionId"])
    assert sent.status == "completed", sent.error_text
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=second["transactionId"])
    assert message.content.startswith("<main>") and message.content.count("y" * 10_000) == 80
