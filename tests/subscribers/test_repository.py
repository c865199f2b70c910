"""SubscriberRepository reads that other features build on."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from herald.subscribers.repository import SubscriberRepository
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber


async def test_get_by_ids_stays_in_the_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    mine = [await create_subscriber(api) for _ in range(3)]
    foreign = await create_subscriber(production_api)
    wanted = [mine[2]["_id"], mine[0]["_id"], foreign["_id"], "000000000000000000000000", mine[0]["_id"]]
    async with app.state.sessionmaker() as session:
        found = await SubscriberRepository(session).get_by_ids(tenancy.environment_id, wanted)
    assert [subscriber.id for subscriber in found] == sorted([mine[0]["_id"], mine[2]["_id"]])


async def test_find_by_subscriber_ids_stays_in_the_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    mine = await create_subscriber(api)
    foreign = await create_subscriber(production_api)
    async with app.state.sessionmaker() as session:
        repository = SubscriberRepository(session)
        found = await repository.find_by_subscriber_ids(
            tenancy.environment_id, [mine["subscriberId"], foreign["subscriberId"], mine["subscriberId"], "ghost"]
        )
        assert [subscriber.id for subscriber in found] == [mine["_id"]]
        assert (await repository.get_by_subscriber_id(tenancy.environment_id, mine["subscriberId"])).id == mine["_id"]
        assert await repository.get_by_subscriber_id(tenancy.environment_id, foreign["subscriberId"]) is None
