"""The Workflows page: search by name, identifier and tag; the active switch (author and up, audited); a workflow's steps."""

from __future__ import annotations

import html
import re

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from herald.models import AuditEntry
from tests.conftest import Tenancy
from tests.fixtures.builders import create_workflow, unique
from tests.fixtures.console import ConsoleAs


def _row_names(page: str) -> list[str]:
    return [html.unescape(name) for name in re.findall(r'<th scope="row"><a href="/console/workflows/[^"]+">([^<]+)</a></th>', page)]


async def test_search_finds_workflows_by_name_identifier_or_tag(console_as: ConsoleAs, api: httpx.AsyncClient) -> None:
    word = unique("word")
    by_name = await create_workflow(api, name=f"Welcome {word}", tags=["onboarding"])
    by_identifier = await create_workflow(api, name=unique("Plain"), triggerIdentifier=f"reset-{word}")
    by_tag = await create_workflow(api, name=unique("Digest"), tags=["weekly", f"team-{word.upper()}"])
    other = await create_workflow(api, name=unique("Other"), tags=["billing"])
    viewer = await console_as("viewer")
    page = await viewer.get("/console/workflows", params={"search": word})
    assert page.status_code == 200
    assert '<label for="search">Search</label>' in page.text
    assert sorted(_row_names(page.text)) == sorted([by_name["name"], by_identifier["name"], by_tag["name"]])
    everything = await viewer.get("/console/workflows")
    assert {by_name["name"], other["name"]} <= set(_row_names(everything.text))
    assert "No workflow matches" in (await viewer.get("/console/workflows", params={"search": unique("nothing")})).text
    # Each row links to its workflow's page.
    assert f'href="/console/workflows/{by_tag["_id"]}"' in page.text


async def test_an_author_switches_a_workflow_off_and_on_and_the_audit_log_has_it(
    app: FastAPI, console_as: ConsoleAs, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    workflow = await create_workflow(api, name=unique("Switch"))
    author = await console_as("author")
    page = await author.get("/console/workflows", params={"search": workflow["name"]})
    assert "Deactivate" in page.text
    answer = await author.post_form(f"/console/workflows/{workflow['_id']}/active", {"active": "false", "next": "/console/workflows?search=x"})
    assert (answer.status_code, answer.headers["location"]) == (303, "/console/workflows?search=x")
    assert (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"]["active"] is False
    # An inactive workflow accepts no trigger.
    refused = await api.post("/v1/events/trigger", json={"name": workflow["triggers"][0]["identifier"], "to": "someone"})
    assert refused.json()["data"]["status"] == "trigger_not_active"
    listed = await author.get("/console/workflows", params={"search": workflow["name"]})
    assert "Inactive" in listed.text and "Activate<span" in listed.text
    await author.post_form(f"/console/workflows/{workflow['_id']}/active", {"active": "true", "next": "https://evil.example/"})
    assert (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"]["active"] is True
    async with app.state.sessionmaker() as session:
        entries = (
            await session.execute(
                select(AuditEntry).where(AuditEntry.resource_id == workflow["_id"], AuditEntry.actor_email == author.member.email)
            )
        ).scalars().all()
    assert sorted(entry.changes["active"] for entry in entries) == [False, True]
    assert {entry.action for entry in entries} == {"workflow.status.updated"}
    assert {entry.environment_id for entry in entries} == {tenancy.environment_id}


async def test_a_viewer_sees_no_switch_and_cannot_use_one_and_a_switch_needs_the_csrf_token(
    console_as: ConsoleAs, api: httpx.AsyncClient
) -> None:
    workflow = await create_workflow(api, name=unique("Guarded"))
    viewer = await console_as("viewer")
    page = await viewer.get("/console/workflows", params={"search": workflow["name"]})
    assert workflow["name"] in page.text and "Deactivate" not in page.text
    refused = await viewer.post_form(f"/console/workflows/{workflow['_id']}/active", {"active": "false"})
    assert refused.status_code == 403
    admin = await console_as("admin")
    await admin.get("/console/workflows")
    assert (await admin.post_form(f"/console/workflows/{workflow['_id']}/active", {"active": "false"}, csrf="")).status_code == 403
    assert (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"]["active"] is True


async def test_a_workflows_page_shows_its_steps_and_only_in_its_environment(
    console_as: ConsoleAs, api: httpx.AsyncClient, production_api: httpx.AsyncClient
) -> None:
    steps = [
        {"name": "Welcome email", "template": {"type": "email", "subject": "Hello {{subscriber.firstName}}", "content": "Hi"}},
        {"name": "Wait a day", "template": {"type": "delay"}, "metadata": {"type": "regular", "amount": 1, "unit": "days"}},
        {"name": "Nudge", "active": False, "template": {"type": "in_app", "content": "Still there?"}},
    ]
    workflow = await create_workflow(api, name=unique("Steps"), description="Greets new people", tags=["onboarding"], steps=steps)
    elsewhere = await create_workflow(production_api, name=unique("Production only"))
    viewer = await console_as("viewer")
    page = await viewer.get(f"/console/workflows/{workflow['_id']}")
    assert page.status_code == 200
    text = html.unescape(page.text)
    for expected in ("Welcome email", "Hello {{subscriber.firstName}}", "Wait a day", "amount 1, unit days", "Nudge", "Greets new people", "onboarding"):
        assert expected in text
    rows = re.findall(r"<tr>\s*<td class=\"numeric\">(\d)</td>\s*<th scope=\"row\">([^<]+)</th>\s*<td>(\w+)</td>.*?<td>(Yes|No)</td>", page.text, re.S)
    assert rows == [("1", "Welcome email", "email", "Yes"), ("2", "Wait a day", "delay", "Yes"), ("3", "Nudge", "in_app", "No")]
    # Another environment's workflow is not found from this one.
    assert (await viewer.get(f"/console/workflows/{elsewhere['_id']}")).status_code == 404
    assert elsewhere["name"] not in (await viewer.get("/console/workflows")).text


@pytest.mark.parametrize("role", ["owner", "admin", "author", "viewer"])
async def test_every_role_against_the_workflows_and_analytics_pages(
    console_as: ConsoleAs, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy, role: str
) -> None:
    workflow = await create_workflow(api, name=unique("Roles"))
    in_production = await create_workflow(production_api, name=unique("Roles in production"))
    client = await console_as(role)
    assert (await client.get("/console/workflows")).status_code == 200
    assert (await client.get(f"/console/workflows/{workflow['_id']}")).status_code == 200
    assert (await client.get("/console/analytics?days=30")).status_code == 200
    switched = await client.post_form(f"/console/workflows/{workflow['_id']}/active", {"active": "false"})
    if role == "viewer":
        assert switched.status_code == 403 and "Your role (viewer) does not allow workflows.write" in switched.text
    else:
        assert switched.status_code == 303
    # Production is protected: only owners and admins change it (authors do not publish to Production).
    chosen = await client.post_form("/console/environment", {"environment": tenancy.production_environment_id, "next": "/console/workflows"})
    assert chosen.status_code == 303
    await client.get("/console/workflows")
    production = await client.post_form(f"/console/workflows/{in_production['_id']}/active", {"active": "false"})
    assert production.status_code == (303 if role in ("owner", "admin") else 403)
    active = (await production_api.get(f"/v1/workflows/{in_production['_id']}")).json()["data"]["active"]
    assert active is (role not in ("owner", "admin"))
