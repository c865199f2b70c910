"""/v2/contexts: create, list with cursors, get, update, delete, per environment."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from herald.models import Context
from tests.conftest import Tenancy, assert_error


async def test_create_and_get(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    created = await api.post("/v2/contexts", json={"type": "tenant", "id": "acme", "data": {"plan": "pro"}})
    assert created.status_code == 201, created.text
    body = created.json()["data"]
    assert body["type"] == "tenant" and body["id"] == "acme" and body["data"] == {"plan": "pro"}
    assert body["createdAt"] and body["updatedAt"]
    fetched = (await api.get("/v2/contexts/tenant/acme")).json()["data"]
    assert fetched == body
    async with app.state.sessionmaker() as session:
        row = (
            await session.execute(select(Context).where(Context.environment_id == tenancy.environment_id))
        ).scalar_one()
    assert (row.type, row.key, row.data) == ("tenant", "acme", {"plan": "pro"})
    assert_error(await api.post("/v2/contexts", json={"type": "tenant", "id": "acme"}), 409)
    without_data = (await api.post("/v2/contexts", json={"type": "tenant", "id": "globex"})).json()["data"]
    assert without_data["data"] == {}


async def test_create_refuses_malformed_type_and_id(api: httpx.AsyncClient) -> None:
    assert_error(await api.post("/v2/contexts", json={"type": "has space", "id": "x"}), 422)
    assert_error(await api.post("/v2/contexts", json={"type": "tenant", "id": ""}), 422)
    assert_error(await api.post("/v2/contexts", json={"type": "tenant"}), 422)
    assert_error(await api.post("/v2/contexts", json={"type": "tenant", "id": "x", "data": "text"}), 422)


async def test_list_with_cursors_and_filters(api: httpx.AsyncClient) -> None:
    for key in ("alpha", "beta", "gamma"):
        await api.post("/v2/contexts", json={"type": "app", "id": key})
    first = (await api.get("/v2/contexts", params={"limit": 2, "orderDirection": "ASC"})).json()
    assert [item["id"] for item in first["data"]] == ["alpha", "beta"]
    assert first["totalCount"] == 3 and first["next"] and first["previous"] is None
    rest = (await api.get("/v2/contexts", params={"limit": 2, "orderDirection": "ASC", "after": first["next"]})).json()
    assert [item["id"] for item in rest["data"]] == ["gamma"] and rest["next"] is None and rest["previous"]
    assert [item["id"] for item in (await api.get("/v2/contexts", params={"id": "beta"})).json()["data"]] == ["beta"]
    assert [item["id"] for item in (await api.get("/v2/contexts", params={"search": "mm"})).json()["data"]] == ["gamma"]
    assert (await api.get("/v2/contexts", params={"search": "%"})).json()["data"] == []


async def test_update_replaces_data_and_delete_removes(api: httpx.AsyncClient) -> None:
    await api.post("/v2/contexts", json={"type": "tenant", "id": "acme", "data": {"plan": "pro", "seats": 3}})
    updated = await api.patch("/v2/contexts/tenant/acme", json={"data": {"plan": "free"}})
    assert updated.status_code == 200, updated.text
    assert updated.json()["data"]["data"] == {"plan": "free"}
    assert (await api.get("/v2/contexts/tenant/acme")).json()["data"]["data"] == {"plan": "free"}
    assert_error(await api.patch("/v2/contexts/tenant/acme", json={}), 422)
    deleted = await api.delete("/v2/contexts/tenant/acme")
    assert deleted.status_code == 204
    assert_error(await api.get("/v2/contexts/tenant/acme"), 404)
    assert_error(await api.patch("/v2/contexts/tenant/acme", json={"data": {}}), 404)
    assert_error(await api.delete("/v2/contexts/tenant/acme"), 404)


async def test_contexts_of_another_environment_are_not_found(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    await api.post("/v2/contexts", json={"type": "tenant", "id": "acme", "data": {"a": 1}})
    for other in (production_api, other_org_api):
        assert_error(await other.get("/v2/contexts/tenant/acme"), 404)
        assert_error(await other.patch("/v2/contexts/tenant/acme", json={"data": {}}), 404)
        assert_error(await other.delete("/v2/contexts/tenant/acme"), 404)
        assert (await other.get("/v2/contexts")).json()["data"] == []
    # The same type and id is free in another environment.
    assert (await production_api.post("/v2/contexts", json={"type": "tenant", "id": "acme"})).status_code == 201
    assert (await api.get("/v2/contexts/tenant/acme")).json()["data"]["data"] == {"a": 1}
