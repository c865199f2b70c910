"""SubscriberRepository reads that other features build on."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event

from herald.kit.db import create_engine, create_sessionmaker
from herald.migrations import upgrade_async
from herald.subscribers.repository import SubscriberRepository
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber
from tests.kit.test_db import grow_after_statistics, plan_nodes


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


async def test_find_by_subscriber_ids_probes_the_index_when_the_statistics_are_stale(empty_database) -> None:
    """As the API's engine plans it: statistics taken at three subscribers, then 20,000 more, and 500 looked up.

    Written with IN, the look-up of POST /v1/subscribers/bulk read the whole
    environment for every batch: 2,022 subscribers a second created on
    PostgreSQL, 18,396 with one index probe per id.
    """
    if empty_database.kind != "postgres":
        pytest.skip("PostgreSQL's planner and its statistics")
    await upgrade_async(empty_database.url)
    engine = create_engine(empty_database.url)  # the API's: sequential scans allowed
    try:
        await grow_after_statistics(engine)
        keys = [f"late-{n}" for n in range(1, 501)]
        statements: list[tuple[str, Any]] = []

        def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
            statements.append((statement, parameters))

        event.listen(engine.sync_engine, "before_cursor_execute", record)
        async with create_sessionmaker(engine)() as session:
            found = await SubscriberRepository(session).find_by_subscriber_ids("env-a", keys)
        event.remove(engine.sync_engine, "before_cursor_execute", record)
        assert len(found) == 500
        [(statement, parameters)] = statements
        async with engine.connect() as connection:
            nodes = plan_nodes((await connection.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters)).scalar_one())
        assert not any(node["Node Type"] == "Seq Scan" for node in nodes), nodes
        assert sum(node.get("Rows Removed by Filter", 0) for node in nodes) == 0, nodes
    finally:
        await engine.dispose()
