"""The Translations page, in process: keys edited as JSON, uploaded and downloaded, missing keys per locale."""

from __future__ import annotations

import json

import httpx
from fastapi import FastAPI

from herald.audit.service import list_entries
from tests.conftest import Tenancy
from tests.fixtures.console import ConsoleAs
from tests.translations.helpers import translated_workflow

STEPS = [{"name": "inbox", "template": {"type": "in_app", "content": "{{ t.greeting }} {{ t.cart.title }}"}}]


async def test_keys_saved_uploaded_downloaded_and_missing_ones_told(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient, production_api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    settings = await production_api.patch(
        "/v1/organizations/settings", json={"defaultLocale": "en_US", "targetLocales": ["fr_FR", "de_DE"]}
    )
    assert settings.status_code == 200, settings.text
    workflow = await translated_workflow(app, api, tenancy.environment_id, steps=STEPS)
    identifier = workflow["triggers"][0]["identifier"]
    base = f"/console/translations/workflow/{identifier}"
    author = await console_as("author")
    opened = await author.get("/console/translations/open", params={"workflow": identifier})
    assert (opened.status_code, opened.headers["location"]) == (303, base)
    page = await author.get(base)
    assert page.status_code == 200 and 'for="keys"' in page.text

    english = {"greeting": "Hello", "cart": {"title": "Your cart"}}
    saved = await author.post_form(f"{base}/keys", {"locale": "en_US", "keys": json.dumps(english)})
    assert saved.status_code == 303, saved.text
    not_json = await author.post_form(f"{base}/keys", {"locale": "en_US", "keys": "{greeting: 1"})
    assert not_json.status_code == 422 and "The keys are not JSON" in not_json.text

    files = {"files": ("fr_FR.json", json.dumps({"greeting": "Bonjour"}).encode(), "application/json")}
    uploaded = await author.client.post(f"{base}/upload", data={"csrf_token": author.csrf}, files=files)
    assert uploaded.status_code == 303, uploaded.text
    assert (await api.get(f"/v2/translations/workflow/{identifier}/fr_FR")).json()["data"]["content"] == {"greeting": "Bonjour"}

    page = await author.get(base)
    french = page.text[page.text.index(">fr_FR</a>") :].split("</tr>", 1)[0]
    assert "1: <code>cart.title</code>" in french
    german = page.text[page.text.index(">de_DE</a>") :].split("</tr>", 1)[0]
    assert "None yet" in german and "All" in german

    downloaded = await author.get(f"{base}/en_US.json")
    assert downloaded.status_code == 200 and json.loads(downloaded.text) == english
    assert downloaded.headers["content-disposition"] == 'attachment; filename="en_US.json"'

    listing = await author.get("/console/translations")
    assert identifier in listing.text and "en_US, fr_FR" in listing.text
    async with app.state.sessionmaker() as session:
        log = await list_entries(session, tenancy.organization_id, limit=50)
    assert {"translation.updated", "translation.uploaded"} <= {entry.action for entry in log.entries}


async def test_a_viewer_reads_but_cannot_change_keys(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id, steps=STEPS)
    identifier = workflow["triggers"][0]["identifier"]
    viewer = await console_as("viewer")
    page = await viewer.get(f"/console/translations/workflow/{identifier}")
    assert page.status_code == 200 and " readonly" in page.text and ">Save<" not in page.text and "Upload" not in page.text
    refused = await viewer.post_form(f"/console/translations/workflow/{identifier}/keys", {"locale": "en_US", "keys": "{}"})
    assert refused.status_code == 403
    author = await console_as("author")
    await author.get(f"/console/translations/workflow/{identifier}")
    no_token = await author.post_form(f"/console/translations/workflow/{identifier}/keys", {"locale": "en_US", "keys": "{}"}, csrf="")
    assert no_token.status_code == 403
