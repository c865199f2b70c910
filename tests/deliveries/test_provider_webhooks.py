"""Providers' own delivery webhooks: POST /webhooks/organizations/{org}/environments/{env}/{channel}/{integrationId}.

Each provider's events are posted as the provider sends them (the payload
shapes of its documentation), signed as it signs them, with no API key; the
message's delivery status and its execution details (source Webhook) are read
back from the store after each, and a refused request must have changed
nothing.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import FastAPI
from novu_py.models import MessageResponseDto, WebhookResultDto
from sqlalchemy import func, select

from herald.deliveries.inbound import ProviderFetch
from herald.deliveries.repository import DeliveryRepository
from herald.kit.errors import ServiceUnavailableError
from herald.kit.ids import new_id
from herald.kit.outbound import OutboundPolicy
from herald.kit.time import isoformat
from herald.models import DeliveryEventKey, ExecutionDetail, Job, Message
from herald.providers.email import ses_events
from herald.webhooks.events import LISTENING
from tests.conftest import BASE_URL, Tenancy, assert_error, make_client
from tests.fixtures import stores
from tests.fixtures.builders import create_integration, create_subscriber, insert_in_app_message
from tests.fixtures.peers import FLOOD_BYTES, FLOOD_IN_FLIGHT, FloodingHttpServer


@dataclass
class Setup:
    integration: dict[str, Any]
    message: Message
    path: str


async def set_up(
    api: httpx.AsyncClient,
    app: FastAPI,
    tenancy: Tenancy,
    provider_id: str,
    provider_message_id: str,
    *,
    channel: str = "email",
    configurations: dict[str, Any] | None = None,
    **integration_fields: Any,
) -> Setup:
    """An integration taking inbound events and a message it sent, known to the provider by ``provider_message_id``."""
    integration = await create_integration(
        api,
        providerId=provider_id,
        channel=channel,
        configurations={"inboundWebhookEnabled": True, **(configurations or {})},
        **integration_fields,
    )
    subscriber = await create_subscriber(api)
    message = await insert_in_app_message(
        app,
        subscriber,
        channel=channel,
        job_id=new_id(),
        provider_id=provider_id,
        provider_message_id=provider_message_id,
        email="ada@example.com" if channel == "email" else None,
        phone="+15005550006" if channel == "sms" else None,
    )
    path = (
        f"/webhooks/organizations/{tenancy.organization_id}/environments/{tenancy.environment_id}"
        f"/{channel}/{integration['_id']}"
    )
    return Setup(integration, message, path)


async def stored(app: FastAPI, message_id: str) -> tuple[Message, list[ExecutionDetail]]:
    async with app.state.sessionmaker() as session:
        message = (await session.execute(select(Message).where(Message.id == message_id))).scalar_one()
        details = (
            await session.execute(
                select(ExecutionDetail)
                .where(ExecutionDetail.job_id == message.job_id, ExecutionDetail.source == "Webhook")
                .order_by(ExecutionDetail.created_at, ExecutionDetail.id)
            )
        ).scalars()
        return message, list(details)


async def assert_unchanged(app: FastAPI, message: Message) -> None:
    after, details = await stored(app, message.id)
    assert after.delivery_status is None and after.status == "sent" and details == []


def results(response: httpx.Response) -> list[WebhookResultDto]:
    assert response.status_code == 200, response.text
    return [WebhookResultDto.model_validate(item) for item in response.json()["data"]]


# -- the route ---------------------------------------------------------------------------------


async def test_an_integration_of_another_organization_environment_or_channel_is_not_found(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-route")
    integration_id = setup.integration["_id"]
    body = [{"event": "delivered", "sg_message_id": "sg-route.filter1.1.0", "timestamp": 1767323045}]
    org, env = tenancy.organization_id, tenancy.environment_id
    for path in (
        f"/webhooks/organizations/{new_id()}/environments/{env}/email/{integration_id}",
        f"/webhooks/organizations/{org}/environments/{tenancy.production_environment_id}/email/{integration_id}",
        f"/webhooks/organizations/{org}/environments/{env}/sms/{integration_id}",
        f"/webhooks/organizations/{org}/environments/{env}/push/{integration_id}",
        f"/webhooks/organizations/{org}/environments/{env}/email/{new_id()}",
    ):
        response = await anonymous.post(path, json=body)
        assert_error(response, 404)
    await assert_unchanged(app, setup.message)
    # The right path records it.
    assert [result.event.status for result in results(await anonymous.post(setup.path, json=body))] == ["delivered"]


async def test_an_integration_without_inbound_webhooks_enabled_refuses_them(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-off", configurations={"inboundWebhookEnabled": False})
    body = [{"event": "bounce", "sg_message_id": "sg-off.filter1.1.0", "timestamp": 1767323045}]
    body_of_error = assert_error(await anonymous.post(setup.path, json=body), 400)
    assert "inboundWebhookEnabled" in body_of_error["message"]
    await assert_unchanged(app, setup.message)


async def test_a_deleted_integration_is_not_found(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-deleted")
    assert (await api.delete(f"/v1/integrations/{setup.integration['_id']}")).status_code == 200
    body = [{"event": "delivered", "sg_message_id": "sg-deleted.filter1.1.0"}]
    assert_error(await anonymous.post(setup.path, json=body), 404)
    await assert_unchanged(app, setup.message)


async def test_a_message_of_another_environment_is_not_touched(
    api: httpx.AsyncClient,
    production_api: httpx.AsyncClient,
    app: FastAPI,
    tenancy: Tenancy,
    anonymous: httpx.AsyncClient,
) -> None:
    """The provider's id is looked up in the integration's environment only."""
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-dev-only")
    production_integration = await create_integration(
        production_api, providerId="sendgrid", configurations={"inboundWebhookEnabled": True}
    )
    path = (
        f"/webhooks/organizations/{tenancy.organization_id}/environments/{tenancy.production_environment_id}"
        f"/email/{production_integration['_id']}"
    )
    body = [{"event": "delivered", "sg_message_id": "sg-dev-only.filter1.1.0", "timestamp": 1767323045}]
    assert results(await anonymous.post(path, json=body)) == []
    await assert_unchanged(app, setup.message)


# -- SendGrid ----------------------------------------------------------------------------------


def sendgrid_events(sg_id: str, now: int) -> list[dict[str, Any]]:
    """SendGrid's event webhook body (its documentation's sample events)."""
    common = {"email": "ada@example.com", "sg_message_id": f"{sg_id}.filterdrecv-5645d9c87f-6r2ch.16496.5515E0B88.0"}
    return [
        {
            **common,
            "timestamp": now - 30,
            "smtp-id": f"<{sg_id}@ismtpd-555>",
            "event": "processed",
            "category": "cat facts",
            "sg_event_id": "rbtnWrG1DVDGGGFHFyun0A==",
        },
        {
            **common,
            "timestamp": now - 20,
            "event": "delivered",
            "response": "250 OK",
            "sg_event_id": "rWVYmVk90MjZJ9iohOBa3w==",
        },
        {
            **common,
            "timestamp": now - 10,
            "event": "open",
            "useragent": "Mozilla/4.0",
            "ip": "255.255.255.255",
            "sg_event_id": "FOTFFO0ecsBE-zxFXfs6WA==",
        },
        {
            **common,
            "timestamp": now,
            "event": "click",
            "url": "https://sendgrid.com",
            "url_offset": {"index": 0},
            "sg_event_id": "kCAi1KttyQdEKHhdC-nuEA==",
        },
        # Mail of the account that Herald did not send: left out, not refused.
        {
            "email": "other@example.com",
            "timestamp": now,
            "event": "delivered",
            "sg_message_id": "not-herald.filter.1.0",
            "sg_event_id": "x",
        },
    ]


def sendgrid_key() -> tuple[ec.EllipticCurvePrivateKey, str]:
    private = ec.generate_private_key(ec.SECP256R1())
    public = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, base64.b64encode(public).decode()


def sendgrid_headers(private: ec.EllipticCurvePrivateKey, body: bytes, timestamp: int) -> dict[str, str]:
    signed = private.sign(str(timestamp).encode() + body, ec.ECDSA(hashes.SHA256()))
    return {
        "Content-Type": "application/json",
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signed).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": str(timestamp),
    }


async def test_sendgrid_unsigned_events_are_taken_when_no_key_is_set(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    setup = await set_up(api, app, tenancy, "sendgrid", "14c5d75ce93")
    now = int(time.time())
    found = results(await anonymous.post(setup.path, json=sendgrid_events("14c5d75ce93", now)))
    assert [(r.id, r.event.status) for r in found] == [
        ("14c5d75ce93", "accepted"),
        ("14c5d75ce93", "delivered"),
        ("14c5d75ce93", "opened"),
        ("14c5d75ce93", "clicked"),
    ]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "clicked" and after.status == "sent" and after.seen is True
    assert isoformat(after.delivery_status_at) == isoformat(after.last_seen_date)
    assert [(d.status, d.source, d.provider_id) for d in details] == [
        ("Pending", "Webhook", "sendgrid"),
        ("Success", "Webhook", "sendgrid"),
        ("Success", "Webhook", "sendgrid"),
        ("Success", "Webhook", "sendgrid"),
    ]
    assert details[1].raw["response"] == "250 OK"
    # The message answers show it (an extra field beside Novu's).
    response = await api.get("/v1/messages", params={"channel": "email", "limit": 100})
    assert response.status_code == 200, response.text
    answer = response.json()["data"]
    (shown,) = [item for item in answer if item["_id"] == after.id]
    MessageResponseDto.model_validate(shown)
    assert shown["deliveryStatus"] == "clicked" and shown["deliveryStatusAt"] == isoformat(after.delivery_status_at)


async def test_sendgrid_a_bounce_after_delivery_wins_and_a_late_delivered_does_not_undo_it(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-bounce")
    sg_message_id = "sg-bounce.filter0001.16648.5515E0B88.0"
    bounce = {
        "email": "ada@example.com",
        "timestamp": 1767323045,
        "event": "bounce",
        "sg_message_id": sg_message_id,
        "bounce_classification": "Invalid Address",
        "reason": "500 unknown recipient",
        "status": "5.0.0",
        "type": "bounce",
    }
    results(await anonymous.post(setup.path, json=[bounce]))
    results(await anonymous.post(setup.path, json=[{**bounce, "event": "delivered", "timestamp": 1767323000}]))
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and after.status == "error"
    assert after.error_id == "provider_bounced" and "500 unknown recipient" in (after.error_text or "")
    assert isoformat(after.delivery_status_at) == "2026-01-02T03:04:05.000Z"
    assert [d.status for d in details] == ["Failed", "Success"]


async def test_sendgrid_signed_events_are_checked_when_the_key_is_set(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    private, public = sendgrid_key()
    setup = await set_up(
        api, app, tenancy, "sendgrid", "sg-signed", configurations={"inboundWebhookSigningKey": public}
    )
    now = int(time.time())
    body = json.dumps(sendgrid_events("sg-signed", now)[1:2]).encode()

    # Unsigned, signed by another key, the body changed after signing, and an old timestamp: refused.
    other, _ = sendgrid_key()
    tampered = body.replace(b"delivered", b"bounce")
    for content, headers in (
        (body, {"Content-Type": "application/json"}),
        (body, sendgrid_headers(other, body, now)),
        (tampered, sendgrid_headers(private, body, now)),
        (body, sendgrid_headers(private, body, now - 3600)),
    ):
        assert_error(await anonymous.post(setup.path, content=content, headers=headers), 401)
    await assert_unchanged(app, setup.message)

    found = results(await anonymous.post(setup.path, content=body, headers=sendgrid_headers(private, body, now)))
    assert [r.event.status for r in found] == ["delivered"]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered" and [d.status for d in details] == ["Success"]


# -- Twilio ------------------------------------------------------------------------------------


def twilio_form(sid: str, status: str, **extra: str) -> dict[str, str]:
    """Twilio's status callback parameters (its documentation's example)."""
    return {
        "AccountSid": "AC0000",
        "ApiVersion": "2010-04-01",
        "From": "+15005550001",
        "MessageSid": sid,
        "MessageStatus": status,
        "SmsSid": sid,
        "SmsStatus": status,
        "To": "+15005550006",
        **extra,
    }


def twilio_signature(url: str, form: dict[str, str], token: str) -> str:
    """As Twilio's documentation computes it: the URL, then each parameter's name and value sorted by name."""
    content = url + "".join(f"{name}{form[name]}" for name in sorted(form))
    return base64.b64encode(hmac.new(token.encode(), content.encode(), hashlib.sha1).digest()).decode()


def twilio_post(url: str, form: dict[str, str], token: str = "twilio-token") -> dict[str, Any]:
    return {
        "content": httpx.QueryParams(form).__str__().encode(),
        "headers": {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Twilio-Signature": twilio_signature(url, form, token),
        },
    }


async def test_twilio_status_callbacks_are_taken_only_signed_with_the_auth_token(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    sid = "SM1f0e8ae6ade43cb3c0ce4525424e404f"
    setup = await set_up(api, app, tenancy, "twilio", sid, channel="sms")
    url = f"{BASE_URL}{setup.path}"
    delivered = twilio_form(sid, "delivered")

    unsigned = twilio_post(url, delivered)
    del unsigned["headers"]["X-Twilio-Signature"]
    forged = twilio_post(url, delivered, token="not-the-token")
    other_url = twilio_post(f"https://elsewhere.example{setup.path}", delivered)
    changed = twilio_post(url, delivered)
    changed["content"] = httpx.QueryParams(twilio_form(sid, "undelivered")).__str__().encode()
    for request in (unsigned, forged, other_url, changed):
        assert_error(await anonymous.post(setup.path, **request), 401)
    await assert_unchanged(app, setup.message)

    assert [r.event.status for r in results(await anonymous.post(setup.path, **twilio_post(url, delivered)))] == [
        "delivered"
    ]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered" and [(d.status, d.provider_id) for d in details] == [
        ("Success", "twilio")
    ]
    assert details[0].raw["MessageStatus"] == "delivered"


async def test_twilio_undelivered_is_a_bounce_with_the_error_code(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    sid = "SM0000000000000000000000000000undl"
    setup = await set_up(api, app, tenancy, "twilio", sid, channel="sms")
    form = twilio_form(sid, "undelivered", ErrorCode="30003")
    results(await anonymous.post(setup.path, **twilio_post(f"{BASE_URL}{setup.path}", form)))
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and after.status == "error" and "30003" in (after.error_text or "")
    assert [d.status for d in details] == ["Failed"]


async def test_twilio_signature_is_over_the_public_url_when_set(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    sid = "SM00000000000000000000000000proxy"
    setup = await set_up(api, app, tenancy, "twilio", sid, channel="sms")
    settings = app.state.settings
    app.state.settings = replace(settings, public_url="https://herald.example.com/")
    try:
        form = twilio_form(sid, "delivered")
        # Signed over the address Herald saw: not what Twilio called behind the proxy.
        assert_error(await anonymous.post(setup.path, **twilio_post(f"{BASE_URL}{setup.path}", form)), 401)
        await assert_unchanged(app, setup.message)
        results(await anonymous.post(setup.path, **twilio_post(f"https://herald.example.com{setup.path}", form)))
    finally:
        app.state.settings = settings
    after, _ = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered"


# -- Mailgun -----------------------------------------------------------------------------------


def mailgun_body(message_id: str, event: str, signing_key: str | None, timestamp: int, **data: Any) -> dict[str, Any]:
    """Mailgun's webhook body (its documentation's sample), signed with ``signing_key`` when given.

    Each event has an id of its own, as Mailgun gives it (``event-data.id``: what tells a copy from another event),
    and each signature a random token of 50 characters, as Mailgun makes them.
    """
    token = uuid.uuid4().hex + uuid.uuid4().hex[:18]
    signed = hmac.new((signing_key or "x").encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    return {
        "signature": {"timestamp": str(timestamp), "token": token, "signature": signed},
        "event-data": {
            "id": uuid.uuid4().hex[:22],
            "timestamp": 1767323045.908181,
            "log-level": "info",
            "event": event,
            "recipient": "ada@example.com",
            "envelope": {"sender": "bob@mg.example.com", "transport": "smtp", "targets": "ada@example.com"},
            "message": {"headers": {"to": "ada@example.com", "message-id": message_id, "from": "bob@mg.example.com"}},
            "delivery-status": {"code": 250, "message": "OK", "attempt-no": 1, "description": ""},
            **data,
        },
    }


async def test_mailgun_events_unsigned_without_a_key_and_signed_with_one(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    # Mailgun answers a send with the id in angle brackets; its events name it without.
    mailgun_id = "20260102030405.1.ABCDEF@mg.example.com"
    setup = await set_up(api, app, tenancy, "mailgun", f"<{mailgun_id}>")
    now = int(time.time())
    found = results(await anonymous.post(setup.path, json=mailgun_body(mailgun_id, "delivered", None, now)))
    assert [(r.id, r.event.status) for r in found] == [(f"<{mailgun_id}>", "delivered")]

    key = "key-signing-0123456789abcdef"
    update = await api.put(
        f"/v1/integrations/{setup.integration['_id']}",
        json={"configurations": {"inboundWebhookEnabled": True, "inboundWebhookSigningKey": key}},
    )
    assert update.status_code == 200, update.text
    failed = {
        "severity": "permanent",
        "reason": "bounce",
        "delivery-status": {"code": 550, "message": "No such user", "description": "mailbox unavailable"},
    }
    unsigned = mailgun_body(mailgun_id, "failed", None, now, **failed)
    del unsigned["signature"]
    for body in (
        unsigned,
        mailgun_body(mailgun_id, "failed", "another-key", now, **failed),
        mailgun_body(mailgun_id, "failed", key, now - 3600, **failed),
    ):
        assert_error(await anonymous.post(setup.path, json=body), 401)
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered" and after.status == "sent" and len(details) == 1

    results(await anonymous.post(setup.path, json=mailgun_body(mailgun_id, "failed", key, now, **failed)))
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and "mailbox unavailable" in (after.error_text or "")
    assert [d.status for d in details] == ["Success", "Failed"]


def mailgun_signed(body: dict[str, Any], signing_key: str, timestamp: int | str, token: str) -> dict[str, Any]:
    """``body`` carrying another signature: ``token`` at ``timestamp``, signed with ``signing_key``."""
    signed = hmac.new(signing_key.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    return {**body, "signature": {"timestamp": str(timestamp), "token": token, "signature": signed}}


MAILGUN_KEY = "key-signing-0123456789abcdef"
MAILGUN_BOUNCE = {
    "severity": "permanent",
    "reason": "bounce",
    "delivery-status": {"code": 550, "message": "No such user", "description": "mailbox unavailable"},
}


async def test_mailgun_a_signature_replayed_with_another_body_is_refused(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    """Mailgun signs its timestamp and token, not the body: each token is taken once, by every API process."""
    from herald.app import create_app

    mailgun_id = "20260102030405.4.REPLAY@mg.example.com"
    setup = await set_up(
        api, app, tenancy, "mailgun", f"<{mailgun_id}>", configurations={"inboundWebhookSigningKey": MAILGUN_KEY}
    )
    now = int(time.time())
    delivered = mailgun_body(mailgun_id, "delivered", MAILGUN_KEY, now)
    assert [r.event.status for r in results(await anonymous.post(setup.path, json=delivered))] == ["delivered"]

    # The captured signature with a body of the attacker's: another event, which the event keys would take.
    forged = {**mailgun_body(mailgun_id, "failed", None, now, **MAILGUN_BOUNCE), "signature": delivered["signature"]}
    body = assert_error(await anonymous.post(setup.path, json=forged), 401)
    assert "used already" in body["message"]
    # Another API process on the same store refuses it too: the spent token is in the store.
    other_process = create_app(app.state.settings)
    try:
        async with make_client(other_process) as other:
            assert_error(await other.post(setup.path, json=forged), 401)
    finally:
        await other_process.state.engine.dispose()
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered" and [d.status for d in details] == ["Success"]

    # A timestamp that is not a finite number is refused as any unreadable one.
    for timestamp in ("nan", "inf"):
        odd = mailgun_signed(forged, MAILGUN_KEY, timestamp, f"token-{timestamp}")
        assert_error(await anonymous.post(setup.path, json=odd), 401)
    # Out of the window, a fresh token is refused as before.
    stale = mailgun_signed(forged, MAILGUN_KEY, now - 3600, "a-fresh-but-stale-token")
    assert "seconds from now" in assert_error(await anonymous.post(setup.path, json=stale), 401)["message"]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered" and [d.status for d in details] == ["Success"]

    # A request refused after its signature was checked (a body Mailgun would not send) spends nothing:
    # its transaction is rolled back, so a retry with the same token is taken.
    retried = mailgun_signed(forged, MAILGUN_KEY, now, "a-fresh-token")
    unreadable = {key: value for key, value in retried.items() if key != "event-data"}
    assert_error(await anonymous.post(setup.path, json=unreadable), 400)
    assert [r.event.status for r in results(await anonymous.post(setup.path, json=retried))] == ["bounced"]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and [d.status for d in details] == ["Success", "Failed"]


async def test_another_environments_key_cannot_read_the_signing_key_to_forge_events(
    api: httpx.AsyncClient,
    production_api: httpx.AsyncClient,
    app: FastAPI,
    tenancy: Tenancy,
    anonymous: httpx.AsyncClient,
) -> None:
    """A Development key reads Production's integrations (the lists are organization-wide), never its signing key."""
    mailgun_id = "20260102030405.5.PRODUCTION@mg.example.com"
    production = await set_up(
        production_api,
        app,
        replace(tenancy, environment_id=tenancy.production_environment_id),
        "mailgun",
        f"<{mailgun_id}>",
        active=True,
        credentials={"apiKey": "key-production", "domain": "mg.example.com"},
        configurations={"inboundWebhookSigningKey": MAILGUN_KEY},
    )
    shown = set()
    for path in ("/v1/integrations", "/v1/integrations/active"):
        response = await api.get(path)
        assert response.status_code == 200, response.text
        [listed] = [item for item in response.json()["data"] if item["_id"] == production.integration["_id"]]
        shown.add(listed["configurations"]["inboundWebhookSigningKey"])
    now = int(time.time())
    for key in shown:
        forged = mailgun_body(mailgun_id, "failed", key, now, **MAILGUN_BOUNCE)
        assert_error(await anonymous.post(production.path, json=forged), 401)
    await assert_unchanged(app, production.message)
    assert shown == {"****"}
    # Production's own key still reads Mailgun's events: the sealed key is opened to check them.
    signed = mailgun_body(mailgun_id, "failed", MAILGUN_KEY, now, **MAILGUN_BOUNCE)
    assert [r.event.status for r in results(await anonymous.post(production.path, json=signed))] == ["bounced"]


