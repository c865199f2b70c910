"""Code-first workflows run by the engine: every step executed on a real @novu/framework bridge in strict mode."""

from __future__ import annotations

import email
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from herald.bridge import client
from herald.engine.worker import Worker
from herald.models import Environment, Job
from tests.bridge.conftest import (
    NODE_DIR,
    NodeBridge,
    details_of,
    executed,
    jobs_of,
    messages_of,
    node_packages,
    settle,
    sync,
    trigger,
)
from tests.conftest import Tenancy
from tests.engine.conftest import fast_forward
from tests.fixtures import peers
from tests.fixtures.builders import create_integration, create_subscriber
from tests.fixtures.peers import HttpPeer, SmtpPeer
from tests.fixtures.server import free_port


@pytest.fixture
def smtp() -> Iterator[SmtpPeer]:
    server = SmtpPeer().start()
    yield server
    server.stop()


@pytest.fixture
def peer() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    yield server
    server.stop()


async def subscriber_on_every_channel(api: httpx.AsyncClient, peer: HttpPeer, smtp: SmtpPeer) -> dict[str, Any]:
    peers.install_twilio(peer, account_sid="AC1", token="tok")
    peers.install_slack(peer)
    peer.route("POST", "/push-hook", peers.status_answer(200, {"id": "push-1"}))
    smtp_credentials = {"host": "127.0.0.1", "port": str(smtp.port), "from": "shop@example.com", "ignoreTls": True}
    await create_integration(api, providerId="nodemailer", active=True, credentials=smtp_credentials)
    twilio = {"accountSid": "AC1", "token": "tok", "from": "+100", "baseUrl": peer.url}
    await create_integration(api, providerId="twilio", channel="sms", active=True, credentials=twilio)
    await create_integration(api, providerId="slack", channel="chat", active=True, credentials={})
    push_hook = {"webhookUrl": f"{peer.url}/push-hook"}
    await create_integration(api, providerId="push-webhook", channel="push", active=True, credentials=push_hook)
    subscriber = await create_subscriber(api, email="ada@example.com", phone="+15550001", firstName="Ada")
    for provider_id, credentials in (
        ("slack", {"webhookUrl": f"{peer.url}/services/T000/B000/XXXX"}),
        ("push-webhook", {"deviceTokens": ["device-a"]}),
    ):
        response = await api.put(
            f"/v1/subscribers/{subscriber['subscriberId']}/credentials",
            json={"providerId": provider_id, "credentials": credentials},
        )
        assert response.status_code == 200, response.text
    return subscriber


