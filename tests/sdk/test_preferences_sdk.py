"""novu-py's subscribers.preferences against a running Herald: the SDK validates every answer with its own models."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from novu_py import Novu, models

from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.fixtures.server import running_server


@pytest.fixture
def server_url(app: FastAPI) -> Iterator[str]:
    with running_server(app.state.settings) as url:
        yield url


async def test_sdk_lists_and_updates_preferences(server_url: str, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(
        api,
        steps=[
            {"name": "inbox", "template": {"type": "in_app", "content": "hi"}},
            {"name": "mail", "template": {"type": "email", "subject": "hi", "content": "hi"}},
        ],
        preferenceSettings={"email": False},
    )
    identifier = workflow["triggers"][0]["identifier"]
    novu = Novu(secret_key=tenancy.api_key, server_url=server_url)

    def call_sdk() -> tuple[models.GetSubscriberPreferencesDto, ...]:
        listed = novu.subscribers.preferences.list(subscriber_id=subscriber["subscriberId"]).result
        global_update = novu.subscribers.preferences.update(
            subscriber_id=subscriber["subscriberId"],
            patch_subscriber_preferences_dto={
                "channels": {"sms": False},
                "schedule": {
                    "is_enabled": True,
                    "weekly_schedule": {"monday": {"is_enabled": True, "hours": [{"start": "09:00 AM", "end": "05:00 PM"}]}},
                },
            },
        ).result
        workflow_update = novu.subscribers.preferences.update(
            subscriber_id=subscriber["subscriberId"],
            patch_subscriber_preferences_dto={"workflow_id": workflow["_id"], "channels": {"email": True, "in_app": False}},
        ).result
        return listed, global_update, workflow_update

    listed, global_update, workflow_update = await asyncio.to_thread(call_sdk)
    [mine] = [w for w in listed.workflows if w.workflow.identifier == identifier]
    assert listed.global_.enabled is True
    assert (mine.enabled, mine.channels.in_app, mine.channels.email) == (True, True, False)
    assert {o.channel.value: o.source.value for o in mine.overrides} == {"in_app": "template", "email": "template"}

    assert global_update.global_.channels.sms is False and global_update.global_.channels.email is True
    assert global_update.global_.schedule is not None and global_update.global_.schedule.is_enabled is True
    monday = global_update.global_.schedule.weekly_schedule.monday
    assert monday.is_enabled is True and [(h.start, h.end) for h in monday.hours] == [("09:00 AM", "05:00 PM")]

    [mine] = [w for w in workflow_update.workflows if w.workflow.identifier == identifier]
    assert (mine.channels.in_app, mine.channels.email) == (False, True)
    assert {o.channel.value: o.source.value for o in mine.overrides} == {"in_app": "subscriber", "email": "subscriber"}
    assert workflow_update.global_.channels.sms is False  # the global change stays
