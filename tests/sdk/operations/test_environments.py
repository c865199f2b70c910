"""novu.environments.*: v1 environment management and v2 change management (diff, publish)."""

from __future__ import annotations

import httpx
import pytest
from novu_py import Novu, models

from tests.conftest import Tenancy
from tests.fixtures.builders import create_workflow, unique
from tests.sdk.operations.conftest import call


async def _layout(api: httpx.AsyncClient) -> str:
    layout_id = unique("layout")
    assert (await api.post("/v2/layouts", json={"layoutId": layout_id, "name": "Brand"})).status_code == 201
    return layout_id


async def _translate(api: httpx.AsyncClient, identifier: str) -> None:
    body = {"resourceId": identifier, "resourceType": "workflow", "locale": "fr_FR", "content": {"hi": "Salut"}}
    assert (await api.post("/v2/translations", json=body)).status_code == 200


async def test_environments_list(novu: Novu, tenancy: Tenancy) -> None:
    listed = await call(lambda: novu.environments.list().result)
    by_name = {env.name: env for env in listed}
    assert set(by_name) == {"Development", "Production"}
    assert by_name["Development"].id == tenancy.environment_id
    assert by_name["Production"].type == models.EnvironmentResponseDtoType.PROD
    assert by_name["Production"].parent_id == tenancy.environment_id
    assert all(env.organization_id == tenancy.organization_id for env in listed)


async def test_environments_create(novu: Novu, server_url: str) -> None:
    created = await call(
        lambda: novu.environments.create(create_environment_request_dto={"name": "Staging", "color": "#ff0000"}).result
    )
    assert created.name == "Staging" and created.identifier and created.api_keys
    # The new environment's key works, and is scoped to it.
    staging = Novu(secret_key=created.api_keys[0].key, server_url=server_url)
    subscriber = await call(
        lambda: staging.subscribers.create(create_subscriber_request_dto={"subscriber_id": "in-staging"}).result
    )
    assert subscriber.environment_id == created.id
    names = [env.name for env in await call(lambda: novu.environments.list().result)]
    assert names.count("Staging") == 1


async def test_environments_update(novu: Novu) -> None:
    created = await call(
        lambda: novu.environments.create(create_environment_request_dto={"name": "QA", "color": "#00ff00"}).result
    )
    updated = await call(
        lambda: (
            novu.environments.update(
                environment_id=created.id, update_environment_request_dto={"name": "Quality"}
            ).result
        )
    )
    assert updated.id == created.id and updated.name == "Quality"
    assert "Quality" in [env.name for env in await call(lambda: novu.environments.list().result)]


async def test_environments_delete(novu: Novu, tenancy: Tenancy) -> None:
    created = await call(
        lambda: novu.environments.create(create_environment_request_dto={"name": "Doomed", "color": "#000"}).result
    )
    await call(lambda: novu.environments.delete(environment_id=created.id))
    assert "Doomed" not in [env.name for env in await call(lambda: novu.environments.list().result)]
    with pytest.raises(models.ErrorDto) as refused:
        await call(lambda: novu.environments.delete(environment_id=tenancy.production_environment_id))
    assert refused.value.status_code == 400


async def test_environments_get_tags(novu: Novu, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    await create_workflow(api, tags=["billing", "alerts"])
    await create_workflow(api, tags=["alerts"])
    tags = await call(lambda: novu.environments.get_tags(environment_id=tenancy.environment_id).result)
    assert sorted(tag.name for tag in tags) == ["alerts", "billing"]


async def test_environments_diff(novu: Novu, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    workflow = await create_workflow(api, name=unique("diffed"))
    layout_id = await _layout(api)
    await _translate(api, workflow["triggers"][0]["identifier"])
    diff = await call(
        lambda: (
            novu.environments.diff(
                target_environment_id=tenancy.production_environment_id, diff_environment_request_dto={}
            ).result
        )
    )
    assert diff.source_environment_id == tenancy.environment_id
    assert diff.target_environment_id == tenancy.production_environment_id
    assert diff.summary.has_changes and diff.summary.total_changes == 3
    # The layout, the workflow, the workflow's French translation: all read by the SDK as REGULAR.
    assert [r.resource_type for r in diff.resources] == [models.ResourceTypeEnum.REGULAR] * 3
    assert all(r.changes[0].action == models.DiffActionEnum.ADDED for r in diff.resources)
    assert [r.source_resource.name for r in diff.resources if r.source_resource is not None] == [
        "Brand",
        workflow["name"],
        f"{workflow['triggers'][0]['identifier']} (fr_FR)",
    ]
    assert diff.resources[1].source_resource is not None and diff.resources[1].source_resource.id == workflow["_id"]
    assert diff.resources[0].changes[0].diffs is not None
    assert (diff.resources[0].changes[0].diffs.new or {})["layoutId"] == layout_id


async def test_environments_publish(
    novu: Novu, production_novu: Novu, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    workflow = await create_workflow(api, name=unique("published"))
    identifier = workflow["triggers"][0]["identifier"]
    dry = await call(
        lambda: (
            novu.environments.publish(
                target_environment_id=tenancy.production_environment_id,
                publish_environment_request_dto={"dry_run": True},
            ).result
        )
    )
    assert dry.summary.successful == 1
    assert (await production_api.get("/v1/workflows")).json()["totalCount"] == 0
    # Production is protected: its own key publishes Development's changes into it.
    published = await call(
        lambda: (
            production_novu.environments.publish(
                target_environment_id=tenancy.production_environment_id,
                publish_environment_request_dto={"source_environment_id": tenancy.environment_id},
            ).result
        )
    )
    (result,) = published.results
    assert [(s.resource_name, s.action) for s in result.successful] == [
        (workflow["name"], models.SyncActionEnum.CREATED)
    ]
    listed = (await production_api.get("/v1/workflows")).json()["data"]
    assert [w["triggers"][0]["identifier"] for w in listed] == [identifier]
    # A layout chosen through the SDK: its resourceType is REGULAR, its id tells it from the workflows.
    layout_id = await _layout(api)
    layout = (await api.get(f"/v2/layouts/{layout_id}")).json()["data"]
    chosen = await call(
        lambda: (
            production_novu.environments.publish(
                target_environment_id=tenancy.production_environment_id,
                publish_environment_request_dto={
                    "source_environment_id": tenancy.environment_id,
                    "resources": [{"resource_type": "REGULAR", "resource_id": layout["_id"]}],
                },
            ).result
        )
    )
    assert [(s.resource_name, s.action) for r in chosen.results for s in r.successful] == [
        ("Brand", models.SyncActionEnum.CREATED)
    ]
    assert (await production_api.get(f"/v2/layouts/{layout_id}")).status_code == 200