async def test_mailgun_a_temporary_failure_is_not_a_bounce(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    mailgun_id = "20260102030405.2.TEMP@mg.example.com"
    setup = await set_up(api, app, tenancy, "mailgun", f"<{mailgun_id}>")
    body = mailgun_body(mailgun_id, "failed", None, int(time.time()), severity="temporary", reason="generic")
    assert [r.event.status for r in results(await anonymous.post(setup.path, json=body))] == ["deferred"]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status is None and after.status == "sent" and [d.status for d in details] == ["Pending"]


# -- Postmark ----------------------------------------------------------------------------------

POSTMARK_CREDENTIALS = {"apiKey": "postmark-token", "user": "hooks", "password": "s3cret-webhook-password"}


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def postmark_records(message_id: str) -> list[dict[str, Any]]:
    """Postmark's webhook records (its documentation's samples), one per RecordType."""
    return [
        {
            "RecordType": "Delivery",
            "ServerID": 23,
            "MessageStream": "outbound",
            "MessageID": message_id,
            "Recipient": "ada@example.com",
            "Tag": "welcome-email",
            "DeliveredAt": "2026-01-02T03:04:05.9070259Z",
            "Details": "Test delivery webhook details",
            "Metadata": {},
        },
        {
            "RecordType": "Open",
            "MessageStream": "outbound",
            "FirstOpen": True,
            "Client": {"Name": "Chrome"},
            "OS": {"Name": "OS X"},
            "Platform": "WebMail",
            "UserAgent": "Mozilla/5.0",
            "Geo": {},
            "ReceivedAt": "2026-01-02T03:05:00.1234567Z",
            "Tag": "welcome-email",
            "Recipient": "ada@example.com",
            "MessageID": message_id,
            "Metadata": {},
        },
        {
            "RecordType": "Click",
            "MessageStream": "outbound",
            "ClickLocation": "HTML",
            "Platform": "Desktop",
            "OriginalLink": "https://example.com",
            "MessageID": message_id,
            "ReceivedAt": "2026-01-02T03:06:00Z",
            "Recipient": "ada@example.com",
            "Metadata": {},
        },
        {
            "RecordType": "SpamComplaint",
            "ID": 42,
            "Type": "SpamComplaint",
            "TypeCode": 512,
            "Name": "Spam complaint",
            "MessageID": message_id,
            "ServerID": 23,
            "Description": "The subscriber explicitly marked this message as spam.",
            "Email": "ada@example.com",
            "From": "sender@example.com",
            "BouncedAt": "2026-01-02T03:07:00Z",
            "MessageStream": "outbound",
        },
    ]


async def test_postmark_records_are_taken_only_with_the_webhook_user_and_password(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    message_id = "883953f4-6105-42a2-a16a-77a8eac79483"
    setup = await set_up(api, app, tenancy, "postmark", message_id, credentials=POSTMARK_CREDENTIALS)
    delivery, opened, clicked, complaint = postmark_records(message_id)
    for headers in ({}, basic("hooks", "wrong"), {"Authorization": "Bearer postmark-token"}):
        assert_error(await anonymous.post(setup.path, json=delivery, headers=headers), 401)
    await assert_unchanged(app, setup.message)

    auth = basic("hooks", "s3cret-webhook-password")
    for record in (delivery, opened, clicked):
        results(await anonymous.post(setup.path, json=record, headers=auth))
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "clicked" and isoformat(after.delivery_status_at) == "2026-01-02T03:06:00.000Z"
    assert isoformat(after.first_seen_date) == "2026-01-02T03:05:00.123Z"
    results(await anonymous.post(setup.path, json=complaint, headers=auth))
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "complained"
    assert [d.status for d in details] == ["Success", "Success", "Success", "Warning"]


async def test_postmark_refuses_everything_while_the_integration_has_no_webhook_password(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    message_id = "00000000-0000-0000-0000-000000000001"
    setup = await set_up(api, app, tenancy, "postmark", message_id)
    response = await anonymous.post(setup.path, json=postmark_records(message_id)[0], headers=basic("a", "b"))
    assert "password" in assert_error(response, 401)["message"]
    await assert_unchanged(app, setup.message)


async def test_postmark_a_hard_bounce_is_a_bounce_and_a_soft_one_is_not(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    message_id = "00000000-0000-0000-0000-000000000002"
    setup = await set_up(api, app, tenancy, "postmark", message_id, credentials=POSTMARK_CREDENTIALS)
    bounce = {
        "RecordType": "Bounce",
        "ID": 4323372036854775807,
        "Type": "SoftBounce",
        "TypeCode": 4096,
        "Name": "Soft bounce",
        "MessageID": message_id,
        "ServerID": 23,
        "MessageStream": "outbound",
        "Description": "The server could not temporarily deliver your message",
        "Details": "mailbox full",
        "Email": "ada@example.com",
        "BouncedAt": "2026-01-02T03:04:05Z",
        "Inactive": False,
    }
    auth = basic("hooks", "s3cret-webhook-password")
    results(await anonymous.post(setup.path, json=bounce, headers=auth))
    after, _ = await stored(app, setup.message.id)
    assert after.delivery_status is None and after.status == "sent"
    hard = {**bounce, "Type": "HardBounce", "TypeCode": 1, "Details": "smtp;550 5.1.1 unknown user"}
    results(await anonymous.post(setup.path, json=hard, headers=auth))
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and "unknown user" in (after.error_text or "")
    assert [d.status for d in details] == ["Pending", "Failed"]


# -- Resend (Svix) -----------------------------------------------------------------------------

RESEND_SECRET = "whsec_" + base64.b64encode(b"resend-webhook-secret-32-bytes!!").decode()


def svix_headers(
    body: bytes, timestamp: int, secret: str = RESEND_SECRET, svix_id: str = "msg_2Lh9KRb0pzN4LePd"
) -> dict[str, str]:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = base64.b64encode(hmac.new(key, f"{svix_id}.{timestamp}.".encode() + body, hashlib.sha256).digest())
    return {
        "Content-Type": "application/json",
        "svix-id": svix_id,
        "svix-timestamp": str(timestamp),
        "svix-signature": f"v1,bm90LXRoaXMtb25l v1,{signed.decode()}",
    }


def resend_event(email_id: str, kind: str, **data: Any) -> bytes:
    """Resend's webhook event (its documentation's sample)."""
    return json.dumps(
        {
            "type": kind,
            "created_at": "2026-01-02T03:04:05.126Z",
            "data": {
                "created_at": "2026-01-02T03:04:00.000Z",
                "email_id": email_id,
                "from": "Acme <onboarding@resend.dev>",
                "to": ["ada@example.com"],
                "subject": "Sending this example",
                **data,
            },
        }
    ).encode()


async def test_resend_events_are_taken_only_signed_and_recent(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    email_id = "56761188-7520-42d8-8898-ff6fc54ce618"
    setup = await set_up(
        api, app, tenancy, "resend", email_id, configurations={"inboundWebhookSigningKey": RESEND_SECRET}
    )
    body = resend_event(email_id, "email.bounced", bounce={"message": "The recipient's mailbox does not exist"})
    now = int(time.time())
    unsigned = {"Content-Type": "application/json"}
    forged = svix_headers(body, now, secret="whsec_" + base64.b64encode(b"another-secret").decode())
    replayed = svix_headers(body, now - 600)
    for headers in (unsigned, forged, replayed):
        assert_error(await anonymous.post(setup.path, content=body, headers=headers), 401)
    changed = resend_event(email_id, "email.delivered")
    assert_error(await anonymous.post(setup.path, content=changed, headers=svix_headers(body, now)), 401)
    await assert_unchanged(app, setup.message)

    found = results(await anonymous.post(setup.path, content=body, headers=svix_headers(body, now)))
    assert [(r.id, r.event.status) for r in found] == [(email_id, "bounced")]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and "mailbox does not exist" in (after.error_text or "")
    assert isoformat(after.delivery_status_at) == "2026-01-02T03:04:05.126Z"
    assert [(d.status, d.provider_id) for d in details] == [("Failed", "resend")]


async def test_resend_refuses_everything_while_the_integration_has_no_secret(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    email_id = "56761188-7520-42d8-8898-ff6fc54ce619"
    setup = await set_up(api, app, tenancy, "resend", email_id)
    body = resend_event(email_id, "email.delivered")
    response = await anonymous.post(setup.path, content=body, headers=svix_headers(body, int(time.time())))
    assert "inboundWebhookSigningKey" in assert_error(response, 401)["message"]
    await assert_unchanged(app, setup.message)


# -- handed on to the application's webhooks ---------------------------------------------------


async def test_deliveries_and_bounces_are_handed_on_to_the_outbound_webhooks(
    api: httpx.AsyncClient,
    app: FastAPI,
    tenancy: Tenancy,
    anonymous: httpx.AsyncClient,
) -> None:
    """Each delivered and bounced message is queued to the application's endpoint once (herald/webhooks)."""
    LISTENING.forget(tenancy.environment_id)
    endpoint = await api.post(
        "/v1/webhooks/endpoints", json={"url": "https://app.example.com/hooks", "eventTypes": ["message.delivered", "message.bounced"]}
    )
    assert endpoint.status_code == 201, endpoint.text

    async def queued() -> list[tuple[str, str]]:
        async with app.state.sessionmaker() as session:
            jobs = (await session.execute(select(Job).where(Job.kind == "webhook", Job.environment_id == tenancy.environment_id))).scalars()
            events = [json.loads(job.data["body"]) for job in jobs]
        return sorted((event["type"], event["data"]["messageId"]) for event in events)

    delivered = await set_up(api, app, tenancy, "sendgrid", "sg-handed-1")
    bounced = await create_subscriber(api)
    bounced_message = await insert_in_app_message(
        app, bounced, channel="email", job_id=new_id(), provider_id="sendgrid", provider_message_id="sg-handed-2"
    )
    body = [
        {"event": "delivered", "sg_message_id": "sg-handed-1.f.1.0", "timestamp": 1767323045},
        {"event": "open", "sg_message_id": "sg-handed-1.f.1.0", "timestamp": 1767323046},
        {"event": "delivered", "sg_message_id": "sg-handed-2.f.1.0", "timestamp": 1767323045},
        {"event": "bounce", "sg_message_id": "sg-handed-2.f.1.0", "timestamp": 1767323047, "reason": "550"},
    ]
    results(await anonymous.post(delivered.path, json=body))
    expected = sorted(
        [("message.delivered", delivered.message.id), ("message.delivered", bounced_message.id), ("message.bounced", bounced_message.id)]
    )
    assert await queued() == expected
    # The provider sending the batch again (a retry) moves no status: nothing is handed on twice.
    results(await anonymous.post(delivered.path, json=body))
    assert await queued() == expected


# -- Telnyx ------------------------------------------------------------------------------------


def telnyx_event(message_id: str, status: str, errors: list[dict[str, Any]] | None = None) -> bytes:
    """Telnyx's message.finalized event (its documentation's sample)."""
    return json.dumps(
        {
            "data": {
                "event_type": "message.finalized",
                "id": "86f58db9-0734-4ff2-a5a5-6ec4bb2a1f52",
                "occurred_at": "2026-01-02T03:04:05.588+00:00",
                "payload": {
                    "completed_at": "2026-01-02T03:04:05.588+00:00",
                    "direction": "outbound",
                    "encoding": "GSM-7",
                    "errors": errors or [],
                    "from": {"carrier": "TELNYX LLC", "line_type": "VoIP", "phone_number": "+15005550001"},
                    "id": message_id,
                    "parts": 1,
                    "record_type": "message",
                    "text": "Hello",
                    "to": [
                        {
                            "carrier": "T-MOBILE USA, INC.",
                            "line_type": "Wireless",
                            "phone_number": "+15005550006",
                            "status": status,
                        }
                    ],
                    "type": "SMS",
                },
                "record_type": "event",
            },
            "meta": {"attempt": 1, "delivered_to": "https://herald.example.com/webhooks/..."},
        }
    ).encode()


def telnyx_headers(private: Ed25519PrivateKey, body: bytes, timestamp: int) -> dict[str, str]:
    signed = private.sign(f"{timestamp}|".encode() + body)
    return {
        "Content-Type": "application/json",
        "telnyx-signature-ed25519": base64.b64encode(signed).decode(),
        "telnyx-timestamp": str(timestamp),
    }


def ed25519_key() -> tuple[Ed25519PrivateKey, str]:
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return private, base64.b64encode(public).decode()


async def test_telnyx_events_are_taken_only_signed_and_recent(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    message_id = "40017f8e-49bd-4f16-9e3d-ef103f916228"
    private, public = ed25519_key()
    setup = await set_up(
        api, app, tenancy, "telnyx", message_id, channel="sms", configurations={"inboundWebhookSigningKey": public}
    )
    body = telnyx_event(message_id, "delivery_failed", [{"code": "40002", "title": "Blocked as spam - temporary"}])
    now = int(time.time())
    other, _ = ed25519_key()
    changed = telnyx_event(message_id, "delivered")
    for content, headers in (
        (body, {"Content-Type": "application/json"}),
        (body, telnyx_headers(other, body, now)),
        (changed, telnyx_headers(private, body, now)),
        (body, telnyx_headers(private, body, now - 600)),
    ):
        assert_error(await anonymous.post(setup.path, content=content, headers=headers), 401)
    await assert_unchanged(app, setup.message)

    found = results(await anonymous.post(setup.path, content=body, headers=telnyx_headers(private, body, now)))
    assert [(r.id, r.event.status) for r in found] == [(message_id, "undelivered")]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and "Blocked as spam" in (after.error_text or "")
    assert isoformat(after.delivery_status_at) == "2026-01-02T03:04:05.588Z"
    assert [(d.status, d.provider_id) for d in details] == [("Failed", "telnyx")]


async def test_telnyx_refuses_everything_while_the_integration_has_no_public_key(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    message_id = "40017f8e-49bd-4f16-9e3d-ef103f916229"
    setup = await set_up(api, app, tenancy, "telnyx", message_id, channel="sms")
    private, _ = ed25519_key()
    body = telnyx_event(message_id, "delivered")
    response = await anonymous.post(setup.path, content=body, headers=telnyx_headers(private, body, int(time.time())))
    assert "inboundWebhookSigningKey" in assert_error(response, 401)["message"]
    await assert_unchanged(app, setup.message)


# -- Plivo -------------------------------------------------------------------------------------


def plivo_form(uuid: str, status: str, **extra: str) -> dict[str, str]:
    """Plivo's message status callback parameters (its documentation's example)."""
    return {
        "From": "+15005550001",
        "To": "+15005550006",
        "Status": status,
        "MessageUUID": uuid,
        "ParentMessageUUID": uuid,
        "PartInfo": "1 of 1",
        "TotalAmount": "0.00350",
        "TotalRate": "0.00350",
        "Units": "1",
        "MessageTime": "2026-01-02 03:04:05",
        "ErrorCode": "",
        **extra,
    }


def plivo_post(
    url: str, form: dict[str, str], token: str = "plivo-token", nonce: str = "05429567804466091622"
) -> dict[str, Any]:
    """Signed as plivo-python's validate_v3_signature checks it (a POST to a URL without a query)."""
    content = f"{url}?" + "".join(f"{name}{form[name]}" for name in sorted(form)) + f".{nonce}"
    signed = base64.b64encode(hmac.new(token.encode(), content.encode(), hashlib.sha256).digest()).decode()
    return {
        "content": str(httpx.QueryParams(form)).encode(),
        "headers": {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Plivo-Signature-V3": f"bm90LXRoaXM=,{signed}",
            "X-Plivo-Signature-V3-Nonce": nonce,
        },
    }


async def test_plivo_status_callbacks_are_taken_only_signed_with_the_auth_token(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    uuid = "db3ce55a-7f1d-11e1-8ea7-1231380bc196"
    setup = await set_up(api, app, tenancy, "plivo", uuid, channel="sms")
    url = f"{BASE_URL}{setup.path}"
    failed = plivo_form(uuid, "undelivered", ErrorCode="200")

    unsigned = plivo_post(url, failed)
    del unsigned["headers"]["X-Plivo-Signature-V3"]
    other_nonce = plivo_post(url, failed)
    other_nonce["headers"]["X-Plivo-Signature-V3-Nonce"] = "1"
    changed = plivo_post(url, failed)
    changed["content"] = str(httpx.QueryParams(plivo_form(uuid, "delivered"))).encode()
    for request in (unsigned, plivo_post(url, failed, token="another-token"), other_nonce, changed):
        assert_error(await anonymous.post(setup.path, **request), 401)
    await assert_unchanged(app, setup.message)

    found = results(await anonymous.post(setup.path, **plivo_post(url, failed)))
    assert [(r.id, r.event.status) for r in found] == [(uuid, "undelivered")]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and "Plivo error 200" in (after.error_text or "")
    assert [(d.status, d.provider_id) for d in details] == [("Failed", "plivo")]


# -- Vonage ------------------------------------------------------------------------------------


def vonage_receipt(message_id: str, status: str, **extra: str) -> dict[str, str]:
    """Vonage's SMS delivery receipt (its documentation's example)."""
    return {
        "msisdn": "15005550006",
        "to": "Herald",
        "network-code": "12345",
        "messageId": message_id,
        "price": "0.03330000",
        "status": status,
        "scts": "2601020304",
        "err-code": "0",
        "api-key": "vonage-key",
        "message-timestamp": "2026-01-02 03:04:05",
        **extra,
    }


def vonage_signed(params: dict[str, str], secret: str, method: str | None, timestamp: int) -> dict[str, str]:
    """Signed as Vonage's SDKs compute ``sig`` (MD5 hash when ``method`` is None, else that HMAC)."""
    params = {**params, "timestamp": str(timestamp)}
    content = "".join(f"&{k}={params[k].replace('&', '_').replace('=', '_')}" for k in sorted(params)).encode()
    if method is None:
        sig = hashlib.md5(content + secret.encode()).hexdigest()
    else:
        sig = hmac.new(secret.encode(), content, method).hexdigest()
    return {**params, "sig": sig}


async def test_vonage_receipts_unsigned_without_a_secret_and_signed_with_one(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    message_id = "0A0000000123ABCD1"
    setup = await set_up(api, app, tenancy, "nexmo", message_id, channel="sms")
    form = vonage_receipt(message_id, "accepted")
    found = results(await anonymous.post(setup.path, data=form))
    assert [(r.id, r.event.status) for r in found] == [(message_id, "accepted")]

    secret = "vonage-signature-secret"
    update = await api.put(
        f"/v1/integrations/{setup.integration['_id']}",
        json={"configurations": {"inboundWebhookEnabled": True, "inboundWebhookSigningKey": secret}},
    )
    assert update.status_code == 200, update.text
    now = int(time.time())
    delivered = vonage_receipt(message_id, "delivered")
    tampered = {**vonage_signed(delivered, secret, "sha256", now), "status": "failed"}
    for params in (
        delivered,
        vonage_signed(delivered, "another-secret", "sha256", now),
        tampered,
        vonage_signed(delivered, secret, "sha256", now - 3600),
    ):
        assert_error(await anonymous.post(setup.path, data=params), 401)
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status is None and [d.status for d in details] == ["Pending"]

    # The MD5 hash (Vonage's default) as a form, and a SHA-512 HMAC as JSON.
    results(await anonymous.post(setup.path, data=vonage_signed(delivered, secret, None, now)))
    failed = vonage_receipt(message_id, "failed", **{"err-code": "6"})
    results(await anonymous.post(setup.path, json=vonage_signed(failed, secret, "sha512", now)))
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "dropped" and "Vonage error 6" in (after.error_text or "")
    assert [d.status for d in details] == ["Pending", "Success", "Failed"]
    assert "sig" not in details[1].raw and "api-key" not in details[1].raw


# -- Amazon SES through SNS --------------------------------------------------------------------

SNS_CERT_URL = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-6aad65c2f9911b05cd53efda11f913f9.pem"
TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:ses-events"


@dataclass
class FakeSns:
    """SNS's signing certificate, served to Herald's fetch, and the URLs Herald fetched."""

    key: rsa.RSAPrivateKey
    pem: bytes
    fetched: list[str]

    async def fetch(self, url: str) -> bytes:
        self.fetched.append(url)
        return self.pem if url.endswith(".pem") else b"<ConfirmSubscriptionResponse/>"

    def sign(self, message: dict[str, Any], version: str = "1") -> dict[str, Any]:
        """Signed as SNS signs: each signed field's name and value on their own lines, RSA with SHA1 (v1) or SHA256."""
        fields = (
            ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
            if message["Type"] == "Notification"
            else ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type")
        )
        content = "".join(f"{name}\n{message[name]}\n" for name in fields if name in message).encode()
        algorithm = hashes.SHA1() if version == "1" else hashes.SHA256()
        signed = self.key.sign(content, padding.PKCS1v15(), algorithm)
        return {
            **message,
            "SignatureVersion": version,
            "Signature": base64.b64encode(signed).decode(),
            "SigningCertURL": SNS_CERT_URL,
        }


@pytest.fixture
def sns(app: FastAPI) -> Any:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    fake = FakeSns(key, certificate.public_bytes(serialization.Encoding.PEM), [])
    ses_events._certificates.clear()
    previous = getattr(app.state, "provider_fetch", None)
    app.state.provider_fetch = fake.fetch
    yield fake
    app.state.provider_fetch = previous
    ses_events._certificates.clear()


def sns_notification(ses_event: dict[str, Any], timestamp: datetime | None = None) -> dict[str, Any]:
    """An SNS notification carrying ``ses_event``, with a MessageId of its own as SNS gives every notification."""
    return {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "TopicArn": TOPIC_ARN,
        "Message": json.dumps(ses_event),
        "Timestamp": isoformat(timestamp or datetime.now(UTC)),
        "UnsubscribeURL": "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe",
    }


def ses_event(message_id: str, kind: str, **section: Any) -> dict[str, Any]:
    """An SES event as a configuration set publishes it (SES's documentation's samples)."""
    return {
        "eventType": kind,
        "mail": {
            "timestamp": "2026-01-02T03:04:00.000Z",
            "source": "sender@example.com",
            "sendingAccountId": "123456789012",
            "messageId": message_id,
            "destination": ["ada@example.com"],
            "headersTruncated": False,
        },
        **section,
    }


async def post_sns(anonymous: httpx.AsyncClient, path: str, message: dict[str, Any]) -> httpx.Response:
    # SNS posts JSON as text/plain, with the message's type in a header.
    return await anonymous.post(
        path,
        content=json.dumps(message).encode(),
        headers={"Content-Type": "text/plain; charset=UTF-8", "x-amz-sns-message-type": message["Type"]},
    )


async def test_ses_events_through_sns_are_taken_only_signed_by_sns(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient, sns: FakeSns
) -> None:
    message_id = "010701234567890a-1234abcd-5678-90ef-1234-567890abcdef-000000"
    setup = await set_up(api, app, tenancy, "ses", message_id)
    bounce = ses_event(
        message_id,
        "Bounce",
        bounce={
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "bouncedRecipients": [
                {
                    "emailAddress": "ada@example.com",
                    "action": "failed",
                    "status": "5.1.1",
                    "diagnosticCode": "smtp; 550 5.1.1 user unknown",
                }
            ],
            "timestamp": "2026-01-02T03:04:05.000Z",
            "feedbackId": "0102015f-1234",
        },
    )
    signed = sns.sign(sns_notification(bounce))
    unsigned = {key: value for key, value in signed.items() if key != "Signature"}
    other = FakeSns(rsa.generate_private_key(public_exponent=65537, key_size=2048), b"", [])
    elsewhere = {**signed, "SigningCertURL": "https://attacker.example.com/sns.pem"}
    changed = {**signed, "Message": json.dumps(ses_event(message_id, "Delivery"))}
    replayed = sns.sign(sns_notification(bounce, datetime.now(UTC) - timedelta(hours=2)))
    for message in (unsigned, other.sign(sns_notification(bounce)), elsewhere, changed, replayed):
        assert_error(await post_sns(anonymous, setup.path, message), 401)
    await assert_unchanged(app, setup.message)
    assert "https://attacker.example.com/sns.pem" not in sns.fetched

    found = results(await post_sns(anonymous, setup.path, signed))
    assert [(r.id, r.event.status) for r in found] == [(message_id, "bounced")]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and "user unknown" in (after.error_text or "")
    assert isoformat(after.delivery_status_at) == "2026-01-02T03:04:05.000Z"
    assert [(d.status, d.provider_id) for d in details] == [("Failed", "ses")]
    # Signature version 2 (SHA256), and the certificate fetched once.
    results(
        await post_sns(
            anonymous,
            setup.path,
            sns.sign(
                sns_notification(
                    ses_event(message_id, "Complaint", complaint={"timestamp": "2026-01-02T03:05:00.000Z"})
                ),
                version="2",
            ),
        )
    )
    after, _ = await stored(app, setup.message.id)
    assert after.delivery_status == "complained"
    assert sns.fetched == [SNS_CERT_URL]


async def test_an_sns_subscription_is_confirmed_only_when_signed_by_sns(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient, sns: FakeSns
) -> None:
    setup = await set_up(api, app, tenancy, "ses", "ses-subscription")
    subscribe_url = (
        "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=" + TOPIC_ARN + "&Token=2336412f37"
    )
    confirmation = {
        "Type": "SubscriptionConfirmation",
        "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
        "Token": "2336412f37",
        "TopicArn": TOPIC_ARN,
        "Message": f"You have chosen to subscribe to the topic {TOPIC_ARN}.",
        "SubscribeURL": subscribe_url,
        "Timestamp": isoformat(datetime.now(UTC)),
    }
    forged = {**sns.sign(confirmation), "SubscribeURL": "https://sns.eu-west-1.amazonaws.com/?Action=Other"}
    assert_error(await post_sns(anonymous, setup.path, forged), 401)
    assert subscribe_url not in sns.fetched and not any("Action=Other" in url for url in sns.fetched)

    assert results(await post_sns(anonymous, setup.path, sns.sign(confirmation))) == []
    assert sns.fetched[-1] == subscribe_url


async def test_a_sendgrid_batch_larger_than_other_routes_take_is_recorded(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    """SendGrid posts up to 768 KB at once; events of mail Herald did not send fill most of this one."""
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-batch")
    filler = [
        {
            "email": f"someone{i}@example.com",
            "timestamp": 1767323045,
            "event": "delivered",
            "sg_message_id": f"elsewhere{i}.filter.1.0",
            "response": "250 OK " + "x" * 200,
        }
        for i in range(2000)
    ]
    body = [*filler, {"event": "delivered", "sg_message_id": "sg-batch.filter.1.0", "timestamp": 1767323045}]
    assert 500_000 < len(json.dumps(body)) < 768 * 1024
    found = results(await anonymous.post(setup.path, json=body))
    assert [r.id for r in found] == ["sg-batch"]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered" and len(details) == 1


async def test_reaching_back_to_a_provider_goes_through_the_outbound_policy() -> None:
    """SNS's certificate is fetched under the outbound policy: an internal address is refused (503, SNS retries)."""
    fetch = ProviderFetch(OutboundPolicy())
    try:
        with pytest.raises(ServiceUnavailableError) as refused:
            await fetch("http://127.0.0.1:9/SimpleNotificationService.pem")
        assert "OutboundRefused" in refused.value.message
    finally:
        if fetch.client is not None:
            await fetch.client.aclose()


async def test_reaching_back_to_a_provider_reads_at_most_the_limit() -> None:
    """A certificate URL answering 200 MB: refused once past 64 KB, and the connection closed after at most 1 MB."""
    flood = await FloodingHttpServer().start()
    fetch = ProviderFetch(OutboundPolicy.allowing(["127.0.0.1"]))
    try:
        with pytest.raises(ServiceUnavailableError) as refused:
            await fetch(f"{flood.url}/SimpleNotificationService.pem")
        written = await flood.wait_finished()
    finally:
        flood.close()
        if fetch.client is not None:
            await fetch.client.aclose()
    assert refused.value.message == "127.0.0.1 answered more than 64 KB"
    assert written < FLOOD_IN_FLIGHT < FLOOD_BYTES


# -- the same event delivered twice ------------------------------------------------------------
#
# Providers deliver at least once: a retry after a timeout, or a signed request replayed within its
# tolerance, brings an event again. Each copy is answered as the first was (the provider stops
# retrying) and records nothing: one execution detail, one outbound webhook event.


async def listen_for_deliveries(api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    LISTENING.forget(tenancy.environment_id)
    endpoint = await api.post(
        "/v1/webhooks/endpoints",
        json={"url": "https://app.example.com/hooks", "eventTypes": ["message.delivered", "message.bounced"]},
    )
    assert endpoint.status_code == 201, endpoint.text


async def outbound_events(app: FastAPI, tenancy: Tenancy) -> list[tuple[str, str]]:
    """The outbound webhook events queued in the environment: (type, messageId)."""
    async with app.state.sessionmaker() as session:
        jobs = (
            await session.execute(select(Job).where(Job.kind == "webhook", Job.environment_id == tenancy.environment_id))
        ).scalars()
        events = [json.loads(job.data["body"]) for job in jobs]
    return sorted((event["type"], event["data"]["messageId"]) for event in events)


async def test_sendgrid_the_same_signed_request_twice_records_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    """SendGrid's sg_event_id is the event's identity."""
    await listen_for_deliveries(api, tenancy)
    private, public = sendgrid_key()
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-twice", configurations={"inboundWebhookSigningKey": public})
    now = int(time.time())
    body = json.dumps(sendgrid_events("sg-twice", now)[1:2]).encode()
    headers = sendgrid_headers(private, body, now)

    first = await anonymous.post(setup.path, content=body, headers=headers)
    again = await anonymous.post(setup.path, content=body, headers=headers)
    assert [r.event.status for r in results(first)] == ["delivered"]
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered" and [d.status for d in details] == ["Success"]
    assert await outbound_events(app, tenancy) == [("message.delivered", setup.message.id)]

    # Another event of the message (its own sg_event_id) is recorded; a copy of it, with the same
    # sg_event_id, is not, whatever else it says.
    opened = sendgrid_events("sg-twice", now)[2]
    for copy in (opened, {**opened, "timestamp": now + 5}):
        content = json.dumps([copy]).encode()
        results(await anonymous.post(setup.path, content=content, headers=sendgrid_headers(private, content, now)))
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "opened" and [d.status for d in details] == ["Success", "Success"]
    assert [d.raw["event"] for d in details] == ["delivered", "open"]


async def test_sendgrid_a_batch_carrying_an_event_twice_records_it_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-batch-twice")
    processed, delivered, opened, clicked, other = sendgrid_events("sg-batch-twice", int(time.time()))
    body = [processed, delivered, delivered, other, opened, processed]
    found = results(await anonymous.post(setup.path, json=body))
    # Answered for every event of Herald's message, copies too (as the first delivery of each was).
    assert [r.event.status for r in found] == ["accepted", "delivered", "delivered", "opened", "accepted"]
    after, details = await stored(app, setup.message.id)
    assert [d.raw["event"] for d in details] == ["processed", "delivered", "open"]
    assert after.delivery_status == "opened"


async def test_sendgrid_events_without_an_event_id_are_known_by_their_content(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    """Without sg_event_id: the recipient's sg_message_id, the event, its timestamp (and URL) tell events apart."""
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-no-id")
    sg_message_id = "sg-no-id.filter0001.16648.5515E0B88.0"
    delivered = {"event": "delivered", "sg_message_id": sg_message_id, "timestamp": 1767323045}
    opened = {"event": "open", "sg_message_id": sg_message_id, "timestamp": 1767323050}
    opened_later = {**opened, "timestamp": 1767323060}
    results(await anonymous.post(setup.path, json=[delivered, delivered, opened]))
    results(await anonymous.post(setup.path, json=[delivered, opened, opened_later]))
    _, details = await stored(app, setup.message.id)
    assert [(d.raw["event"], d.raw["timestamp"]) for d in details] == [
        ("delivered", 1767323045),
        ("open", 1767323050),
        ("open", 1767323060),
    ]


async def test_twilio_the_same_signed_callback_twice_records_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    """Twilio's callback has no event id nor time: the sid and the status string are its identity."""
    await listen_for_deliveries(api, tenancy)
    sid = "SM00000000000000000000000000twice"
    setup = await set_up(api, app, tenancy, "twilio", sid, channel="sms")
    url = f"{BASE_URL}{setup.path}"
    sent = twilio_post(url, twilio_form(sid, "sent"))
    delivered = twilio_post(url, twilio_form(sid, "delivered"))

    answers = [await anonymous.post(setup.path, **request) for request in (sent, delivered, delivered, sent)]
    assert [(r.id, r.event.status) for answer in answers for r in results(answer)] == [
        (sid, "sent"),
        (sid, "delivered"),
        (sid, "delivered"),
        (sid, "sent"),
    ]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered"
    assert [d.raw["MessageStatus"] for d in details] == ["sent", "delivered"]
    assert await outbound_events(app, tenancy) == [("message.delivered", setup.message.id)]


async def test_ses_the_same_sns_notification_twice_records_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient, sns: FakeSns
) -> None:
    """SNS retries a notification with its MessageId: that is the event's identity."""
    await listen_for_deliveries(api, tenancy)
    message_id = "010701234567890a-twice-000000"
    setup = await set_up(api, app, tenancy, "ses", message_id)
    delivery = sns.sign(
        sns_notification(
            ses_event(message_id, "Delivery", delivery={"timestamp": "2026-01-02T03:04:05.000Z", "smtpResponse": "250 OK"})
        )
    )
    first = await post_sns(anonymous, setup.path, delivery)
    again = await post_sns(anonymous, setup.path, delivery)
    assert [r.event.status for r in results(first)] == ["delivered"]
    assert again.json() == first.json()
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered" and [d.status for d in details] == ["Success"]
    assert await outbound_events(app, tenancy) == [("message.delivered", setup.message.id)]

    # Another event of the message, in its own notification: recorded.
    opened = sns.sign(sns_notification(ses_event(message_id, "Open", open={"timestamp": "2026-01-02T03:05:00.000Z"})))
    results(await post_sns(anonymous, setup.path, opened))
    results(await post_sns(anonymous, setup.path, opened))
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "opened" and [d.raw["eventType"] for d in details] == ["Delivery", "Open"]


async def test_copies_arriving_at_the_same_moment_record_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    """Copies of one request in flight together (on PostgreSQL, each in its own transaction): one record."""
    await listen_for_deliveries(api, tenancy)
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-race")
    body = sendgrid_events("sg-race", int(time.time()))[1:3]
    answers = await asyncio.gather(*(anonymous.post(setup.path, json=body) for _ in range(4)))
    assert all([r.event.status for r in results(answer)] == ["delivered", "opened"] for answer in answers)
    _, details = await stored(app, setup.message.id)
    assert [d.raw["event"] for d in details] == ["delivered", "open"]
    assert await outbound_events(app, tenancy) == [("message.delivered", setup.message.id)]


async def test_mailgun_one_token_in_requests_arriving_at_the_same_moment_is_taken_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    """The genuine request and a replay of its signature with another body in flight together: one is taken."""
    mailgun_id = "20260102030405.6.RACE@mg.example.com"
    setup = await set_up(
        api, app, tenancy, "mailgun", f"<{mailgun_id}>", configurations={"inboundWebhookSigningKey": MAILGUN_KEY}
    )
    now = int(time.time())
    opened = mailgun_body(mailgun_id, "opened", MAILGUN_KEY, now)
    bodies = [
        mailgun_signed(mailgun_body(mailgun_id, event, None, now), MAILGUN_KEY, now, opened["signature"]["token"])
        for event in ("opened", "clicked", "delivered", "failed")
    ]
    answers = await asyncio.gather(*(anonymous.post(setup.path, json=body) for body in bodies))
    assert sorted(answer.status_code for answer in answers) == [200, 401, 401, 401]
    _, details = await stored(app, setup.message.id)
    assert len(details) == 1


async def test_a_key_claimed_by_a_transaction_not_yet_committed_is_not_claimed_again(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, database: stores.TestDatabase
) -> None:
    """The insert of a key another transaction holds waits for it, then claims nothing (or the key, on its rollback)."""
    if database.kind != "postgres":
        pytest.skip("SQLite has one writer at a time: a second transaction cannot reach the insert meanwhile")
    integration = await create_integration(api, providerId="sendgrid")
    sessionmaker = app.state.sessionmaker

    async def claim(session: Any, keys: list[str]) -> set[str]:
        return await DeliveryRepository(session).claim_event_keys(tenancy.environment_id, integration["_id"], keys)

    async def second(keys: list[str]) -> set[str]:
        async with sessionmaker() as session, session.begin():
            return await claim(session, keys)

    async with sessionmaker() as first, first.begin():
        assert await claim(first, ["k1", "k2", "k1"]) == {"k1", "k2"}
        waiting = asyncio.ensure_future(second(["k2", "k3"]))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # waiting on the first transaction's k2
    assert await waiting == {"k3"}

    async with sessionmaker() as rolled_back:
        await rolled_back.begin()
        assert await claim(rolled_back, ["k4"]) == {"k4"}
        waiting = asyncio.ensure_future(second(["k4"]))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await rolled_back.rollback()
    assert await waiting == {"k4"}


async def test_every_provider_records_a_retried_event_once_though_signed_anew(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    """A retry may be signed anew (a later timestamp, another nonce or token): the event is still the same one."""
    now = int(time.time())

    # Mailgun: event-data.id, whatever the signature's timestamp and token.
    mailgun_id = "20260102030405.3.RETRY@mg.example.com"
    mailgun = await set_up(api, app, tenancy, "mailgun", f"<{mailgun_id}>")
    delivered = mailgun_body(mailgun_id, "delivered", None, now)
    retried = {**delivered, "signature": {**delivered["signature"], "timestamp": str(now + 60), "token": "another"}}
    opened = mailgun_body(mailgun_id, "opened", None, now)

    # Postmark: a digest of the record (no id of the event).
    postmark_id = "00000000-0000-0000-0000-0000000retry"
    postmark = await set_up(api, app, tenancy, "postmark", postmark_id, credentials=POSTMARK_CREDENTIALS)
    delivery, opened_record, _, _ = postmark_records(postmark_id)
    second_open = {**opened_record, "FirstOpen": False, "ReceivedAt": "2026-01-02T03:09:00.7654321Z"}
    auth = basic("hooks", "s3cret-webhook-password")

    # Resend: svix-id, whatever svix-timestamp.
    email_id = "56761188-7520-42d8-8898-ff6fc54ceret"
    resend = await set_up(
        api, app, tenancy, "resend", email_id, configurations={"inboundWebhookSigningKey": RESEND_SECRET}
    )
    resend_delivered = resend_event(email_id, "email.delivered")
    resend_opened = resend_event(email_id, "email.opened")

    # Telnyx: data.id, whatever telnyx-timestamp.
    telnyx_id = "40017f8e-49bd-4f16-9e3d-ef103f91retr"
    private, public = ed25519_key()
    telnyx = await set_up(
        api, app, tenancy, "telnyx", telnyx_id, channel="sms", configurations={"inboundWebhookSigningKey": public}
    )
    telnyx_delivered = telnyx_event(telnyx_id, "delivered")

    # Plivo: a digest of MessageUUID, Status and MessageTime, whatever the nonce.
    uuid_ = "db3ce55a-7f1d-11e1-8ea7-12313800retr"
    plivo = await set_up(api, app, tenancy, "plivo", uuid_, channel="sms")
    plivo_url = f"{BASE_URL}{plivo.path}"

    # Vonage: a digest of messageId, status, err-code and scts, whatever the signing timestamp.
    vonage_id = "0A0000000123RETRY"
    secret = "vonage-signature-secret"
    vonage = await set_up(
        api, app, tenancy, "nexmo", vonage_id, channel="sms", configurations={"inboundWebhookSigningKey": secret}
    )
    vonage_delivered = vonage_receipt(vonage_id, "delivered")

    posts: list[tuple[Setup, dict[str, Any]]] = [
        (mailgun, {"json": delivered}),
        (mailgun, {"json": retried}),
        (mailgun, {"json": opened}),
        (postmark, {"json": delivery, "headers": auth}),
        (postmark, {"json": opened_record, "headers": auth}),
        (postmark, {"json": delivery, "headers": auth}),
        (postmark, {"json": second_open, "headers": auth}),
        (resend, {"content": resend_delivered, "headers": svix_headers(resend_delivered, now)}),
        (resend, {"content": resend_delivered, "headers": svix_headers(resend_delivered, now + 30)}),
        (resend, {"content": resend_opened, "headers": svix_headers(resend_opened, now, svix_id="msg_other")}),
        (telnyx, {"content": telnyx_delivered, "headers": telnyx_headers(private, telnyx_delivered, now)}),
        (telnyx, {"content": telnyx_delivered, "headers": telnyx_headers(private, telnyx_delivered, now + 30)}),
        (plivo, plivo_post(plivo_url, plivo_form(uuid_, "sent"))),
        (plivo, plivo_post(plivo_url, plivo_form(uuid_, "delivered"), nonce="1")),
        (plivo, plivo_post(plivo_url, plivo_form(uuid_, "delivered"), nonce="2")),
        (vonage, {"data": vonage_signed(vonage_delivered, secret, "sha256", now)}),
        (vonage, {"data": vonage_signed(vonage_delivered, secret, "sha256", now + 30)}),
    ]
    for setup, request in posts:
        assert len(results(await anonymous.post(setup.path, **request))) == 1

    recorded = {}
    for setup in (mailgun, postmark, resend, telnyx, plivo, vonage):
        after, details = await stored(app, setup.message.id)
        recorded[setup.integration["providerId"]] = (after.delivery_status, len(details))
    assert recorded == {
        "mailgun": ("opened", 2),
        "postmark": ("opened", 3),
        "resend": ("opened", 2),
        "telnyx": ("delivered", 1),
        "plivo": ("delivered", 2),
        "nexmo": ("delivered", 1),
    }


async def test_the_keys_of_an_environment_go_with_it(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, anonymous: httpx.AsyncClient
) -> None:
    """Deleting an environment deletes every table's rows of it: the keys of its events too."""
    created = await api.post("/v1/environments", json={"name": "Temporary", "color": "#123456"})
    assert created.status_code == 201, created.text
    environment = created.json()["data"]

    async def keys() -> int:
        async with app.state.sessionmaker() as session:
            count = select(func.count()).where(DeliveryEventKey.environment_id == environment["_id"])
            return int((await session.execute(count)).scalar_one())

    async with make_client(app, environment["apiKeys"][0]["key"]) as temporary:
        setup = await set_up(temporary, app, replace(tenancy, environment_id=environment["_id"]), "sendgrid", "sg-env")
        results(await anonymous.post(setup.path, json=sendgrid_events("sg-env", int(time.time()))[:2]))
        assert await keys() == 2
    assert (await api.delete(f"/v1/environments/{environment['_id']}")).status_code == 200
    assert await keys() == 0
