"""TopicRepository.iter_member_ids: how the engine walks a topic's members."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from herald.models import Subscriber
from herald.topics.repository import TopicRepository
from tests.conftest import Tenancy
from tests.topics.test_routes import add, insert_subscribers


async def collect(app: FastAPI, environment_id: str, **kwargs: object) -> list[list[str]]:
    async with app.state.sessionmaker() as session:
        return [batch async for batch in TopicRepository(session).iter_member_ids(environment_id, **kwargs)]


def internal_ids(subscribers: list[Subscriber]) -> list[str]:
    return sorted(subscriber.id for subscriber in subscribers)


async def test_walks_a_large_topic_in_ordered_batches(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    subscribers = await insert_subscribers(app, tenancy, 2500)
    ids = [subscriber.subscriber_id for subscriber in subscribers]
    for start in range(0, len(ids), 1000):
        assert (await add(api, "big", *ids[start : start + 1000])).status_code == 200
    batches = await collect(app, tenancy.environment_id, keys=["big"])
    assert [len(batch) for batch in batches] == [1000, 1000, 500]
    assert [member for batch in batches for member in batch] == internal_ids(subscribers)


async def test_several_topics_yield_each_member_once(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    subscribers = await insert_subscribers(app, tenancy, 7)
    ids = [subscriber.subscriber_id for subscriber in subscribers]
    await add(api, "left", *ids[:5])
    await add(api, "right", *ids[3:])
    topic_id = (await api.get("/v1/topics/right")).json()["data"]["_id"]
    for kwargs in ({"keys": ["left", "right"]}, {"keys": ["left"], "topic_ids": [topic_id]}):
        batches = await collect(app, tenancy.environment_id, batch_size=3, **kwargs)
        assert [len(batch) for batch in batches] == [3, 3, 1]
        assert [member for batch in batches for member in batch] == internal_ids(subscribers)
    only_left = await collect(app, tenancy.environment_id, keys=["left"], batch_size=10)
    assert only_left == [internal_ids(subscribers[:5])]


async def test_unknown_empty_or_foreign_topics_yield_nothing(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    assert await collect(app, tenancy.environment_id, keys=["nothing-here"]) == []
    assert await collect(app, tenancy.environment_id) == []
    await api.post("/v1/topics", json={"key": "empty", "name": "Empty"})
    assert await collect(app, tenancy.environment_id, keys=["empty"]) == []
    subscribers = await insert_subscribers(app, tenancy, 2)
    await add(api, "mine", *(subscriber.subscriber_id for subscriber in subscribers))
    # Another environment naming the same key sees nothing of this one.
    assert await collect(app, tenancy.production_environment_id, keys=["mine"]) == []
    topic_id = (await api.get("/v1/topics/mine")).json()["data"]["_id"]
    assert await collect(app, tenancy.production_environment_id, topic_ids=[topic_id]) == []
