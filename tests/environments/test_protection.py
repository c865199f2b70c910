"""Protected environments: another environment's key may read, diff and dry-run, but change nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from novu_py import models
from sqlalchemy import select

from herald.models import EnvironmentVariable
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.builders import create_workflow, unique

PROTECTED = "Environment {} is protected: only its own API keys may change it"


@dataclass
class World:
    app: FastAPI
    api: httpx.AsyncClient  # Development's key
    production_api: httpx.AsyncClient
    tenancy: Tenancy

    @property
    def production(self) -> str:
        return self.tenancy.production_environment_id

    def values(self, development: str, production: str) -> list[dict[str, str]]:
        return [
            {"_environmentId": self.tenancy.environment_id, "value": development},
            {"_environmentId": self.production, "value": production},
        ]

    async def variable(self, key: str, *, secret: bool = False) -> None:
        """A variable with a value in both environments, made with Production's own key."""
        body = {"key": key, "isSecret": secret, "values": self.values("dev-value", "prod-value")}
        response = await self.production_api.post("/v1/environment-variables", json=body)
        assert response.status_code == 200, response.text


async def production_as_it_stands(world: World) -> dict[str, Any]:
    """Everything a Development key could have changed, as Production's own key reads it."""
    read = world.production_api.get
    return {
        path: (await read(path)).json()
        for path in (
            "/v1/environments",
            "/v1/workflows",
            "/v2/layouts",
            "/v1/environment-variables",
            "/v1/organizations/settings",
        )
    }


Attempt = Callable[[], Awaitable[httpx.Response]]


async def _publish(world: World) -> Attempt:
    await create_workflow(world.api, name=unique("promoted"))
    return lambda: world.api.post(f"/v2/environments/{world.production}/publish", json={})


async def _publish_chosen(world: World) -> Attempt:
    workflow = await create_workflow(world.api, name=unique("chosen"))
    chosen = {"resources": [{"resourceType": "workflow", "resourceId": workflow["triggers"][0]["identifier"]}]}
    return lambda: world.api.post(f"/v2/environments/{world.production}/publish", json=chosen)


async def _sync(world: World) -> Attempt:
    workflow = await create_workflow(world.api, name=unique("synced"))
    path = f"/v2/workflows/{workflow['_id']}/sync"
    return lambda: world.api.put(path, json={"targetEnvironmentId": world.production})


async def _change_identifier(world: World) -> Attempt:
    return lambda: world.api.put(f"/v1/environments/{world.production}", json={"identifier": unique("taken-over")})


async def _lift_protection(world: World) -> Attempt:
    return lambda: world.api.put(f"/v1/environments/{world.production}", json={"protected": False})


async def _set_a_production_value(world: World) -> Attempt:
    body = {"key": "WEBHOOK_BASE", "values": world.values("dev", "https://attacker.example")}
    return lambda: world.api.post("/v1/environment-variables", json=body)


async def _replace_a_production_value(world: World) -> Attempt:
    await world.variable("BASE_URL")
    body = {"values": world.values("dev-value", "https://attacker.example")}
    return lambda: world.api.patch("/v1/environment-variables/BASE_URL", json=body)


async def _drop_a_production_value(world: World) -> Attempt:
    await world.variable("BASE_URL")
    body = {"values": [{"_environmentId": world.tenancy.environment_id, "value": "dev-value"}]}
    return lambda: world.api.patch("/v1/environment-variables/BASE_URL", json=body)


async def _make_a_secret_plain(world: World) -> Attempt:
    await world.variable("SIGNING_KEY", secret=True)
    return lambda: world.api.patch("/v1/environment-variables/SIGNING_KEY", json={"isSecret": False})


async def _rename_a_variable(world: World) -> Attempt:
    await world.variable("BASE_URL")
    return lambda: world.api.patch("/v1/environment-variables/BASE_URL", json={"key": "RENAMED"})


async def _delete_a_variable(world: World) -> Attempt:
    await world.variable("BASE_URL")
    return lambda: world.api.delete("/v1/environment-variables/BASE_URL")


async def _change_the_organizations_locales(world: World) -> Attempt:
    return lambda: world.api.patch("/v1/organizations/settings", json={"defaultLocale": "fr_FR"})


