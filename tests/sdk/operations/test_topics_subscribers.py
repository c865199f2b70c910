"""novu.topics.subscribers.retrieve: is a subscriber in a topic (GET /v1/topics/{topicKey}/subscribers/{id})."""

from __future__ import annotations

import httpx
import pytest
from novu_py import Novu, models

from tests.fixtures.builders import create_subscriber, unique
from tests.sdk.operations.conftest import call


async def test_topics_subscribers_retrieve(novu: Novu, api: httpx.AsyncClient) -> None:
    member, outsider = await create_subscriber(api), await create_subscriber(api)
    key = unique("topic")
    assert (await api.post("/v1/topics", json={"key": key, "name": "Readers"})).status_code == 201
    added = await api.post(f"/v1/topics/{key}/subscribers", json={"subscribers": [member["subscriberId"]]})
    assert added.status_code == 200, added.text
    found = await call(
        lambda: novu.topics.subscribers.retrieve(topic_key=key, external_subscriber_id=member["subscriberId"]).result
    )
    assert (found.topic_key, found.external_subscriber_id, found.subscriber_id) == (
        key,
        member["subscriberId"],
        member["_id"],
    )
    with pytest.raises(models.ErrorDto) as missing:
        await call(
            lambda: novu.topics.subscribers.retrieve(topic_key=key, external_subscriber_id=outsider["subscriberId"])
        )
    assert missing.value.data.status_code == 404
    # A subscription made through the v2 API is membership the v1 route answers for as well.
    await call(
        lambda: novu.topics.subscriptions.create(
            topic_key=key, create_topic_subscriptions_request_dto={"subscriptions": [outsider["subscriberId"]]}
        )
    )
    joined = await call(
        lambda: novu.topics.subscribers.retrieve(topic_key=key, external_subscriber_id=outsider["subscriberId"]).result
    )
    assert (joined.topic_key, joined.subscriber_id) == (key, outsider["_id"])
