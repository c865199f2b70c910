"""The Layouts page, in process: list, create and edit with a preview, templates checked before saving, the default."""

from __future__ import annotations

import html
import re

import httpx
from fastapi import FastAPI

from herald.audit.service import list_entries
from tests.conftest import Tenancy
from tests.fixtures.builders import unique
from tests.fixtures.console import ConsoleAs

CONTENT = "<html><body><header>Acme</header>{{{body}}}<footer>Bye {{ subscriber.firstName }}</footer></body></html>"


def srcdoc(page: httpx.Response) -> str:
    found = re.search(r'<iframe class="email-preview" sandbox srcdoc="([^"]*)"', page.text)
    assert found, page.text
    return html.unescape(found.group(1))


async def test_an_author_creates_and_edits_a_layout_and_sees_a_sample_email_inside_it(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    author = await console_as("author")
    form = await author.get("/console/layouts/new")
    assert form.status_code == 200 and 'for="content"' in form.text
    identifier = unique("brand")
    created = await author.post_form(
        "/console/layouts/new", {"name": "Brand", "identifier": identifier, "content": CONTENT, "intent": "save"}
    )
    assert created.status_code == 303, created.text
    page = await author.get(created.headers["location"])
    assert page.status_code == 200
    shown = srcdoc(page)
    # The sample body inside the layout, rendered by the engine (the subscriber's name in both).
    assert "<header>Acme</header>" in shown and "Hello Ada" in shown and "Bye Ada" in shown
    assert "allow-scripts" not in page.text
    assert [layout["identifier"] for layout in (await api.get("/v1/layouts", params={"limit": 100})).json()["data"]].count(identifier) == 1

    layout_id = created.headers["location"].rsplit("/", 1)[1]
    changed = CONTENT.replace("Acme", "Acme Ltd")
    saved = await author.post_form(
        f"/console/layouts/{layout_id}", {"name": "Brand", "identifier": identifier, "content": changed, "intent": "save"}
    )
    assert saved.status_code == 303, saved.text
    assert (await api.get(f"/v1/layouts/{layout_id}")).json()["data"]["content"] == changed
    async with app.state.sessionmaker() as session:
        log = await list_entries(session, tenancy.organization_id, limit=50)
    actions = {(entry.action, entry.resource_id) for entry in log.entries}
    assert {("layout.created", layout_id), ("layout.updated", layout_id)} <= actions


async def test_a_broken_layout_is_refused_on_save_and_told_in_the_preview(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    author = await console_as("author")
    await author.get("/console/layouts/new")
    broken = CONTENT.replace("{{ subscriber.firstName }}", "{{ subscriber.firstName | shout }}")
    identifier = unique("broken")
    refused = await author.post_form(
        "/console/layouts/new", {"name": "Broken", "identifier": identifier, "content": broken, "intent": "save"}
    )
    assert refused.status_code == 422
    assert "unknown filter &#39;shout&#39;" in refused.text and "line 1, column" in refused.text
    assert identifier not in (await api.get("/v1/layouts", params={"limit": 100})).text
    previewed = await author.post_form(
        "/console/layouts/new", {"name": "Broken", "identifier": identifier, "content": broken, "intent": "preview"}
    )
    assert previewed.status_code == 200
    assert "Line 1, column" in previewed.text and "email-preview" not in previewed.text


async def test_make_default_and_a_viewer_changes_nothing(api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    made = []
    for name in ("First", "Second"):
        response = await api.post("/v1/layouts", json={"name": name, "identifier": unique(name.lower()), "content": CONTENT})
        assert response.status_code == 201, response.text
        made.append(response.json()["data"]["_id"])
    viewer = await console_as("viewer")
    listing = await viewer.get("/console/layouts")
    assert listing.status_code == 200 and "First" in listing.text and "Second" in listing.text
    assert "New layout" not in listing.text and "Make default" not in listing.text
    assert (await viewer.post_form(f"/console/layouts/{made[1]}/default")).status_code == 403
    assert (await viewer.get("/console/layouts/new")).status_code == 403
    opened = await viewer.get(f"/console/layouts/{made[1]}")
    assert opened.status_code == 200 and "<fieldset disabled>" in opened.text and ">Save<" not in opened.text

    admin = await console_as("admin")
    await admin.get("/console/layouts")
    # Without the CSRF token: refused.
    assert (await admin.post_form(f"/console/layouts/{made[1]}/default", csrf="")).status_code == 403
    assert (await admin.post_form(f"/console/layouts/{made[1]}/default")).status_code == 303
    assert (await api.get(f"/v1/layouts/{made[1]}")).json()["data"]["isDefault"] is True