async def _delete_a_protected_environment(world: World) -> Attempt:
    staging = (await world.api.post("/v1/environments", json={"name": "Staging"})).json()["data"]
    async with make_client(world.app, staging["apiKeys"][0]["key"]) as own:
        assert (await own.put(f"/v1/environments/{staging['_id']}", json={"protected": True})).status_code == 200
    return lambda: world.api.delete(f"/v1/environments/{staging['_id']}")


# Each way a Development key could change Production (or another protected environment) before:
# what to prepare, and which environment the refusal names.
REFUSED: dict[str, tuple[Callable[[World], Awaitable[Attempt]], str]] = {
    "publish": (_publish, "Production"),
    "publish-chosen-resources": (_publish_chosen, "Production"),
    "sync-a-workflow": (_sync, "Production"),
    "change-the-application-identifier": (_change_identifier, "Production"),
    "lift-the-protection": (_lift_protection, "Production"),
    "set-a-production-value": (_set_a_production_value, "Production"),
    "replace-a-production-value": (_replace_a_production_value, "Production"),
    "drop-a-production-value": (_drop_a_production_value, "Production"),
    "make-a-secret-plain": (_make_a_secret_plain, "Production"),
    "rename-a-variable-production-reads": (_rename_a_variable, "Production"),
    "delete-a-variable-production-reads": (_delete_a_variable, "Production"),
    "change-the-organizations-locales": (_change_the_organizations_locales, "Production"),
    "delete-a-protected-environment": (_delete_a_protected_environment, "Staging"),
}


