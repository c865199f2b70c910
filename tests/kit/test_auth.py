from __future__ import annotations

import httpx
from fastapi import FastAPI

from herald.organizations.service import revoke_key
from tests.conftest import Tenancy, assert_error, make_client


async def test_missing_header(anonymous: httpx.AsyncClient) -> None:
    body = assert_error(await anonymous.get("/v1/integrations"), 401, "Missing authorization header")
    assert body["error"] == "Unauthorized"


async def test_unknown_key(app: FastAPI) -> None:
    async with make_client(app, "not-a-key") as client:
        assert_error(await client.get("/v1/integrations"), 401, "API Key not found")


async def test_empty_key_and_other_scheme(anonymous: httpx.AsyncClient) -> None:
    response = await anonymous.get("/v1/integrations", headers={"Authorization": "ApiKey "})
    assert_error(response, 401)
    response = await anonymous.get("/v1/integrations", headers={"Authorization": "Bearer abc"})
    assert_error(response, 401, 'Invalid authentication scheme: "Bearer"')


async def test_revoked_key_stops_working(app: FastAPI, tenancy: Tenancy) -> None:
    async with make_client(app, tenancy.api_key) as client:
        assert (await client.get("/v1/integrations")).status_code == 200
        async with app.state.sessionmaker() as session:
            assert await revoke_key(session, tenancy.api_key)
            await session.commit()
        app.state.api_keys.forget(tenancy.api_key)
        assert_error(await client.get("/v1/integrations"), 401, "API Key not found")


async def test_health_check_needs_no_auth(anonymous: httpx.AsyncClient) -> None:
    response = await anonymous.get("/v1/health-check")
    assert response.status_code == 200
    assert response.json()["data"]["status"] == "ok"
