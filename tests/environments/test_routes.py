"""Environments: v1 management and v2 diff/publish, scoped to the caller's organization."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select

from herald.models import ApiKey, Environment, Integration, NotificationGroup, Workflow
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.builders import create_subscriber, create_workflow, unique


def identifier_of(workflow: dict[str, Any]) -> str:
    return workflow["triggers"][0]["identifier"]


async def publish(production_api: httpx.AsyncClient, tenancy: Tenancy, body: dict[str, Any] | None = None) -> httpx.Response:
    """Production's own key publishes Development's changes into it (Production is protected)."""
    request = {"sourceEnvironmentId": tenancy.environment_id, **(body or {})}
    return await production_api.post(f"/v2/environments/{tenancy.production_environment_id}/publish", json=request)


async def _create(api: httpx.AsyncClient, name: str) -> dict[str, Any]:
    response = await api.post("/v1/environments", json={"name": name, "color": "#123456"})
    assert response.status_code == 201, response.text
    return response.json()["data"]


async def test_a_new_environment_is_made_as_bootstrap_makes_one(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    created = await _create(api, "Staging")
    assert created["_organizationId"] == tenancy.organization_id
    assert created["type"] == "dev" and created["_parentId"] == tenancy.environment_id and created["slug"] == "staging"
    async with app.state.sessionmaker() as session:
        environment = await session.get(Environment, created["_id"])
        assert environment is not None and environment.identifier == created["identifier"]
        integrations = (
            (await session.execute(select(Integration).where(Integration.environment_id == created["_id"])))
            .scalars()
            .all()
        )
        assert [(i.provider_id, i.channel, i.active) for i in integrations] == [("novu", "in_app", True)]
        groups = (
            (
                await session.execute(
                    select(NotificationGroup.name).where(NotificationGroup.environment_id == created["_id"])
                )
            )
            .scalars()
            .all()
        )
        assert groups == ["General"]
        keys = (
            await session.execute(
                select(func.count()).select_from(ApiKey).where(ApiKey.environment_id == created["_id"])
            )
        ).scalar_one()
        assert keys == 1
    # The key answered works for that environment, and the list never shows keys.
    async with make_client(app, created["apiKeys"][0]["key"]) as staging:
        assert (await staging.get("/v1/workflows")).status_code == 200
    listed = (await api.get("/v1/environments")).json()["data"]
    assert [env["name"] for env in listed] == ["Development", "Production", "Staging"]
    assert all("apiKeys" not in env for env in listed)


async def test_names_are_unique_in_the_organization(api: httpx.AsyncClient, other_org_api: httpx.AsyncClient) -> None:
    await _create(api, "Staging")
    assert_error(await api.post("/v1/environments", json={"name": "Staging", "color": "#fff"}), 409)
    assert_error(await api.post("/v1/environments", json={"name": "Production", "color": "#fff"}), 409)
    # Another organization may have its own Staging.
    await _create(other_org_api, "Staging")


async def test_update_renames_and_refuses_renaming_the_default_pair(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    created = await _create(api, "QA")
    response = await api.put(f"/v1/environments/{created['_id']}", json={"name": "Quality", "identifier": unique("qa")})
    assert response.status_code == 200, response.text
    assert response.json()["data"]["name"] == "Quality"
    assert_error(await api.put(f"/v1/environments/{tenancy.environment_id}", json={"name": "Dev"}), 400)
    renamed = await production_api.put(f"/v1/environments/{tenancy.production_environment_id}", json={"name": "Live"})
    assert_error(renamed, 400)


async def test_delete_takes_the_environment_its_data_and_keys(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    created = await _create(api, "Temporary")
    values = [{"_environmentId": env, "value": "v"} for env in (tenancy.environment_id, created["_id"])]
    assert (await api.post("/v1/environment-variables", json={"key": "KEPT", "values": values})).status_code == 200
    async with make_client(app, created["apiKeys"][0]["key"]) as temporary:
        await create_workflow(temporary)
        response = await api.delete(f"/v1/environments/{created['_id']}")
        assert response.status_code == 200, response.text
        assert_error(await temporary.get("/v1/workflows"), 401)
    async with app.state.sessionmaker() as session:
        assert await session.get(Environment, created["_id"]) is None
        left = (
            await session.execute(
                select(func.count()).select_from(Workflow).where(Workflow.environment_id == created["_id"])
            )
        ).scalar_one()
        assert left == 0
    kept = (await api.get("/v1/environment-variables/KEPT")).json()["data"]
    assert kept["values"] == [{"_environmentId": tenancy.environment_id, "value": "v"}]
    assert_error(await api.delete(f"/v1/environments/{tenancy.environment_id}"), 400)
    assert_error(await api.delete(f"/v1/environments/{tenancy.production_environment_id}"), 400)
    assert_error(await api.delete(f"/v1/environments/{created['_id']}"), 404)


async def test_another_organizations_environments_are_invisible(
    api: httpx.AsyncClient, other_org_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    theirs = (await other_org_api.get("/v1/environments")).json()["data"]
    assert {env["_id"] for env in theirs}.isdisjoint({tenancy.environment_id, tenancy.production_environment_id})
    target = tenancy.production_environment_id
    assert_error(await other_org_api.put(f"/v1/environments/{target}", json={"name": "Mine"}), 404)
    assert_error(await other_org_api.delete(f"/v1/environments/{target}"), 404)
    assert_error(await other_org_api.get(f"/v2/environments/{target}/tags"), 404)
    assert_error(await other_org_api.post(f"/v2/environments/{target}/diff", json={}), 404)
    assert_error(await other_org_api.post(f"/v2/environments/{target}/publish", json={}), 404)
    # Nor can ours be named as the source.
    their_production = next(env["_id"] for env in theirs if env["name"] == "Production")
    body = {"sourceEnvironmentId": tenancy.environment_id}
    assert_error(await other_org_api.post(f"/v2/environments/{their_production}/publish", json=body), 404)
    assert_error(await api.post(f"/v2/environments/{tenancy.environment_id}/diff", json={}), 400)


async def test_tags_are_the_distinct_tags_of_the_environments_workflows(
    api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    await create_workflow(api, tags=["b", "a"])
    deleted = await create_workflow(api, tags=["gone"])
    await api.delete(f"/v1/workflows/{deleted['_id']}")
    response = await api.get(f"/v2/environments/{tenancy.environment_id}/tags")
    assert response.json()["data"] == [{"name": "a"}, {"name": "b"}]
    assert (await api.get(f"/v2/environments/{tenancy.production_environment_id}/tags")).json()["data"] == []


async def test_diff_and_publish_add_modify_and_delete(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    prod = tenancy.production_environment_id
    kept = await create_workflow(api, name=unique("kept"), tags=["v1"])
    removed = await create_workflow(api, name=unique("removed"))
    assert (await publish(production_api, tenancy)).status_code == 200
    # Development changes: one edited, one deleted, one new.
    await api.put(f"/v1/workflows/{kept['_id']}", json={"tags": ["v2"]})
    await api.delete(f"/v1/workflows/{removed['_id']}")
    added = await create_workflow(api, name=unique("added"))

    diff = (await api.post(f"/v2/environments/{prod}/diff", json={})).json()["data"]
    actions = {
        r["changes"][0]["sourceResource"]["name"] if r["sourceResource"] else r["targetResource"]["name"]: r["changes"][
            0
        ]["action"]
        for r in diff["resources"]
    }
    assert actions == {kept["name"]: "modified", removed["name"]: "deleted", added["name"]: "added"}
    modified = next(r for r in diff["resources"] if r["changes"][0]["action"] == "modified")
    assert modified["changes"][0]["diffs"]["previous"]["tags"] == ["v1"] and modified["changes"][0]["diffs"]["new"][
        "tags"
    ] == ["v2"]
    assert diff["summary"] == {"totalEntities": 3, "totalChanges": 3, "hasChanges": True}

    published = (await publish(production_api, tenancy)).json()["data"]
    assert published["summary"] == {"resources": 3, "successful": 3, "failed": 0, "skipped": 0}
    assert sorted(s["action"] for s in published["results"][0]["successful"]) == ["created", "deleted", "updated"]
    listed = {identifier_of(w): w for w in (await production_api.get("/v1/workflows")).json()["data"]}
    assert set(listed) == {identifier_of(kept), identifier_of(added)}
    assert listed[identifier_of(kept)]["tags"] == ["v2"]
    # Nothing left to publish: every item is skipped as unchanged.
    again = (await api.post(f"/v2/environments/{prod}/diff", json={})).json()["data"]
    assert again["summary"]["hasChanges"] is False


async def test_publish_dry_run_and_chosen_resources(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    prod = tenancy.production_environment_id
    first = await create_workflow(api, name=unique("first"))
    second = await create_workflow(api, name=unique("second"))
    dry = (await api.post(f"/v2/environments/{prod}/publish", json={"dryRun": True})).json()["data"]
    assert dry["summary"]["successful"] == 2
    assert (await production_api.get("/v1/workflows")).json()["data"] == []
    body = {"resources": [{"resourceType": "REGULAR", "resourceId": first["_id"]}]}
    chosen = (await publish(production_api, tenancy, body)).json()["data"]
    assert [s["resourceName"] for s in chosen["results"][0]["successful"]] == [first["name"]]
    assert [identifier_of(w) for w in (await production_api.get("/v1/workflows")).json()["data"]] == [
        identifier_of(first)
    ]
    # By key and by Herald's kind name too; an unknown resource is refused.
    body = {"resources": [{"resourceType": "workflow", "resourceId": identifier_of(second)}]}
    assert (await publish(production_api, tenancy, body)).status_code == 200
    assert len((await production_api.get("/v1/workflows")).json()["data"]) == 2
    assert_error(await publish(production_api, tenancy, {"resources": [{"resourceType": "REGULAR", "resourceId": "nope"}]}), 404)
    assert_error(await publish(production_api, tenancy, {"resources": [{"resourceType": "nope", "resourceId": "x"}]}), 400)


async def test_a_published_development_workflow_triggers_in_production(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    workflow = await create_workflow(api, name=unique("promoted"))
    subscriber = await create_subscriber(production_api)
    body = {"name": identifier_of(workflow), "to": subscriber["subscriberId"], "payload": {"name": "Ada"}}
    before = await production_api.post("/v1/events/trigger", json=body)
    assert_error(before, 422)
    assert (await publish(production_api, tenancy)).status_code == 200
    after = await production_api.post("/v1/events/trigger", json=body)
    assert after.status_code == 201, after.text
    assert after.json()["data"]["status"] == "processed"


async def test_diff_lists_the_steps_of_a_modified_workflow(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    prod = tenancy.production_environment_id
    workflow = await create_workflow(api, name=unique("steps"))
    assert (await publish(production_api, tenancy)).status_code == 200
    unchanged = (await api.post(f"/v2/environments/{prod}/diff", json={})).json()["data"]
    assert [c["action"] for c in unchanged["resources"][0]["changes"]] == ["unchanged", "unchanged"]
    steps = [
        {"name": "inbox", "template": {"type": "in_app", "content": "Changed {{payload.name}}"}},
        {"name": "mail", "template": {"type": "email", "subject": "Hi", "content": "Hello"}},
    ]
    assert (await api.put(f"/v1/workflows/{workflow['_id']}", json={"steps": steps})).status_code == 200
    diff = (await api.post(f"/v2/environments/{prod}/diff", json={})).json()["data"]
    (resource,) = diff["resources"]
    workflow_change, *step_changes = resource["changes"]
    assert workflow_change["action"] == "modified"
    assert [(c["action"], c["stepType"], c.get("previousIndex"), c["newIndex"]) for c in step_changes] == [
        ("modified", "in_app", 0, 0),
        ("added", "email", None, 1),
    ]
    assert step_changes[0]["diffs"]["new"]["template"]["content"] == "Changed {{payload.name}}"
    assert resource["summary"] == {"added": 1, "modified": 2, "deleted": 0, "unchanged": 0}
