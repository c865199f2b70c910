"""``GET /v1/health-check`` is not ready until the schema is the one the code needs; once it is, the check stays cheap."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import event

from herald.app import create_app
from herald.config import load_settings
from herald.migrations import _scripts, head_revision, upgrade_async
from tests.conftest import assert_error, make_client
from tests.fixtures import stores


@pytest.fixture
async def unmigrated(empty_database: stores.TestDatabase, tmp_path: Path) -> AsyncIterator[FastAPI]:
    app = create_app(load_settings(data_dir=tmp_path / "data", database_url=empty_database.url, secret_key="k"))
    yield app
    await app.state.engine.dispose()


async def test_503_until_the_schema_is_at_the_head_then_200_with_select_1_alone(
    unmigrated: FastAPI, empty_database: stores.TestDatabase
) -> None:
    head = head_revision()
    previous = _scripts().get_revision(head).down_revision
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(unmigrated.state.engine.sync_engine, "before_cursor_execute", record)
    async with make_client(unmigrated) as client:
        assert_error(await client.get("/v1/health-check"), 503, "The database has no schema: run 'herald migrate'")
        # Still read while it is not at the head: a migration run meanwhile is seen.
        await upgrade_async(empty_database.url, str(previous))
        assert_error(
            await client.get("/v1/health-check"),
            503,
            f"The database is at revision {previous}, the code needs {head}: run 'herald migrate'",
        )
        await upgrade_async(empty_database.url)
        response = await client.get("/v1/health-check")
        assert response.status_code == 200, response.text
        assert response.json() == {"data": {"status": "ok", "database": "up"}}

        # Found at the head once: from then on the check does not read the revision again.
        statements.clear()
        for _ in range(3):
            assert (await client.get("/v1/health-check")).status_code == 200
    assert [statement for statement in statements if "alembic_version" in statement] == []
    assert [statement for statement in statements if statement.strip().upper() == "SELECT 1"] == ["SELECT 1"] * 3
