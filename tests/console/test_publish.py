"""Publishing from the console, in process: the differences item by item, only the chosen ones published."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI

from herald.audit.service import list_entries
from tests.conftest import Tenancy
from tests.fixtures.builders import create_workflow
from tests.fixtures.console import ConsoleAs

CHECKBOX = re.compile(r'<input type="checkbox" name="resource" value="([^"]+)"')
TEXT_STEP = {"name": "text", "template": {"type": "sms", "content": "Hi {{payload.name}}"}}


def identifier(workflow: dict) -> str:
    return workflow["triggers"][0]["identifier"]


async def production_identifiers(production_api: httpx.AsyncClient) -> set[str]:
    listed = (await production_api.get("/v1/workflows", params={"limit": 100})).json()["data"]
    return {identifier(workflow) for workflow in listed}


async def test_only_the_chosen_changes_reach_production(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient, production_api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    chosen = await create_workflow(api)
    left = await create_workflow(api)
    admin = await console_as("admin")
    page = await admin.get("/console/environments/publish")
    assert page.status_code == 200, page.text
    assert "Changes from Development to Production" in page.text
    boxes = CHECKBOX.findall(page.text)
    assert {f"workflow:{chosen['_id']}", f"workflow:{left['_id']}"} <= set(boxes)

    # Without the CSRF token: refused.
    form = {"source": tenancy.environment_id, "target": tenancy.production_environment_id, "resource": f"workflow:{chosen['_id']}"}
    assert (await admin.post_form("/console/environments/publish", form, csrf="")).status_code == 403
    published = await admin.post_form("/console/environments/publish", form)
    assert published.status_code == 303, published.text
    in_production = await production_identifiers(production_api)
    assert identifier(chosen) in in_production and identifier(left) not in in_production

    # A step added in Development shows as that change, and the other workflow is still waiting.
    updated = await api.put(f"/v1/workflows/{chosen['_id']}", json={"steps": [*chosen["steps"], TEXT_STEP]})
    assert updated.status_code == 200, updated.text
    again = await admin.get("/console/environments/publish")
    assert "sms step “text” added" in again.text
    assert f"workflow:{left['_id']}" in CHECKBOX.findall(again.text)

    async with app.state.sessionmaker() as session:
        log = await list_entries(session, tenancy.organization_id, limit=50)
    [entry] = [entry for entry in log.entries if entry.action == "environment.published"]
    assert entry.resource_id == tenancy.production_environment_id
    assert [item["name"] for item in entry.changes["published"]] == [chosen["name"]]


async def test_authors_and_viewers_read_the_differences_but_do_not_publish(
    tenancy: Tenancy, api: httpx.AsyncClient, production_api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    workflow = await create_workflow(api)
    for role in ("author", "viewer"):
        member = await console_as(role)
        page = await member.get("/console/environments/publish")
        assert page.status_code == 200 and workflow["name"] in page.text
        assert CHECKBOX.findall(page.text) == [] and ">Publish</button>" not in page.text
        form = {"source": tenancy.environment_id, "target": tenancy.production_environment_id, "resource": f"workflow:{workflow['_id']}"}
        assert (await member.post_form("/console/environments/publish", form)).status_code == 403
    assert identifier(workflow) not in await production_identifiers(production_api)


async def test_publishing_nothing_chosen_says_so(tenancy: Tenancy, api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    await create_workflow(api)
    owner = await console_as("owner")
    await owner.get("/console/environments/publish")
    refused = await owner.post_form(
        "/console/environments/publish", {"source": tenancy.environment_id, "target": tenancy.production_environment_id}
    )
    assert refused.status_code == 422 and "Choose at least one change to publish" in refused.text
