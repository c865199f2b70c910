"""novu.subscribers.topics.*: a subscriber's topic subscriptions."""

from __future__ import annotations

from novu_py import Novu

from tests.sdk.operations.conftest import call


async def test_subscribers_topics_list(novu: Novu) -> None:
    await call(lambda: novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "ada"}))
    for key in ("a1", "a2", "a3"):
        await call(
            lambda key=key: novu.topics.subscriptions.create(
                topic_key=key, create_topic_subscriptions_request_dto={"subscriptions": ["ada"]}
            )
        )
    first = await call(
        lambda: (
            novu.subscribers.topics.list(request={"subscriber_id": "ada", "limit": 2, "order_direction": "ASC"}).result
        )
    )
    assert [item.topic.key for item in first.data] == ["a1", "a2"]
    assert first.total_count == 3 and first.next is not None
    rest = await call(
        lambda: (
            novu.subscribers.topics.list(
                request={"subscriber_id": "ada", "limit": 2, "order_direction": "ASC", "after": first.next}
            ).result
        )
    )
    assert [item.topic.key for item in rest.data] == ["a3"]
    assert rest.data[0].subscriber.subscriber_id == "ada"
