"""Test set-up: every store-touching test runs on SQLite and, when reachable, PostgreSQL.

Each test gets its own organization (and so its own environments and API
keys); scoping by organization is what isolates tests that share a database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.app import create_app
from herald.config import load_settings
from herald.migrations import upgrade_async
from herald.organizations.service import create_organization
from tests.fixtures.peers import LOOPBACK_ALLOW
from tests.fixtures.stores import (
    TestDatabase,
    create_postgres_database,
    create_sqlite_database,
    postgres_reachable,
)

BASE_URL = "http://herald.test"


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
async def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TestDatabase]:
    if request.param == "postgres":
        if not await postgres_reachable():
            pytest.skip("PostgreSQL is not reachable (set HERALD_TEST_POSTGRES_URL)")
        db = await create_postgres_database()
    else:
        db = create_sqlite_database(tmp_path_factory.mktemp("sqlite"))
    await upgrade_async(db.url)
    yield db
    await db.drop()


@pytest.fixture(params=["sqlite", "postgres"])
async def empty_database(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[TestDatabase]:
    """A database of this test's own, with no schema yet (for migrations, bootstrap and the CLI)."""
    if request.param == "postgres":
        if not await postgres_reachable():
            pytest.skip("PostgreSQL is not reachable (set HERALD_TEST_POSTGRES_URL)")
        db = await create_postgres_database()
    else:
        db = create_sqlite_database(tmp_path)
    yield db
    await db.drop()


@pytest.fixture(scope="session")
async def app(database: TestDatabase, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[FastAPI]:
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("data"),
        database_url=database.url,
        secret_key="test-secret-key",
        # The tests' peers listen on loopback; the default policy stays strict elsewhere.
        outbound_allow=LOOPBACK_ALLOW,
        # Tests write the store through this app while a served one (running_server) works on it: that
        # server's worker is not its SQLite file's only writer, so it polls as any worker does.
        worker_idle_poll_seconds=0.5,
    )
    application = create_app(settings)
    yield application
    if application.state.read_engine is not None:
        await application.state.read_engine.dispose()
    await application.state.engine.dispose()


@dataclass
class Tenancy:
    organization_id: str
    environment_id: str
    api_key: str
    production_environment_id: str
    production_api_key: str


@pytest.fixture
async def tenancy(app: FastAPI) -> Tenancy:
    async with app.state.sessionmaker() as session:
        result = await create_organization(session, box=app.state.secret_box)
        await session.commit()
    development, production = result.environments
    return Tenancy(
        organization_id=result.organization.id,
        environment_id=development.environment.id,
        api_key=development.api_key or "",
        production_environment_id=production.environment.id,
        production_api_key=production.api_key or "",
    )


def make_client(app: FastAPI, api_key: str | None = None, **headers: str) -> httpx.AsyncClient:
    if api_key is not None:
        headers["Authorization"] = f"ApiKey {api_key}"
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers)


@pytest.fixture
async def anonymous(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client(app) as client:
        yield client


@pytest.fixture
async def api(app: FastAPI, tenancy: Tenancy) -> AsyncIterator[httpx.AsyncClient]:
    """A client authenticated as the Development environment of a fresh organization."""
    async with make_client(app, tenancy.api_key) as client:
        yield client


@pytest.fixture
async def production_api(app: FastAPI, tenancy: Tenancy) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client(app, tenancy.production_api_key) as client:
        yield client


@pytest.fixture
async def other_org_api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client of another organization: its ids must never reach ours."""
    async with app.state.sessionmaker() as session:
        result = await create_organization(session, box=app.state.secret_box)
        await session.commit()
    async with make_client(app, result.environments[0].api_key) as client:
        yield client


def assert_error(response: httpx.Response, status: int, message: str | None = None) -> dict[str, Any]:
    """The response is Novu's error body with this status (and message, when given)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["statusCode"] == status
    assert body["path"] == response.request.url.path
    assert isinstance(body["timestamp"], str) and body["timestamp"].endswith("Z")
    assert "message" in body
    if message is not None:
        assert body["message"] == message, body
    if status == 422:
        # Novu's SDKs parse every 422 as ValidationErrorDto, whose ``errors`` is required.
        assert body["errors"] and all(
            isinstance(entry["messages"], list) and "value" in entry for entry in body["errors"].values()
        ), body
    return body
