"""novu.environment_variables.*: variables of the organization with a value per environment."""

from __future__ import annotations

import httpx
import pytest
from novu_py import Novu, models

from tests.conftest import Tenancy
from tests.fixtures.builders import create_workflow
from tests.sdk.operations.conftest import call


def _values(variable: models.EnvironmentVariableResponseDto) -> dict[str, str]:
    return {value.environment_id: value.value for value in variable.values}


async def _create(
    novu: Novu, tenancy: Tenancy, key: str, *, secret: bool = False
) -> models.EnvironmentVariableResponseDto:
    """Called with Production's key: the variable has a value for Production, which is protected."""
    return await call(
        lambda: (
            novu.environment_variables.create(
                create_environment_variable_request_dto={
                    "key": key,
                    "type": models.CreateEnvironmentVariableRequestDtoType.STRING,
                    "is_secret": secret,
                    "values": [
                        {"environment_id": tenancy.environment_id, "value": "https://dev.example.com"},
                        {"environment_id": tenancy.production_environment_id, "value": "https://example.com"},
                    ],
                }
            ).result
        )
    )


async def test_environment_variables_create(novu: Novu, production_novu: Novu, tenancy: Tenancy) -> None:
    created = await _create(production_novu, tenancy, "BASE_URL")
    assert created.key == "BASE_URL" and not created.is_secret
    assert created.organization_id == tenancy.organization_id
    assert _values(created) == {
        tenancy.environment_id: "https://dev.example.com",
        tenancy.production_environment_id: "https://example.com",
    }
    secret = await _create(production_novu, tenancy, "SIGNING_KEY", secret=True)
    assert secret.is_secret and set(_values(secret).values()) == {"****"}


async def test_environment_variables_list(novu: Novu, production_novu: Novu, tenancy: Tenancy) -> None:
    await _create(production_novu, tenancy, "BASE_URL")
    await _create(production_novu, tenancy, "OTHER")
    listed = await call(lambda: novu.environment_variables.list().result)
    assert [variable.key for variable in listed] == ["BASE_URL", "OTHER"]
    searched = await call(lambda: novu.environment_variables.list(search="base").result)
    assert [variable.key for variable in searched] == ["BASE_URL"]


async def test_environment_variables_retrieve(novu: Novu, production_novu: Novu, tenancy: Tenancy) -> None:
    created = await _create(production_novu, tenancy, "BASE_URL")
    fetched = await call(lambda: novu.environment_variables.retrieve(variable_key="BASE_URL").result)
    assert fetched.id == created.id and _values(fetched) == _values(created)


async def test_environment_variables_update(novu: Novu, production_novu: Novu, tenancy: Tenancy) -> None:
    await _create(production_novu, tenancy, "BASE_URL")
    updated = await call(
        lambda: (
            production_novu.environment_variables.update(
                variable_key="BASE_URL",
                update_environment_variable_request_dto={
                    "key": "API_URL",
                    "values": [{"environment_id": tenancy.environment_id, "value": "https://api.dev.example.com"}],
                },
            ).result
        )
    )
    assert updated.key == "API_URL"
    assert _values(updated) == {tenancy.environment_id: "https://api.dev.example.com"}
    with pytest.raises(models.APIError) as gone:
        await call(lambda: novu.environment_variables.retrieve(variable_key="BASE_URL"))
    assert gone.value.status_code == 404


async def test_environment_variables_delete(novu: Novu, production_novu: Novu, tenancy: Tenancy) -> None:
    await _create(production_novu, tenancy, "BASE_URL")
    await call(lambda: production_novu.environment_variables.delete(variable_key="BASE_URL"))
    assert await call(lambda: novu.environment_variables.list().result) == []


async def test_environment_variables_usage(novu: Novu, production_novu: Novu, tenancy: Tenancy, api: httpx.AsyncClient) -> None:
    await _create(production_novu, tenancy, "BASE_URL")
    reading = await create_workflow(
        api, steps=[{"name": "inbox", "template": {"type": "in_app", "content": "Open {{ env.BASE_URL }}/orders"}}]
    )
    await create_workflow(
        api, steps=[{"name": "inbox", "template": {"type": "in_app", "content": "BASE_URL {{payload.x}}"}}]
    )
    usage = await call(lambda: novu.environment_variables.usage(variable_key="BASE_URL").result)
    assert [(w.name, w.workflow_id) for w in usage.workflows] == [
        (reading["name"], reading["triggers"][0]["identifier"])
    ]
