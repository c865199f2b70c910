from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import unique

TENANT_KEYS = {"_id", "identifier", "name", "data", "_environmentId", "createdAt", "updatedAt"}


async def create_tenant(api: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    body = {"identifier": unique("tenant"), "name": "Acme", **fields}
    response = await api.post("/v1/tenants", json=body)
    assert response.status_code == 201, response.text
    return response.json()["data"]


async def test_create_tenant(api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    tenant = await create_tenant(api, identifier="acme", data={"plan": "pro", "limits": {"seats": 5}})
    assert TENANT_KEYS <= tenant.keys()
    assert tenant["identifier"] == "acme"
    assert tenant["name"] == "Acme"
    assert tenant["data"] == {"plan": "pro", "limits": {"seats": 5}}
    assert tenant["_environmentId"] == tenancy.environment_id
    assert tenant["createdAt"].endswith("Z") and tenant["updatedAt"].endswith("Z")
    fetched = await api.get("/v1/tenants/acme")
    assert fetched.status_code == 200
    assert fetched.json()["data"] == tenant
    assert (await create_tenant(api))["data"] is None


async def test_duplicate_identifier_is_409_per_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    await create_tenant(api, identifier="same")
    response = await api.post("/v1/tenants", json={"identifier": "same", "name": "Other"})
    assert_error(
        response, 409, f"Tenant with identifier: same already exists under environment {tenancy.environment_id}"
    )
    await create_tenant(production_api, identifier="same")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x"}, "identifier"),
        ({"identifier": "", "name": "x"}, "identifier"),
        ({"identifier": 1, "name": "x"}, "identifier"),
        ({"identifier": "t"}, "name"),
        ({"identifier": "t", "name": ""}, "name"),
        ({"identifier": "t", "name": "x", "data": "text"}, "data"),
    ],
)
async def test_create_validates(api: httpx.AsyncClient, body: dict[str, Any], field: str) -> None:
    errors = assert_error(await api.post("/v1/tenants", json=body), 422, "Validation Error")["errors"]
    assert field in errors, errors


async def test_list_tenants_newest_first(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    created = [await create_tenant(api) for _ in range(3)]
    await create_tenant(production_api)
    first = (await api.get("/v1/tenants", params={"limit": 2})).json()
    assert (first["page"], first["pageSize"], first["totalCount"], first["hasMore"]) == (0, 2, 3, True)
    second = (await api.get("/v1/tenants", params={"page": 1, "limit": 2})).json()
    assert (second["page"], second["totalCount"], second["hasMore"]) == (1, 3, False)
    listed = [tenant["identifier"] for tenant in first["data"] + second["data"]]
    assert listed == [tenant["identifier"] for tenant in reversed(created)]
    assert_error(await api.get("/v1/tenants", params={"limit": 101}), 422)


async def test_get_unknown_or_foreign_tenant_is_404(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    assert_error(
        await api.get("/v1/tenants/nope"),
        404,
        f"Tenant with identifier: nope does not exist under environment {tenancy.environment_id}",
    )
    tenant = await create_tenant(api)
    path = f"/v1/tenants/{tenant['identifier']}"
    for client in (production_api, other_org_api):
        assert_error(await client.get(path), 404)
        assert_error(await client.patch(path, json={"name": "x"}), 404)
        assert_error(await client.delete(path), 404)
    assert (await api.get(path)).status_code == 200


async def test_update_changes_only_the_fields_sent(api: httpx.AsyncClient) -> None:
    tenant = await create_tenant(api, data={"a": 1, "b": 2})
    path = f"/v1/tenants/{tenant['identifier']}"
    response = await api.patch(path, json={"name": "Acme Corp"})
    assert response.status_code == 200, response.text
    updated = response.json()["data"]
    assert updated["name"] == "Acme Corp"
    assert updated["data"] == {"a": 1, "b": 2}
    assert updated["createdAt"] == tenant["createdAt"]
    updated = (await api.patch(path, json={"data": {"c": 3}})).json()["data"]
    assert updated["data"] == {"c": 3}
    assert updated["name"] == "Acme Corp"
    assert (await api.patch(path, json={"data": None})).json()["data"]["data"] is None
    unchanged = await api.patch(path, json={})
    assert unchanged.status_code == 200 and unchanged.json()["data"]["name"] == "Acme Corp"


async def test_update_renames_the_identifier(api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    tenant = await create_tenant(api)
    taken = await create_tenant(api)
    new_identifier = unique("renamed")
    response = await api.patch(f"/v1/tenants/{tenant['identifier']}", json={"identifier": new_identifier})
    assert response.status_code == 200
    assert response.json()["data"]["identifier"] == new_identifier
    assert response.json()["data"]["_id"] == tenant["_id"]
    assert_error(await api.get(f"/v1/tenants/{tenant['identifier']}"), 404)
    assert (await api.get(f"/v1/tenants/{new_identifier}")).status_code == 200
    response = await api.patch(f"/v1/tenants/{new_identifier}", json={"identifier": taken["identifier"]})
    assert_error(
        response,
        409,
        f"Tenant with identifier: {taken['identifier']} already exists under environment {tenancy.environment_id}",
    )
    # Renaming to itself is no conflict.
    assert (await api.patch(f"/v1/tenants/{new_identifier}", json={"identifier": new_identifier})).status_code == 200


async def test_update_validates(api: httpx.AsyncClient) -> None:
    tenant = await create_tenant(api)
    path = f"/v1/tenants/{tenant['identifier']}"
    for body, field in (({"identifier": ""}, "identifier"), ({"name": ""}, "name"), ({"data": [1]}, "data")):
        assert field in assert_error(await api.patch(path, json=body), 422)["errors"]


async def test_delete_tenant(api: httpx.AsyncClient) -> None:
    tenant = await create_tenant(api)
    path = f"/v1/tenants/{tenant['identifier']}"
    response = await api.delete(path)
    assert response.status_code == 204 and response.content == b""
    assert_error(await api.get(path), 404)
    assert_error(await api.delete(path), 404)
    await create_tenant(api, identifier=tenant["identifier"])


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/tenants"),
        ("GET", "/v1/tenants"),
        ("GET", "/v1/tenants/t"),
        ("PATCH", "/v1/tenants/t"),
        ("DELETE", "/v1/tenants/t"),
    ],
)
async def test_tenant_routes_require_auth(anonymous: httpx.AsyncClient, method: str, path: str) -> None:
    body = {"identifier": "t", "name": "n"} if method in ("POST", "PATCH") else None
    assert_error(await anonymous.request(method, path, json=body), 401, "Missing authorization header")
