"""novu.subscribers.notifications.feed and unseen_count: the v1 inbox reads (the v2 ones are elsewhere)."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from novu_py import Novu

from tests.sdk.operations.conftest import call
from tests.sdk.operations.runs import in_app_run


async def test_subscribers_notifications_feed(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    run = await in_app_run(api, app, count=3)
    first = await call(
        lambda: novu.subscribers.notifications.feed(request={"subscriber_id": run.subscriber_id, "limit": 2}).result
    )
    second = await call(
        lambda: (
            novu.subscribers.notifications.feed(
                request={"subscriber_id": run.subscriber_id, "limit": 2, "page": 1}
            ).result
        )
    )
    assert (first.has_more, first.page_size, len(first.data)) == (True, 2, 2)
    assert (second.has_more, len(second.data)) == (False, 1)
    # Newest first, as the store orders them; every message once.
    assert [item.id for item in [*first.data, *second.data]] == [m.id for m in reversed(run.messages)]
    assert sorted(item.content for item in [*first.data, *second.data]) == ["Hello Ada 0", "Hello Ada 1", "Hello Ada 2"]


async def test_subscribers_notifications_unseen_count(novu: Novu, api: httpx.AsyncClient, app: FastAPI) -> None:
    run = await in_app_run(api, app, count=2)
    count = await call(lambda: novu.subscribers.notifications.unseen_count(subscriber_id=run.subscriber_id).result)
    assert count.count == 2
    response = await api.post(
        f"/v1/subscribers/{run.subscriber_id}/messages/mark-as",
        json={"messageId": run.messages[0].id, "markAs": "seen"},
    )
    assert response.status_code == 201, response.text
    count = await call(lambda: novu.subscribers.notifications.unseen_count(subscriber_id=run.subscriber_id).result)
    assert count.count == 1
