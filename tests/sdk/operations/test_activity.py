"""novu.activity.track: a delivery provider's event (the generic form or its own) recorded against the message."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from fastapi import FastAPI
from novu_py import Novu, models
from sqlalchemy import select

from herald.models import ExecutionDetail, Message
from tests.conftest import Tenancy
from tests.deliveries.test_provider_webhooks import MAILGUN_BOUNCE, MAILGUN_KEY, mailgun_body, set_up, stored
from tests.fixtures.builders import create_integration
from tests.sdk.operations.conftest import call
from tests.sdk.operations.runs import in_app_run


async def test_activity_track(novu: Novu, api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    run = await in_app_run(api, app)
    [message] = run.messages
    integration = await create_integration(api)
    event = {"messageId": message.id, "status": "clicked", "date": "2026-03-04T05:06:07.000Z"}
    results = await call(
        lambda: novu.activity.track(
            environment_id=tenancy.environment_id, integration_id=integration["_id"], request_body=event
        )
    )
    [result] = results
    assert result.id == message.id and result.event.status.value == "clicked"
    assert json.loads(result.event.row or "") == event
    async with app.state.sessionmaker() as session:
        stored = (await session.execute(select(Message).where(Message.id == message.id))).scalar_one()
        details = list(
            (
                await session.execute(
                    select(ExecutionDetail).where(
                        ExecutionDetail.job_id == message.job_id, ExecutionDetail.source == "Webhook"
                    )
                )
            ).scalars()
        )
    assert stored.seen is True
    assert [(d.status, d.provider_id, d.raw) for d in details] == [("Success", "sendgrid", event)]


async def test_activity_track_in_the_providers_own_format(
    novu: Novu, api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    """A Mailgun webhook body, its signature in the body as Mailgun signs it, passed on as it came."""
    mailgun_id = "20260102030405.7.SDK@mg.example.com"
    setup = await set_up(
        api, app, tenancy, "mailgun", f"<{mailgun_id}>", configurations={"inboundWebhookSigningKey": MAILGUN_KEY}
    )
    now = int(time.time())
    forged = mailgun_body(mailgun_id, "failed", "not-the-key", now, **MAILGUN_BOUNCE)
    with pytest.raises(models.APIError) as refused:
        await call(
            lambda: novu.activity.track(
                environment_id=tenancy.environment_id, integration_id=setup.integration["_id"], request_body=forged
            )
        )
    assert refused.value.status_code == 401
    signed = mailgun_body(mailgun_id, "failed", MAILGUN_KEY, now, **MAILGUN_BOUNCE)
    [result] = await call(
        lambda: novu.activity.track(
            environment_id=tenancy.environment_id, integration_id=setup.integration["_id"], request_body=signed
        )
    )
    assert result.id == f"<{mailgun_id}>" and result.event.status.value == "bounced"
    after, details = await stored(app, setup.message.id)
    assert after.delivery_status == "bounced" and after.status == "error"
    assert [(d.status, d.provider_id) for d in details] == [("Failed", "mailgun")]
