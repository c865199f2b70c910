"""novu.notifications.list and retrieve: the activity feed."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from novu_py import Novu

from tests.sdk.operations.conftest import call
from tests.sdk.operations.runs import in_app_run


async def test_notifications_list(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    run = await in_app_run(api, app, count=2)
    listed = await call(lambda: novu.notifications.list(request={"subscriber_ids": [run.subscriber_id]}).result)
    assert len(listed.data) == 2 and listed.has_more is False
    assert {n.id for n in listed.data} == {m.notification_id for m in run.messages}
    only = await call(lambda: novu.notifications.list(request={"transaction_id": run.transaction_id}).result)
    assert [n.transaction_id for n in only.data] == [run.transaction_id]


async def test_notifications_retrieve(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    run = await in_app_run(api, app)
    [message] = run.messages
    notification = await call(lambda: novu.notifications.retrieve(notification_id=message.notification_id).result)
    assert notification.id == message.notification_id and notification.transaction_id == run.transaction_id
    [job] = notification.jobs or []
    assert job.type.value == "in_app" and job.status == "completed"
    assert job.execution_details, "the engine's account of the step"
