from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event

from herald.kit import auth
from herald.models import ApiKey
from herald.organizations.service import hash_api_key, revoke_key
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


async def test_a_key_sent_without_its_scheme_is_not_shown_back(anonymous: httpx.AsyncClient, tenancy: Tenancy) -> None:
    for header in (tenancy.api_key, f"{tenancy.api_key} extra", f"Key={tenancy.api_key}"):
        response = await anonymous.get("/v1/integrations", headers={"Authorization": header})
        assert_error(response, 401, 'Invalid authentication scheme: the header must read "ApiKey <API_KEY>"')
        assert tenancy.api_key not in response.text


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


@contextmanager
def api_key_lookups(app: FastAPI) -> Iterator[list[str]]:
    """The statements that read the api_keys table while the block runs."""
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "api_keys" in statement:
            statements.append(statement)

    engine = app.state.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def test_a_flood_of_one_unknown_key_asks_the_store_once(app: FastAPI) -> None:
    """100 requests with one wrong key, one after another and then all at once: one look-up each time."""
    key = f"wrong-{uuid.uuid4().hex}"
    async with make_client(app, key) as client:
        with api_key_lookups(app) as lookups:
            for _ in range(100):
                assert_error(await client.get("/v1/integrations"), 401, "API Key not found")
        assert len(lookups) == 1
        app.state.api_keys._unknown.clear()  # as if its time had passed
        with api_key_lookups(app) as lookups:
            responses = await asyncio.gather(*(client.post("/v1/events/trigger", json={"name": "x", "to": "y"}) for _ in range(100)))
        assert {response.status_code for response in responses} == {401}
        assert len(lookups) == 1


async def test_unknown_keys_are_remembered_briefly_and_boundedly(
    app: FastAPI, tenancy: Tenancy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "UNKNOWN_KEY_SECONDS", 0.2)
    key = f"made-later-{uuid.uuid4().hex}"
    async with make_client(app, key) as client:
        assert_error(await client.get("/v1/integrations"), 401)
        # The key is made right after it was tried (as `herald keys create` would, from its own process).
        async with app.state.sessionmaker() as session:
            session.add(ApiKey(environment_id=tenancy.environment_id, organization_id=tenancy.organization_id, key_hash=hash_api_key(key)))
            await session.commit()

        async def accepted() -> bool:
            return (await client.get("/v1/integrations")).status_code == 200

        await wait_until(accepted, timeout=5, what="the new key to be accepted", interval=0.05)
    # A flood of different wrong keys is remembered up to a bound, the oldest forgotten first.
    monkeypatch.setattr(auth, "MAX_UNKNOWN_KEYS", 10)
    async with make_client(app) as client:
        for number in range(30):
            response = await client.get("/v1/integrations", headers={"Authorization": f"ApiKey flood-{number}"})
            assert_error(response, 401)
    assert len(app.state.api_keys._unknown) <= 10


async def test_the_revocation_watch_asks_the_store_nothing_while_no_key_is_cached(app: FastAPI, tenancy: Tenancy) -> None:
    """An idle process has no key cached, so nothing to drop: the watch waits for a key instead of asking every second."""
    sessions_opened: list[int] = []

    def counting_sessions() -> Any:
        sessions_opened.append(1)
        return app.state.sessionmaker()

    resolver = auth.ApiKeyResolver(counting_sessions, ttl_seconds=30)
    stop = asyncio.Event()
    watch = asyncio.create_task(resolver.watch_revocations(stop, 0.001))
    try:
        for _ in range(50):  # many turns of the event loop, each a chance for the watch to look
            await asyncio.sleep(0)
        assert sessions_opened == []
        assert await resolver.resolve(tenancy.api_key) is not None  # the key's look-up: one session
        # Now a key is cached: the watch looks for revocations again, every interval.
        await wait_until(lambda: _async(len(sessions_opened) >= 3), timeout=5, what="the watch's looks", interval=0.01)
        async with app.state.sessionmaker() as session:
            assert await revoke_key(session, tenancy.api_key)
            await session.commit()
        await wait_until(lambda: _async(not resolver._cache), timeout=5, what="the revoked key dropped", interval=0.01)
    finally:
        stop.set()
        await watch


async def _async(value: bool) -> bool:
    return value
