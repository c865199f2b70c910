"""The engine's per-process snapshot of an environment's layouts."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI

from herald.layouts.cache import NO_LAYOUTS, LayoutCache, layout_cache
from tests.conftest import Tenancy
from tests.engine.conftest import statements_while

HTML = "<div>{{{body}}}</div>"


def reads_layouts(statement: str) -> bool:
    return "FROM layouts" in statement


async def test_concurrent_steps_share_one_read(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    response = await api.post("/v1/layouts", json={"name": "Brand", "identifier": "brand", "content": HTML})
    assert response.status_code == 201
    cache = LayoutCache()

    async def many() -> list[object]:
        return list(
            await asyncio.gather(*(cache.get(app.state.sessionmaker, tenancy.environment_id) for _ in range(5)))
        )

    results: list[object] = []

    async def run() -> None:
        results.extend(await many())

    reads = await statements_while(app, run(), reads_layouts)
    assert len(reads) == 1
    assert len({id(result) for result in results}) == 1
    snapshot = await cache.get(app.state.sessionmaker, tenancy.environment_id)
    assert snapshot.default is not None and snapshot.default.identifier == "brand"
    assert snapshot.find(response.json()["data"]["_id"]) is snapshot.default


async def test_an_empty_environment_is_cached_until_a_write_drops_it(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    layout_cache.invalidate(tenancy.environment_id)
    assert await layout_cache.get(app.state.sessionmaker, tenancy.environment_id) is NO_LAYOUTS
    again = await statements_while(app, layout_cache.get(app.state.sessionmaker, tenancy.environment_id), reads_layouts)
    assert again == []
    response = await api.post("/v1/layouts", json={"name": "Brand", "identifier": "brand", "content": HTML})
    assert response.status_code == 201
    snapshot = await layout_cache.get(app.state.sessionmaker, tenancy.environment_id)
    assert snapshot.default is not None and snapshot.default.content == HTML


async def test_a_snapshot_expires(app: FastAPI, tenancy: Tenancy) -> None:
    cache = LayoutCache(ttl_seconds=0)

    async def twice() -> None:
        await cache.get(app.state.sessionmaker, tenancy.environment_id)
        await cache.get(app.state.sessionmaker, tenancy.environment_id)

    assert len(await statements_while(app, twice(), reads_layouts)) == 2


async def test_a_load_that_began_before_an_invalidation_is_not_kept(app: FastAPI, tenancy: Tenancy) -> None:
    cache = LayoutCache()
    loading = asyncio.ensure_future(cache.get(app.state.sessionmaker, tenancy.environment_id))
    await asyncio.sleep(0)
    cache.invalidate(tenancy.environment_id)
    await loading
    reads = await statements_while(app, cache.get(app.state.sessionmaker, tenancy.environment_id), reads_layouts)
    assert len(reads) == 1
