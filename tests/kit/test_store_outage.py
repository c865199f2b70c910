"""When the database cannot be reached: 503 with Novu's error body and Retry-After, never a bare 500.

The outage here is real: the service is pointed at a loopback port where no
database listens. (tests/processes/test_database_restart.py crashes and
restarts a real PostgreSQL server under load.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import APIRouter, FastAPI

from herald.app import create_app
from herald.config import load_settings
from herald.kit.errors import STORE_UNAVAILABLE_MESSAGE
from herald.kit.idempotency import IdempotencyRepository
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.builders import unique
from tests.fixtures.server import free_port


@pytest.fixture
async def unreachable(tmp_path: Path) -> AsyncIterator[FastAPI]:
    """The service, configured with a PostgreSQL server that is not there."""
    settings = load_settings(
        data_dir=tmp_path, database_url=f"postgresql://postgres@127.0.0.1:{free_port()}/herald", secret_key="k"
    )
    app = create_app(settings)
    yield app
    await app.state.engine.dispose()


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("POST", "/v1/events/trigger", {}),
        # With a key the idempotency middleware meets the outage first, outside the routes.
        ("POST", "/v1/events/trigger", {"idempotency-key": "retry-me"}),
        ("GET", "/v1/subscribers", {}),
        ("POST", "/v1/subscribers/ada/messages/mark-as", {"idempotency-key": "again"}),
    ],
)
async def test_requests_are_answered_503_with_retry_after(
    unreachable: FastAPI, method: str, path: str, headers: dict[str, str]
) -> None:
    async with make_client(unreachable, "some-key") as client:
        response = await client.request(method, path, json={"name": "x", "to": "ada"}, headers=headers)
    assert_error(response, 503, STORE_UNAVAILABLE_MESSAGE)
    assert response.headers["retry-after"] == "1"
    assert "errorId" not in response.json()


async def test_health_check_says_the_database_does_not_answer(unreachable: FastAPI) -> None:
    async with make_client(unreachable) as client:
        response = await client.get("/v1/health-check")
    body = assert_error(response, 503)
    assert body["message"].startswith("The database does not answer")


async def test_a_claim_whose_request_failed_is_released_once_the_store_answers(
    app: FastAPI, tenancy: Tenancy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request fails because the store is down, and so does the release of its idempotency key.

    The retry that comes meanwhile is told to wait (409); once the store
    answers, the claim is released in the background and the retry runs.
    """
    flaky = create_app(app.state.settings)
    router = APIRouter()
    store_down = asyncio.Event()
    store_down.set()

    @router.post("/v1/test-store-bound", status_code=201)
    async def store_bound() -> dict:
        if store_down.is_set():
            raise ConnectionRefusedError(111, "Connection refused")
        return {"data": "done"}

    flaky.include_router(router)
    release = IdempotencyRepository.release

    async def release_while_down(self: IdempotencyRepository, environment_id: str, key: str) -> None:
        if store_down.is_set():
            raise ConnectionRefusedError(111, "Connection refused")
        await release(self, environment_id, key)

    monkeypatch.setattr(IdempotencyRepository, "release", release_while_down)
    key = {"idempotency-key": unique("key")}
    try:
        async with make_client(flaky, tenancy.api_key) as client:
            failed = await client.post("/v1/test-store-bound", json={}, headers=key)
            assert_error(failed, 503, STORE_UNAVAILABLE_MESSAGE)
            assert_error(await client.post("/v1/test-store-bound", json={}, headers=key), 409)

            store_down.clear()

            async def retried() -> httpx.Response:
                for _ in range(50):
                    response = await client.post("/v1/test-store-bound", json={}, headers=key)
                    if response.status_code != 409:
                        return response
                    await asyncio.sleep(0.1)
                return response

            response = await retried()
    finally:
        await flaky.state.engine.dispose()
    assert response.status_code == 201, response.text
    assert response.json() == {"data": "done"}
    assert "idempotency-replay" not in response.headers
