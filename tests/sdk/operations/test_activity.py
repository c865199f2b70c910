"""novu.activity.track: a delivery provider's event recorded against the message it names."""

from __future__ import annotations

import json

import httpx
from fastapi import FastAPI
from novu_py import Novu
from sqlalchemy import select

from herald.models import ExecutionDetail, Message
from tests.conftest import Tenancy
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
