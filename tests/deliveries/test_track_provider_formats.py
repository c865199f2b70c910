"""activity.track (POST /v2/inbound-webhooks/delivery-providers/...) with each provider's own webhook body.

The same bodies and signatures as on /webhooks/organizations/... (test_provider_webhooks.py), posted with an
API key: the provider's reader reads them and checks its signature; the generic form is still read as itself.
"""

from __future__ import annotations

import json
import time

import httpx
from fastapi import FastAPI

from tests.conftest import BASE_URL, Tenancy, assert_error
from tests.deliveries.test_provider_webhooks import (
    MAILGUN_BOUNCE,
    MAILGUN_KEY,
    assert_unchanged,
    mailgun_body,
    results,
    sendgrid_events,
    sendgrid_headers,
    sendgrid_key,
    set_up,
    stored,
    twilio_form,
    twilio_post,
)


def track_path(tenancy: Tenancy, integration_id: str) -> str:
    return f"/v2/inbound-webhooks/delivery-providers/{tenancy.environment_id}/{integration_id}"


async def test_sendgrid_events_are_read_in_sendgrids_format_and_signature(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    private, public = sendgrid_key()
    setup = await set_up(
        api, app, tenancy, "sendgrid", "sg-tracked", configurations={"inboundWebhookSigningKey": public}
    )
    path = track_path(tenancy, setup.integration["_id"])
    now = int(time.time())
    body = json.dumps(sendgrid_events("sg-tracked", now)[1:2]).encode()
    # The API key does not stand in for SendGrid's signature once its key is set.
    unsigned = await api.post(path, content=body, headers={"Content-Type": "application/json"})
    assert_error(unsigned, 401)
    other, _ = sendgrid_key()
    assert_error(await api.post(path, content=body, headers=sendgrid_headers(other, body, now)), 401)
    await assert_unchanged(app, setup.message)

    found = results(await api.post(path, content=body, headers=sendgrid_headers(private, body, now)))
    assert [(r.id, r.event.status) for r in found] == [("sg-tracked", "delivered")]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "delivered"
    assert [(d.status, d.source, d.provider_id) for d in details] == [("Success", "Webhook", "sendgrid")]


async def test_twilio_callbacks_are_signed_over_the_track_address(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    sid = "SM00000000000000000000000000track"
    setup = await set_up(api, app, tenancy, "twilio", sid, channel="sms")
    path = track_path(tenancy, setup.integration["_id"])
    form = twilio_form(sid, "undelivered", ErrorCode="30003")
    # Signed over the provider webhook's address, not the one called: refused.
    assert_error(await api.post(path, **twilio_post(f"{BASE_URL}{setup.path}", form)), 401)
    await assert_unchanged(app, setup.message)
    found = results(await api.post(path, **twilio_post(f"{BASE_URL}{path}", form)))
    assert [(r.id, r.event.status) for r in found] == [(sid, "undelivered")]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and "30003" in (after.error_text or "")
    assert [(d.status, d.provider_id) for d in details] == [("Failed", "twilio")]


async def test_mailgun_events_need_inbound_webhooks_off_or_on_but_its_signature_always(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    mailgun_id = "20260102030405.9.TRACKED@mg.example.com"
    setup = await set_up(
        api,
        app,
        tenancy,
        "mailgun",
        f"<{mailgun_id}>",
        configurations={"inboundWebhookEnabled": False, "inboundWebhookSigningKey": MAILGUN_KEY},
    )
    path = track_path(tenancy, setup.integration["_id"])
    now = int(time.time())
    # The provider's own route refuses while inbound webhooks are off; the API key's route reads it.
    assert_error(await api.post(setup.path, json=mailgun_body(mailgun_id, "delivered", MAILGUN_KEY, now)), 400)
    forged = mailgun_body(mailgun_id, "failed", "another-key", now, **MAILGUN_BOUNCE)
    assert_error(await api.post(path, json=forged), 401)
    await assert_unchanged(app, setup.message)

    signed = mailgun_body(mailgun_id, "failed", MAILGUN_KEY, now, **MAILGUN_BOUNCE)
    assert [r.event.status for r in results(await api.post(path, json=signed))] == ["bounced"]
    # The generic form is its own: no provider signature is asked of it.
    generic = {"messageId": setup.message.id, "status": "opened", "date": "2026-01-02T03:04:05Z"}
    assert [r.event.status for r in results(await api.post(path, json=generic))] == ["opened"]
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and "mailbox unavailable" in (after.error_text or "")
    assert [d.status for d in details] == ["Failed", "Success"]


async def test_events_about_mail_herald_did_not_send_are_left_out(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    setup = await set_up(api, app, tenancy, "sendgrid", "sg-ours")
    path = track_path(tenancy, setup.integration["_id"])
    now = int(time.time())
    batch = sendgrid_events("sg-ours", now)[1:2] + sendgrid_events("sg-someone-elses", now)[1:2]
    found = results(await api.post(path, json=batch))
    assert [(r.id, r.event.status) for r in found] == [("sg-ours", "delivered")]
