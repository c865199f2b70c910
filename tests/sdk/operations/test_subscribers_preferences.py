"""novu.subscribers.preferences.list, update, bulk_update (v2)."""

from __future__ import annotations

import httpx
from novu_py import Novu

from tests.fixtures.builders import create_subscriber, create_workflow
from tests.sdk.operations.conftest import call

TWO_CHANNELS = [
    {"name": "inbox", "template": {"type": "in_app", "content": "hi"}},
    {"name": "mail", "template": {"type": "email", "subject": "hi", "content": "hi"}},
]


async def test_subscribers_preferences_list(novu: Novu, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=TWO_CHANNELS, preferenceSettings={"email": False})
    listed = await call(lambda: novu.subscribers.preferences.list(subscriber_id=subscriber["subscriberId"]).result)
    assert listed.global_.enabled is True
    [mine] = [w for w in listed.workflows if w.workflow.identifier == workflow["triggers"][0]["identifier"]]
    assert (mine.enabled, mine.channels.in_app, mine.channels.email) == (True, True, False)


async def test_subscribers_preferences_update(novu: Novu, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=TWO_CHANNELS)
    updated = await call(
        lambda: (
            novu.subscribers.preferences.update(
                subscriber_id=subscriber["subscriberId"],
                patch_subscriber_preferences_dto={"workflow_id": workflow["_id"], "channels": {"in_app": False}},
            ).result
        )
    )
    [mine] = [w for w in updated.workflows if w.workflow.identifier == workflow["triggers"][0]["identifier"]]
    assert (mine.channels.in_app, mine.channels.email) == (False, True)
    stored = (await api.get(f"/v2/subscribers/{subscriber['subscriberId']}/preferences")).json()["data"]
    [again] = [w for w in stored["workflows"] if w["workflow"]["identifier"] == workflow["triggers"][0]["identifier"]]
    assert again["channels"]["in_app"] is False


async def test_subscribers_preferences_bulk_update(novu: Novu, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    first = await create_workflow(api, steps=TWO_CHANNELS)
    second = await create_workflow(api, steps=TWO_CHANNELS)
    updated = await call(
        lambda: (
            novu.subscribers.preferences.bulk_update(
                subscriber_id=subscriber["subscriberId"],
                bulk_update_subscriber_preferences_dto={
                    "preferences": [
                        {"workflow_id": first["_id"], "channels": {"email": False}},
                        {"workflow_id": second["triggers"][0]["identifier"], "channels": {"in_app": False}},
                    ]
                },
            ).result
        )
    )
    by_identifier = {w.workflow.identifier: w.channels for w in updated}
    one, two = by_identifier[first["triggers"][0]["identifier"]], by_identifier[second["triggers"][0]["identifier"]]
    assert (one.email, one.in_app, two.email, two.in_app) == (False, True, True, False)
