"""The counts behind ``totalCount`` stop a bounded distance past the page: PostgreSQL's plan has a Limit under each.

An unbounded count of an environment's messages or runs reads every one of them (2.8 s on a store of ten
million). The answers the bound gives are tested in tests/messages/test_routes.py and
tests/notifications/test_routes.py on both stores; this checks the plans PostgreSQL makes of the statements
the routes send.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event

from tests.fixtures.builders import create_subscriber, insert_in_app_message


async def count_statements(app: FastAPI, api: httpx.AsyncClient, path: str) -> list[tuple[str, Any]]:
    """The counting statements the store received while ``path`` was answered."""
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if "count(" in statement.lower():
            sent.append((statement, parameters))

    event.listen(app.state.engine.sync_engine, "before_cursor_execute", record)
    try:
        response = await api.get(path)
        assert response.status_code == 200, response.text
    finally:
        event.remove(app.state.engine.sync_engine, "before_cursor_execute", record)
    return sent


async def plan_of(app: FastAPI, statement: str, parameters: Any) -> list[str]:
    async with app.state.engine.connect() as connection:
        rows = await connection.exec_driver_sql("EXPLAIN " + statement, tuple(parameters))
        return [str(row[0]).strip().removeprefix("->  ") for row in rows]


async def test_the_counts_of_messages_runs_and_the_feed_stop_at_a_limit(api: httpx.AsyncClient, app: FastAPI) -> None:
    if app.state.engine.dialect.name != "postgresql":
        pytest.skip("SQLite's query plans do not show where a count stops; the answers are tested on both stores")
    subscriber = await create_subscriber(api)
    await insert_in_app_message(app, subscriber)
    paths = (
        "/v1/messages",
        "/v1/messages?channel=in_app",
        "/v1/notifications",
        f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed",
    )
    for path in paths:
        statements = await count_statements(app, api, path)
        assert statements, path
        for statement, parameters in statements:
            plan = await plan_of(app, statement, parameters)
            assert plan[0].startswith("Aggregate"), (path, plan)
            assert plan[1].startswith("Limit"), (path, plan)  # the count reads no further than the bound
