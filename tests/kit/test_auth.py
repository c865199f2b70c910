from __future__ import annotations

import httpx
from fastapi import FastAPI

from herald.organizations.service import revoke_key
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.processes import wait_until
from tests.fixtures.server import running_server


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


async def test_a_running_server_refuses_a_key_revoked_elsewhere(app: FastAPI, tenancy: Tenancy) -> None:
    """The server has the key cached (for 30 s); the revocation is written by another party, as
    ``herald keys revoke`` does from its own process. The server refuses the key within seconds."""
    with running_server(app.state.settings) as url:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"ApiKey {tenancy.api_key}"}) as client:
            assert (await client.get("/v1/integrations")).status_code == 200
            async with app.state.sessionmaker() as session:
                assert await revoke_key(session, tenancy.api_key)
                await session.commit()

            async def refused() -> httpx.Response | None:
                response = await client.get("/v1/integrations")
                return response if response.status_code == 401 else None

            response = await wait_until(refused, timeout=5, what="the revoked key to be refused", interval=0.2)
            assert response.json()["message"] == "API Key not found"
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"ApiKey {tenancy.production_api_key}"}) as other:
            assert (await other.get("/v1/integrations")).status_code == 200


async def test_health_check_needs_no_auth(anonymous: httpx.AsyncClient) -> None:
    response = await anonymous.get("/v1/health-check")
    assert response.status_code == 200
    assert response.json()["data"]["status"] == "ok"