@pytest.mark.parametrize("case", list(REFUSED))
async def test_another_environments_key_changes_nothing_in_a_protected_one(
    case: str, app: FastAPI, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    world = World(app, api, production_api, tenancy)
    prepare, environment = REFUSED[case]
    attempt = await prepare(world)
    before = await production_as_it_stands(world)
    assert_error(await attempt(), 403, PROTECTED.format(environment))
    assert await production_as_it_stands(world) == before


async def test_productions_own_key_still_changes_it(
    app: FastAPI, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    world = World(app, api, production_api, tenancy)
    publish = f"/v2/environments/{world.production}/publish"
    workflow = await create_workflow(api, name=unique("promoted"))
    pulled = await production_api.post(publish, json={"sourceEnvironmentId": tenancy.environment_id})
    assert pulled.status_code == 200, pulled.text
    listed = (await production_api.get("/v1/workflows")).json()["data"]
    assert [w["triggers"][0]["identifier"] for w in listed] == [workflow["triggers"][0]["identifier"]]
    await world.variable("BASE_URL")
    replaced = await production_api.patch(
        "/v1/environment-variables/BASE_URL", json={"values": world.values("dev-value", "https://prod.example")}
    )
    assert replaced.status_code == 200, replaced.text
    identifier = unique("production-app")
    changed = await production_api.put(f"/v1/environments/{world.production}", json={"identifier": identifier})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["data"]["identifier"], changed.json()["data"]["protected"]) == (identifier, True)
    assert (await production_api.patch("/v1/organizations/settings", json={"defaultLocale": "fr_FR"})).status_code == 200
    # Lifted by its own key, Production takes Development's changes; protected again, it refuses them.
    lifted = await production_api.put(f"/v1/environments/{world.production}", json={"protected": False})
    assert lifted.status_code == 200 and lifted.json()["data"]["protected"] is False
    await create_workflow(api, name=unique("while-open"))
    assert (await api.post(publish, json={})).status_code == 200
    again = await production_api.put(f"/v1/environments/{world.production}", json={"protected": True})
    assert again.status_code == 200 and again.json()["data"]["protected"] is True
    assert_error(await api.post(publish, json={}), 403, PROTECTED.format("Production"))


async def test_reads_diffs_and_dry_runs_stay_open(
    app: FastAPI, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    world = World(app, api, production_api, tenancy)
    await create_workflow(api, name=unique("compared"))
    diff = await api.post(f"/v2/environments/{world.production}/diff", json={})
    assert diff.status_code == 200, diff.text
    assert diff.json()["data"]["summary"]["hasChanges"] is True
    dry = await api.post(f"/v2/environments/{world.production}/publish", json={"dryRun": True})
    assert dry.status_code == 200, dry.text
    assert dry.json()["data"]["summary"]["successful"] == 1
    assert (await production_api.get("/v1/workflows")).json()["data"] == []
    assert (await api.get(f"/v2/environments/{world.production}/tags")).status_code == 200
    await world.variable("BASE_URL")
    read = (await api.get("/v1/environment-variables/BASE_URL")).json()["data"]
    assert {v["_environmentId"]: v["value"] for v in read["values"]}[world.production] == "prod-value"


async def test_protected_is_answered_and_set_only_with_the_environments_own_key(
    app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    listed = (await api.get("/v1/environments")).json()["data"]
    assert {env["name"]: env["protected"] for env in listed} == {"Development": False, "Production": True}
    for env in listed:  # the SDK reads the answer with the field it does not know
        models.EnvironmentResponseDto.model_validate(env)
    staging = (await api.post("/v1/environments", json={"name": "Staging"})).json()["data"]
    assert staging["protected"] is False
    # Not even an unprotected environment is protected by another environment's key.
    refused = await api.put(f"/v1/environments/{staging['_id']}", json={"protected": True})
    assert_error(refused, 403, "Only the Staging environment's own API keys may change whether it is protected")
    async with make_client(app, staging["apiKeys"][0]["key"]) as own:
        protected = await own.put(f"/v1/environments/{staging['_id']}", json={"protected": True})
        assert protected.status_code == 200 and protected.json()["data"]["protected"] is True
        assert (await own.put(f"/v1/environments/{staging['_id']}", json={"name": "Staging 2"})).status_code == 200
    assert_error(
        await api.put(f"/v1/environments/{staging['_id']}", json={"name": "Mine"}), 403, PROTECTED.format("Staging 2")
    )


async def test_an_organization_has_at_most_max_environments(app: FastAPI, api: httpx.AsyncClient) -> None:
    limit = app.state.settings.max_environments
    # Asked for at once, creations are counted one after another: exactly as many are made as the cap leaves.
    answers = await asyncio.gather(
        *(api.post("/v1/environments", json={"name": f"Environment {n}"}) for n in range(limit))
    )
    made = [answer.json()["data"]["_id"] for answer in answers if answer.status_code == 201]
    assert len(made) == limit - 2
    message = f"Environment limit reached: an organization may have at most {limit} environments (HERALD_MAX_ENVIRONMENTS)"
    for answer in answers:
        if answer.status_code != 201:
            assert_error(answer, 400, message)
    assert len((await api.get("/v1/environments")).json()["data"]) == limit
    assert_error(await api.post("/v1/environments", json={"name": "One more"}), 400, message)
    # Deleting one makes room for one.
    assert (await api.delete(f"/v1/environments/{made[0]}")).status_code == 200
    assert (await api.post("/v1/environments", json={"name": "One more"})).status_code == 201


@pytest.mark.parametrize("secret", [False, True], ids=["plain", "secret"])
async def test_development_changes_its_own_value_when_it_sends_productions_back_as_answered(
    secret: bool, app: FastAPI, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    world = World(app, api, production_api, tenancy)
    await world.variable("BASE_URL", secret=secret)
    answered = (await api.get("/v1/environment-variables/BASE_URL")).json()["data"]
    production_value = {v["_environmentId"]: v["value"] for v in answered["values"]}[world.production]
    assert production_value == ("****" if secret else "prod-value")
    changed = await api.patch(
        "/v1/environment-variables/BASE_URL", json={"values": world.values("new-dev-value", production_value)}
    )
    assert changed.status_code == 200, changed.text
    async with app.state.sessionmaker() as session:
        query = select(EnvironmentVariable.values).where(
            EnvironmentVariable.organization_id == tenancy.organization_id, EnvironmentVariable.key == "BASE_URL"
        )
        stored = (await session.execute(query)).scalar_one()
    opened = {e: app.state.secret_box.open(v) if secret else v for e, v in stored.items()}
    assert opened == {tenancy.environment_id: "new-dev-value", world.production: "prod-value"}
