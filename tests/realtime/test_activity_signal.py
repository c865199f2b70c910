"""The activity signal the console's live pages wait on: announced where runs and step outcomes are stored."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import event

from herald.app import build_worker
from herald.realtime.signals import ACTIVITY_CHANNEL, announce_activity
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, create_workflow


async def test_a_run_and_its_steps_outcomes_ring_the_environments_watchers(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient
) -> None:
    hub = app.state.activity
    stop = asyncio.Event()
    # On PostgreSQL it comes back through LISTEN, as from a worker on another machine; SQLite hands it over in process.
    listener = None if app.state.settings.is_sqlite else asyncio.create_task(hub.listen(stop))
    worker = build_worker(app.state.settings, app.state.sessionmaker)
    try:
        workflow = await create_workflow(api)
        subscriber = await create_subscriber(api)
        async with hub.watch(tenancy.environment_id) as development, hub.watch(tenancy.production_environment_id) as production:
            if listener is not None:
                # LISTEN is in place once an announcement made now comes back.
                while True:
                    async with app.state.sessionmaker() as session:
                        await announce_activity(session, [tenancy.environment_id])
                        await session.commit()
                    if await development.wait(1.0):
                        break
            triggered = await api.post(
                "/v1/events/trigger", json={"name": workflow["triggers"][0]["identifier"], "to": subscriber["subscriberId"]}
            )
            assert triggered.status_code == 201
            assert not await development.wait(0), "a trigger alone is no run yet"
            await worker.run_until_idle()
            assert await development.wait(30.0)
            assert not await production.wait(0)
    finally:
        stop.set()
        if listener is not None:
            with suppress(asyncio.CancelledError):
                await listener
        if worker.http is not None:
            await worker.http.aclose()


async def test_one_announcement_per_environment_per_transaction(app: FastAPI, tenancy: Tenancy) -> None:
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if ACTIVITY_CHANNEL in statement:
            statements.append(statement)

    engine = app.state.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        async with app.state.sessionmaker() as session:
            await announce_activity(session, [tenancy.environment_id, tenancy.production_environment_id])
            await announce_activity(session, [tenancy.environment_id])
            await announce_activity(session, [tenancy.production_environment_id, tenancy.environment_id])
            if app.state.settings.is_sqlite:
                assert session.info["activity_changes"] == {tenancy.environment_id, tenancy.production_environment_id}
            await session.rollback()
            # A new transaction announces again.
            await announce_activity(session, [tenancy.environment_id])
            await session.rollback()
            assert "activity_changes" not in session.info
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(statements) == (0 if app.state.settings.is_sqlite else 2)
