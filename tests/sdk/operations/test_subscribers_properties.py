"""novu.subscribers.properties.update_online_flag."""

from __future__ import annotations

import httpx
from novu_py import Novu

from tests.fixtures.builders import create_subscriber
from tests.sdk.operations.conftest import call


async def test_subscribers_properties_update_online_flag(novu: Novu, api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    online = await call(
        lambda: (
            novu.subscribers.properties.update_online_flag(
                subscriber_id=subscriber["subscriberId"], update_subscriber_online_flag_request_dto={"is_online": True}
            ).result
        )
    )
    assert online.is_online is True
    offline = await call(
        lambda: (
            novu.subscribers.properties.update_online_flag(
                subscriber_id=subscriber["subscriberId"], update_subscriber_online_flag_request_dto={"is_online": False}
            ).result
        )
    )
    assert offline.is_online is False and offline.last_online_at
    stored = (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}")).json()["data"]
    assert stored["isOnline"] is False and stored["lastOnlineAt"] == offline.last_online_at
