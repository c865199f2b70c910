"""A trigger's ``context``: checked, and the contexts it names stored in the trigger's environment."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from herald.models import Context, Event
from tests.conftest import Tenancy, assert_error
from tests.engine.conftest import statements_while
from tests.fixtures.builders import create_subscriber, create_workflow


async def stored_contexts(app: FastAPI, environment_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    async with app.state.sessionmaker() as session:
        rows = (await session.execute(select(Context).where(Context.environment_id == environment_id))).scalars()
        return {(row.type, row.key): row.data for row in rows}


async def ready(api: httpx.AsyncClient) -> str:
    await create_subscriber(api, subscriberId="ada")
    return str((await create_workflow(api))["triggers"][0]["identifier"])


async def test_named_contexts_are_created_and_object_data_is_stored(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    name = await ready(api)
    await api.post("/v2/contexts", json={"type": "tenant", "id": "acme", "data": {"kept": True}})
    response = await api.post(
        "/v1/events/trigger",
        json={
            "name": name,
            "to": "ada",
            "context": {"tenant": "acme", "app": {"id": "jira", "data": {"plan": "pro"}}, "region": "eu"},
        },
    )
    assert response.status_code == 201, response.text
    assert response.json()["data"]["status"] == "processed"
    assert await stored_contexts(app, tenancy.environment_id) == {
        ("tenant", "acme"): {"kept": True},  # named by id: its data is left alone
        ("app", "jira"): {"plan": "pro"},
        ("region", "eu"): {},
    }
    # The object form replaces the stored data.
    await api.post(
        "/v1/events/trigger", json={"name": name, "to": "ada", "context": {"tenant": {"id": "acme", "data": {"v": 2}}}}
    )
    assert (await stored_contexts(app, tenancy.environment_id))[("tenant", "acme")] == {"v": 2}
    async with app.state.sessionmaker() as session:
        event = (
            await session.execute(select(Event).where(Event.transaction_id == response.json()["data"]["transactionId"]))
        ).scalar_one()
    assert event.context == {"tenant": "acme", "app": "jira", "region": "eu"}


async def test_contexts_stay_in_the_triggers_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    name = await ready(api)
    await api.post("/v1/events/trigger", json={"name": name, "to": "ada", "context": {"tenant": "acme"}})
    assert await stored_contexts(app, tenancy.production_environment_id) == {}
    assert_error(await production_api.get("/v2/contexts/tenant/acme"), 404)
    assert (await api.get("/v2/contexts/tenant/acme")).status_code == 200


async def test_bulk_triggers_naming_the_same_context(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    name = await ready(api)
    events = [
        {"name": name, "to": "ada", "context": {"tenant": {"id": "acme", "data": {"n": 1}}}},
        {"name": name, "to": "ada", "context": {"tenant": {"id": "acme", "data": {"n": 2}}}},
        {"name": name, "to": "ada", "context": {"tenant": "acme"}},
        {"name": name, "to": "ada"},
    ]
    response = await api.post("/v1/events/trigger/bulk", json={"events": events})
    assert response.status_code == 201, response.text
    assert [item["status"] for item in response.json()["data"]] == ["processed"] * 4
    assert await stored_contexts(app, tenancy.environment_id) == {("tenant", "acme"): {"n": 2}}


async def test_a_malformed_context_is_refused(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    name = await ready(api)
    for context in (
        {"has space": "x"},
        {"tenant": "bad id!"},
        {"tenant": {"data": {}}},
        {"tenant": 5},
        {f"t{index}": "x" for index in range(6)},
    ):
        response = await api.post("/v1/events/trigger", json={"name": name, "to": "ada", "context": context})
        assert_error(response, 422)
    assert await stored_contexts(app, tenancy.environment_id) == {}


async def test_a_trigger_without_context_sends_no_statement_about_contexts(
    api: httpx.AsyncClient, app: FastAPI
) -> None:
    """The trigger route is the hot path: only a trigger that names a context pays for one."""
    name = await ready(api)

    async def send(body: dict[str, Any]) -> None:
        response = await api.post("/v1/events/trigger", json={"name": name, "to": "ada", **body})
        assert response.status_code == 201, response.text

    about_contexts = lambda statement: "contexts" in statement.lower()  # noqa: E731
    assert await statements_while(app, send({}), about_contexts) == []
    assert len(await statements_while(app, send({"context": {"tenant": "acme"}}), about_contexts)) == 1
