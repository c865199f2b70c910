"""Environment variables: values per environment, secrets sealed at rest and masked, organization-scoped."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from herald.models import EnvironmentVariable
from tests.conftest import Tenancy, assert_error

LONG_SECRET = "sk_live_0123456789abcdefghijklmnop"


async def _create(api: httpx.AsyncClient, key: str, values: dict[str, str], **fields: Any) -> dict[str, Any]:
    body = {"key": key, "values": [{"_environmentId": env, "value": v} for env, v in values.items()], **fields}
    response = await api.post("/v1/environment-variables", json=body)
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def _stored(app: FastAPI, variable_id: str) -> EnvironmentVariable:
    async with app.state.sessionmaker() as session:
        row = (
            await session.execute(select(EnvironmentVariable).where(EnvironmentVariable.id == variable_id))
        ).scalar_one()
        return row


async def _staging(api: httpx.AsyncClient) -> str:
    """Another environment, unprotected: Development's key may set its values."""
    response = await api.post("/v1/environments", json={"name": "Staging"})
    assert response.status_code == 201, response.text
    environment_id: str = response.json()["data"]["_id"]
    return environment_id


def _values(answer: dict[str, Any]) -> dict[str, str]:
    return {entry["_environmentId"]: entry["value"] for entry in answer["values"]}


async def test_secret_values_are_sealed_at_rest_and_masked(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    staging = await _staging(api)
    created = await _create(api, "STRIPE_KEY", {tenancy.environment_id: LONG_SECRET, staging: "short"}, isSecret=True)
    # The caller's environment's long value shows its edges; another environment's value is masked whole.
    assert _values(created) == {tenancy.environment_id: "sk_****mnop", staging: "****"}
    row = await _stored(app, created["_id"])
    assert all(value.startswith("hsk1.") for value in row.values.values())
    assert LONG_SECRET not in str(row.values) and "short" not in str(row.values)
    assert app.state.secret_box.open(row.values[tenancy.environment_id]) == LONG_SECRET
    assert LONG_SECRET not in (await api.get("/v1/environment-variables")).text


async def test_a_mask_sent_back_keeps_the_stored_secret(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    staging = await _staging(api)
    created = await _create(api, "STRIPE_KEY", {tenancy.environment_id: LONG_SECRET}, isSecret=True)
    values = [
        {"_environmentId": tenancy.environment_id, "value": "sk_****mnop"},
        {"_environmentId": staging, "value": "staged"},
    ]
    response = await api.patch("/v1/environment-variables/STRIPE_KEY", json={"values": values})
    assert response.status_code == 200, response.text
    row = await _stored(app, created["_id"])
    assert app.state.secret_box.open(row.values[tenancy.environment_id]) == LONG_SECRET
    assert app.state.secret_box.open(row.values[staging]) == "staged"


async def test_a_secret_made_plain_drops_its_values_unless_new_ones_are_sent(
    api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    await _create(api, "STRIPE_KEY", {tenancy.environment_id: LONG_SECRET}, isSecret=True)
    response = await api.patch("/v1/environment-variables/STRIPE_KEY", json={"isSecret": False})
    assert response.status_code == 200, response.text
    assert response.json()["data"]["values"] == [] and response.json()["data"]["isSecret"] is False
    # And a plain variable made secret is sealed from then on.
    await _create(api, "PLAIN", {tenancy.environment_id: "visible"})
    made_secret = (await api.patch("/v1/environment-variables/PLAIN", json={"isSecret": True})).json()["data"]
    assert _values(made_secret) == {tenancy.environment_id: "****"}


async def test_keys_are_checked_and_unique(api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    assert_error(await api.post("/v1/environment-variables", json={"key": "1BAD"}), 422)
    assert_error(await api.post("/v1/environment-variables", json={"key": "has-dash"}), 422)
    await _create(api, "BASE_URL", {})
    assert_error(await api.post("/v1/environment-variables", json={"key": "BASE_URL"}), 409)
    await _create(api, "OTHER", {})
    assert_error(await api.patch("/v1/environment-variables/OTHER", json={"key": "BASE_URL"}), 409)
    twice = [
        {"_environmentId": tenancy.environment_id, "value": "a"},
        {"_environmentId": tenancy.environment_id, "value": "b"},
    ]
    assert_error(await api.post("/v1/environment-variables", json={"key": "TWICE", "values": twice}), 400)


async def test_another_organizations_variables_and_environments_are_out_of_reach(
    api: httpx.AsyncClient, other_org_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    await _create(api, "BASE_URL", {tenancy.environment_id: "https://dev.test"})
    assert (await other_org_api.get("/v1/environment-variables")).json()["data"] == []
    assert_error(await other_org_api.get("/v1/environment-variables/BASE_URL"), 404)
    assert_error(await other_org_api.patch("/v1/environment-variables/BASE_URL", json={"key": "X"}), 404)
    assert_error(await other_org_api.delete("/v1/environment-variables/BASE_URL"), 404)
    assert_error(await other_org_api.get("/v1/environment-variables/BASE_URL/usage"), 404)
    # A value for our environment cannot be set from another organization; the same key is theirs to make.
    body = {"key": "BASE_URL", "values": [{"_environmentId": tenancy.environment_id, "value": "x"}]}
    assert_error(await other_org_api.post("/v1/environment-variables", json=body), 400)
    assert (await other_org_api.post("/v1/environment-variables", json={"key": "BASE_URL"})).status_code == 200
    assert _values((await api.get("/v1/environment-variables/BASE_URL")).json()["data"]) == {
        tenancy.environment_id: "https://dev.test"
    }


async def test_delete_answers_204_then_404(api: httpx.AsyncClient) -> None:
    await _create(api, "BASE_URL", {})
    assert (await api.delete("/v1/environment-variables/BASE_URL")).status_code == 204
    assert_error(await api.delete("/v1/environment-variables/BASE_URL"), 404)
