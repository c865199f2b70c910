"""Diff and publish carry layouts and workflow translations as well as workflows, in an order that works."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from novu_py import models

from herald.engine.worker import Worker
from tests.conftest import Tenancy
from tests.engine.conftest import messages_of, trigger, worker  # noqa: F401 (the worker fixture)
from tests.engine.test_delivery import name_of, settle
from tests.engine.test_translations import ENGLISH, FRENCH, STEPS
from tests.fixtures.builders import create_subscriber, create_workflow, unique
from tests.translations.helpers import translated_workflow

BODY = "<html><body><h1>{{layoutName}}</h1>{{content}}</body></html>"


async def _layout(api: httpx.AsyncClient, name: str, body: str = BODY) -> str:
    layout_id = unique("layout")
    assert (await api.post("/v2/layouts", json={"layoutId": layout_id, "name": name})).status_code == 201
    update = {"name": name, "controlValues": {"email": {"body": body, "editorType": "html"}}}
    response = await api.put(f"/v2/layouts/{layout_id}", json=update)
    assert response.status_code == 200, response.text
    return layout_id


async def _translate(api: httpx.AsyncClient, identifier: str, locale: str, content: dict[str, Any]) -> None:
    body = {"resourceId": identifier, "resourceType": "workflow", "locale": locale, "content": content}
    response = await api.post("/v2/translations", json=body)
    assert response.status_code == 200, response.text


async def _diff(api: httpx.AsyncClient, prod: str) -> dict[str, Any]:
    response = await api.post(f"/v2/environments/{prod}/diff", json={})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    # novu-py reads the whole answer, layouts and translations included.
    models.DiffEnvironmentResponseDto.model_validate(data)
    return data


async def _publish(production_api: httpx.AsyncClient, tenancy: Tenancy, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """Production's own key publishes Development's changes into it (Production is protected)."""
    request = {"sourceEnvironmentId": tenancy.environment_id, **(body or {})}
    response = await production_api.post(f"/v2/environments/{tenancy.production_environment_id}/publish", json=request)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    models.PublishEnvironmentResponseDto.model_validate(data)
    return data


def _actions(diff: dict[str, Any]) -> dict[str, str]:
    """Each resource's name (source's, else target's) and its own change's action."""
    return {(r["sourceResource"] or r["targetResource"])["name"]: r["changes"][0]["action"] for r in diff["resources"]}


async def _production_layouts(production_api: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    response = await production_api.get("/v2/layouts")
    assert response.status_code == 200, response.text
    return {layout["layoutId"]: layout for layout in response.json()["data"]["layouts"]}


async def _production_body(production_api: httpx.AsyncClient, layout_id: str) -> str:
    response = await production_api.get(f"/v2/layouts/{layout_id}")
    assert response.status_code == 200, response.text
    body: str = response.json()["data"]["controls"]["values"]["email"]["body"]
    return body


async def test_a_changed_layout_shows_in_diff_and_publish_copies_it(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    prod = tenancy.production_environment_id
    name = unique("Brand")
    layout_id = await _layout(api, name)
    assert _actions(await _diff(api, prod)) == {name: "added"}
    published = await _publish(production_api, tenancy)
    assert published["summary"] == {"resources": 1, "successful": 1, "failed": 0, "skipped": 0}
    assert [s["resourceName"] for r in published["results"] for s in r["successful"]] == [name]
    copied = await _production_layouts(production_api)
    assert set(copied) == {layout_id}
    assert "<h1>{{layoutName}}</h1>" in await _production_body(production_api, layout_id)

    changed = "<html><body><p>v2</p>{{content}}</body></html>"
    update = {"name": name, "controlValues": {"email": {"body": changed, "editorType": "html"}}}
    assert (await api.put(f"/v2/layouts/{layout_id}", json=update)).status_code == 200
    diff = await _diff(api, prod)
    assert _actions(diff) == {name: "modified"}
    (change,) = diff["resources"][0]["changes"]
    assert change["diffs"]["previous"]["content"] == BODY and change["diffs"]["new"]["content"] == changed
    await _publish(production_api, tenancy)
    assert await _production_body(production_api, layout_id) == changed
    assert (await _diff(api, prod))["summary"]["hasChanges"] is False


async def test_a_layout_deleted_in_development_is_deleted_in_production(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    prod = tenancy.production_environment_id
    kept, gone = await _layout(api, unique("Kept")), await _layout(api, unique("Gone"))
    await _publish(production_api, tenancy)
    assert set(await _production_layouts(production_api)) == {kept, gone}
    assert (await api.delete(f"/v2/layouts/{gone}")).status_code == 204
    diff = await _diff(api, prod)
    assert sorted(_actions(diff).values()) == ["deleted", "unchanged"]
    published = await _publish(production_api, tenancy)
    assert sorted(s["action"] for r in published["results"] for s in r["successful"]) == ["deleted"]
    assert set(await _production_layouts(production_api)) == {kept}


async def test_a_layout_is_published_before_the_workflow_that_names_it(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    layout_id = await _layout(api, unique("Brand"))
    workflow = await create_workflow(api, name=unique("branded"))
    published = await _publish(production_api, tenancy)
    names = [s["resourceName"] for r in published["results"] for s in r["successful"]]
    assert names[-1] == workflow["name"] and len(names) == 2
    # Chosen by Novu's kind name and the layout's key.
    update = {"name": "Renamed", "controlValues": {"email": {"body": BODY, "editorType": "html"}}}
    assert (await api.put(f"/v2/layouts/{layout_id}", json=update)).status_code == 200
    chosen = await _publish(production_api, tenancy, {"resources": [{"resourceType": "layout", "resourceId": layout_id}]})
    assert chosen["summary"]["successful"] == 1
    assert (await _production_layouts(production_api))[layout_id]["name"] == "Renamed"


async def test_a_translation_is_published_and_production_renders_in_french(
    api: httpx.AsyncClient,
    production_api: httpx.AsyncClient,
    app: FastAPI,
    tenancy: Tenancy,
    worker: Worker,  # noqa: F811
) -> None:
    prod = tenancy.production_environment_id
    workflow = await translated_workflow(app, api, tenancy.environment_id, steps=STEPS)
    identifier = name_of(workflow)
    await _translate(api, identifier, "en_US", ENGLISH)
    await _publish(production_api, tenancy)
    await _translate(api, identifier, "fr_FR", FRENCH)
    diff = await _diff(api, prod)
    assert _actions(diff) == {
        workflow["name"]: "unchanged",
        f"{identifier} (en_US)": "unchanged",
        f"{identifier} (fr_FR)": "added",
    }
    added = next(r for r in diff["resources"] if r["changes"][0]["action"] == "added")
    assert added["changes"][0]["diffs"]["new"]["content"] == FRENCH
    published = await _publish(production_api, tenancy)
    assert published["summary"]["successful"] == 1 and published["summary"]["skipped"] == 2

    recipient = await create_subscriber(production_api, locale="fr_FR")
    result = await trigger(production_api, identifier, recipient["subscriberId"], payload={"name": "Ada"})
    jobs = await settle(worker, app, result["transactionId"])
    assert {job.status for job in jobs} == {"completed"}
    messages = await messages_of(app, prod, transaction_id=result["transactionId"])
    contents = [m.content for m in sorted(messages, key=lambda m: m.created_at)]
    assert contents == ["Bienvenue | Bonjour Ada", "Merci | Default only | nowhere.at_all"]


async def test_a_translation_deleted_in_development_is_deleted_in_production(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    prod = tenancy.production_environment_id
    workflow = await translated_workflow(app, api, tenancy.environment_id, steps=STEPS)
    identifier = name_of(workflow)
    await _translate(api, identifier, "fr_FR", FRENCH)
    await _publish(production_api, tenancy)
    assert (await production_api.get(f"/v2/translations/workflow/{identifier}/fr_FR")).status_code == 200
    assert (await api.delete(f"/v2/translations/workflow/{identifier}/fr_FR")).status_code == 204
    assert _actions(await _diff(api, prod))[f"{identifier} (fr_FR)"] == "deleted"
    # Chosen alone, by Novu's kind name and the translation's key.
    chosen = {"resources": [{"resourceType": "localization_group", "resourceId": f"{identifier}:fr_FR"}]}
    published = await _publish(production_api, tenancy, chosen)
    assert [(s["resourceName"], s["action"]) for r in published["results"] for s in r["successful"]] == [
        (f"{identifier} (fr_FR)", "deleted")
    ]
    assert (await production_api.get(f"/v2/translations/workflow/{identifier}/fr_FR")).status_code == 404