async def test_every_channel_step_is_executed_on_the_bridge_and_delivered(
    bridge: NodeBridge, api: httpx.AsyncClient, app: FastAPI, worker: Worker, peer: HttpPeer, smtp: SmtpPeer
) -> None:
    subscriber = await subscriber_on_every_channel(api, peer, smtp)
    await sync(api, bridge)

    transaction_id = await trigger(api, "every-channel", subscriber["subscriberId"], payload={"orderId": "A-1"})
    jobs = await settle(worker, app, transaction_id)

    assert [(job.step_type, job.status) for job in jobs] == [
        ("custom", "completed"),
        ("in_app", "completed"),
        ("email", "completed"),
        ("sms", "completed"),
        ("push", "completed"),
        ("chat", "completed"),
    ]
    # The custom step's outputs are kept, and reach the later steps through ``state``.
    assert jobs[0].result == {"total": 42}
    requests = executed(bridge, "every-channel")
    assert [item["stepId"] for item in requests] == ["lookup", "inbox", "mail", "text", "push", "chat"]
    assert all(item["signature"] for item in requests)
    inbox = requests[1]["body"]
    assert list(inbox) == ["payload", "controls", "state", "subscriber"]
    assert inbox["payload"] == {"orderId": "A-1"}
    assert inbox["state"] == [{"stepId": "lookup", "outputs": {"total": 42}, "state": {"status": "completed", "error": None}}]
    assert inbox["subscriber"]["subscriberId"] == subscriber["subscriberId"]
    # The in-app step's entry carries its message's seen and read flags to the steps after it.
    in_app_state = requests[2]["body"]["state"][1]
    assert in_app_state["stepId"] == "inbox"
    assert in_app_state["outputs"] == {"seen": False, "read": False, "lastSeenDate": None, "lastReadDate": None}

    messages = {message.channel: message for message in await messages_of(app, transaction_id)}
    in_app = messages["in_app"]
    assert (in_app.content, in_app.subject) == ("Total 42 for Ada", "Order A-1")
    assert in_app.avatar == "https://example.com/avatar.png"
    assert in_app.data == {"orderId": "A-1"}
    feed = await api.get(f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed")
    [item] = [entry for entry in feed.json()["data"] if entry["channel"] == "in_app"]
    assert item["content"] == "Total 42 for Ada"
    assert item["cta"]["data"]["url"] == "/orders"
    assert item["cta"]["action"]["buttons"] == [{"type": "primary", "content": "View order"}]
    # Where the Inbox's primary action leads (@novu/js reads the button's url and target).
    assert in_app.cta["action"]["buttons"] == [{"type": "primary", "content": "View order", "url": "/orders/1", "target": "_self"}]

    [mail] = smtp.received
    parsed = email.message_from_bytes(mail.data)
    assert parsed["Subject"] == "Your order A-1"
    bodies = [part.get_payload(decode=True).decode() for part in parsed.walk() if part.get_content_maintype() == "text"]
    assert any("<p>Thanks, Ada: total 42.</p>" in body for body in bodies)
    [sms] = peer.requests_to("/2010-04-01/Accounts/AC1/Messages.json")
    assert sms.form_value("Body") == "Order A-1 placed"
    [push] = peer.requests_to("/push-hook")
    assert "Order placed" in str(push.json()) and "Order A-1" in str(push.json())
    [chat] = peer.requests_to("/services/T000/B000/XXXX")
    assert chat.json()["text"] == f"Order A-1 for {subscriber['subscriberId']}"
    assert (messages["email"].subject, messages["sms"].content, messages["chat"].status) == ("Your order A-1", "Order A-1 placed", "sent")


async def test_a_step_the_code_skips_is_canceled_and_the_next_one_runs(
    bridge: NodeBridge, api: httpx.AsyncClient, app: FastAPI, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    await sync(api, bridge)

    quiet = await trigger(api, "skippable", subscriber["subscriberId"], payload={"orderId": "B-2", "quiet": True})
    jobs = await settle(worker, app, quiet)

    assert [(job.step_id and job.step_type, job.status) for job in jobs] == [("in_app", "canceled"), ("in_app", "completed")]
    assert [message.content for message in await messages_of(app, quiet)] == ["After the note"]
    details = [detail.detail for detail in await details_of(app, quiet)]
    assert "Step note skipped by the workflow's code (options.skip)" in details
    after = [item for item in executed(bridge, "skippable") if item["stepId"] == "after"][-1]
    assert after["body"]["state"][0]["stepId"] == "note"
    assert after["body"]["state"][0]["state"]["status"] == "canceled"

    loud = await trigger(api, "skippable", subscriber["subscriberId"], payload={"orderId": "B-3"})
    await settle(worker, app, loud)
    assert [message.content for message in await messages_of(app, loud)] == ["Order B-3", "After the note"]


async def test_a_payload_the_code_refuses_fails_its_steps_with_the_frameworks_message(
    bridge: NodeBridge, api: httpx.AsyncClient, app: FastAPI, worker: Worker
) -> None:
    """As in Novu: the trigger is accepted (201), the execute answers 400, nothing is delivered, no retry."""
    subscriber = await create_subscriber(api)
    await sync(api, bridge)

    transaction_id = await trigger(api, "skippable", subscriber["subscriberId"], payload={"order": "C-1"})
    jobs = await settle(worker, app, transaction_id)

    assert [(job.status, job.attempts) for job in jobs] == [("failed", 1), ("failed", 1)]
    assert "must have required property 'orderId'" in (jobs[0].error_text or "")
    assert await messages_of(app, transaction_id) == []
    failed = [detail for detail in await details_of(app, transaction_id) if detail.status == "Failed"]
    assert failed and failed[0].raw is not None
    assert failed[0].raw["status"] == 400 and failed[0].raw["code"] == "ExecutionEventPayloadInvalidError"
    assert "Bridge error (400 ExecutionEventPayloadInvalidError)" in failed[0].detail


async def test_a_digest_gathers_events_and_the_next_step_reads_them(
    bridge: NodeBridge, api: httpx.AsyncClient, app: FastAPI, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    await sync(api, bridge)

    first = await trigger(api, "digested", subscriber["subscriberId"], payload={"name": "Ada"})
    await worker.run_until_idle()
    second = await trigger(api, "digested", subscriber["subscriberId"], payload={"name": "Grace"})
    await worker.run_until_idle()

    [digest, _] = await jobs_of(app, first)
    # The bridge's outputs became the digest's settings, kept on the job for when it closes.
    assert digest.status == "delayed"
    assert digest.data["bridge_metadata"] == {"type": "regular", "amount": 2, "unit": "seconds"}
    assert (await jobs_of(app, second))[0].status == "merged"
    await fast_forward(app, first)
    jobs = await settle(worker, app, first)

    assert [job.status for job in jobs] == ["completed", "completed"]
    [summary] = await messages_of(app, first)
    assert summary.content == "2 events: Ada, Grace"
    [request] = [item for item in executed(bridge, "digested") if item["stepId"] == "summary"]
    [entry] = request["body"]["state"]
    events = entry["outputs"]["events"]
    assert [event["payload"] for event in events] == [{"name": "Ada"}, {"name": "Grace"}]
    assert events[0]["id"] == digest.id and all(event["time"] for event in events)


async def test_a_delay_waits_as_long_as_the_code_says(
    bridge: NodeBridge, api: httpx.AsyncClient, app: FastAPI, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    await sync(api, bridge)

    transaction_id = await trigger(api, "delayed", subscriber["subscriberId"], payload={"name": "Ada"})
    await worker.run_until_idle()

    [delay, _] = await jobs_of(app, transaction_id)
    assert delay.status == "delayed"
    assert delay.data["bridge_metadata"] == {"type": "regular", "amount": 1, "unit": "seconds"}
    waited = (delay.run_at - delay.updated_at).total_seconds()
    assert 0 < waited <= 1.5
    await fast_forward(app, transaction_id)
    jobs = await settle(worker, app, transaction_id)

    assert [job.status for job in jobs] == ["completed", "completed"]
    [message] = await messages_of(app, transaction_id)
    assert message.content == "After the wait (number), Ada"
    [request] = [item for item in executed(bridge, "delayed") if item["stepId"] == "after-wait"]
    [entry] = request["body"]["state"]
    assert entry["stepId"] == "wait" and isinstance(entry["outputs"]["duration"], int)
    # The delay was executed once, when it began: its resumption did not ask the bridge again.
    assert [item["stepId"] for item in executed(bridge, "delayed")] == ["wait", "after-wait"]


async def test_a_bridge_that_is_down_is_retried_then_the_step_fails_with_why(
    bridge: NodeBridge, api: httpx.AsyncClient, app: FastAPI, worker: Worker, tenancy: Tenancy
) -> None:
    subscriber = await create_subscriber(api)
    await sync(api, bridge)
    down = f"http://127.0.0.1:{free_port()}/api/novu"
    async with app.state.sessionmaker() as session, session.begin():
        await session.execute(update(Environment).where(Environment.id == tenancy.environment_id).values(bridge_url=down))

    transaction_id = await trigger(api, "skippable", subscriber["subscriberId"], payload={"orderId": "D-1"})
    jobs = await settle(worker, app, transaction_id)

    first: Job = jobs[0]
    assert first.status == "failed" and first.attempts == first.max_attempts > 1
    assert "The bridge could not be reached" in (first.error_text or "")
    details = [detail.detail for detail in await details_of(app, transaction_id)]
    assert any("(will retry)" in detail for detail in details)
    assert await messages_of(app, transaction_id) == []


async def test_the_strict_bridge_accepts_heralds_signatures_and_refuses_tampered_requests(
    bridge: NodeBridge, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    await sync(api, bridge)
    http = httpx.AsyncClient()
    # Text the framework re-serializes differently from Python's defaults: non-ASCII, a float that is whole.
    body = {"payload": {"orderId": "Zoë-1", "amount": 1.0, "10": "key", "b": 1}, "controls": {}, "state": [], "subscriber": {"subscriberId": "s-1"}}
    try:
        answer = await client.call(
            http, bridge.url, "execute", secret_key=tenancy.api_key, body=body, workflow_id="skippable", step_id="note"
        )
        assert answer.status == 200
        # The payload schema removes the extra keys; the order was checked through the signature.
        assert answer.body["outputs"] == {"body": "Order Zoë-1"}

        text = client.js_json(body)
        assert text.startswith('{"payload":{"10":"key","orderId":"Zoë-1","amount":1,"b":1}')
        tampered = text.replace("Zoë-1", "Zoë-2")
        url = client.action_url(bridge.url, "execute", workflowId="skippable", stepId="note")
        response = await http.post(
            url, content=tampered.encode(), headers={"content-type": "application/json", "novu-signature": client.signature(tenancy.api_key, text)}
        )
        assert response.status_code == 401
        assert response.json()["code"] == "SignatureMismatchError"

        with pytest.raises(client.BridgeError) as refused:
            await client.call(http, bridge.url, "discover", secret_key="another-key")
        assert (refused.value.status, refused.value.code, refused.value.transient) == (401, "SignatureMismatchError", False)
    finally:
        await http.aclose()


async def test_the_frameworks_own_trigger_runs_the_synced_workflow(
    bridge: NodeBridge, herald_url: str, api: httpx.AsyncClient, app: FastAPI, worker: Worker, tenancy: Tenancy
) -> None:
    subscriber = await create_subscriber(api)
    await sync(api, bridge)

    completed = subprocess.run(
        [node_packages(), str(NODE_DIR / "trigger.mjs"), herald_url, tenancy.api_key, subscriber["subscriberId"], "F-1"],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert completed.returncode == 0, completed.stderr
    answer = json.loads(completed.stdout.strip().splitlines()[-1])["data"]
    assert answer["status"] == "processed" and answer["acknowledged"] is True
    await settle(worker, app, answer["transactionId"])
    assert [message.content for message in await messages_of(app, answer["transactionId"])] == ["Order F-1", "After the note"]
