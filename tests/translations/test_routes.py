from __future__ import annotations

import json

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from herald.models import Translation, Workflow
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_workflow
from tests.translations.helpers import translated_workflow, upload

FRENCH = {"welcome": {"title": "Bienvenue", "body": "Bonjour {{payload.name}}"}}


async def test_create_then_retrieve_by_identifier_and_by_id(
    app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id)
    body = {
        "resourceId": workflow["triggers"][0]["identifier"],
        "resourceType": "workflow",
        "locale": "fr_FR",
        "content": FRENCH,
    }
    response = await api.post("/v2/translations", json=body)
    assert response.status_code == 200, response.text
    created = response.json()["data"]
    assert created["resourceId"] == workflow["triggers"][0]["identifier"]
    assert created["resourceType"] == "workflow" and created["locale"] == "fr_FR"
    assert created["content"] == FRENCH
    assert created["createdAt"] and created["updatedAt"]
    for resource_id in (workflow["triggers"][0]["identifier"], workflow["_id"]):
        fetched = await api.get(f"/v2/translations/workflow/{resource_id}/fr_FR")
        assert fetched.status_code == 200, fetched.text
        assert fetched.json()["data"]["content"] == FRENCH
    async with app.state.sessionmaker() as session:
        rows = (
            (await session.execute(select(Translation).where(Translation.environment_id == tenancy.environment_id)))
            .scalars()
            .all()
        )
    assert [(row.resource_id, row.locale, row.content) for row in rows] == [
        (workflow["triggers"][0]["identifier"], "fr_FR", FRENCH)
    ]


async def test_create_replaces_the_locales_content(app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id)
    identifier = workflow["triggers"][0]["identifier"]
    body = {"resourceId": identifier, "resourceType": "workflow", "locale": "en_US", "content": {"a": "1", "b": "2"}}
    assert (await api.post("/v2/translations", json=body)).status_code == 200
    body["content"] = {"a": "one", "c": "three"}
    second = await api.post("/v2/translations", json=body)
    assert second.json()["data"]["content"] == {"a": "one", "c": "three"}
    fetched = (await api.get(f"/v2/translations/workflow/{identifier}/en_US")).json()["data"]
    assert fetched["content"] == {"a": "one", "c": "three"}


async def test_bad_locale_bad_content_and_unknown_workflow(
    app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id)
    identifier = workflow["triggers"][0]["identifier"]
    for locale in ("123", "invalid-locale", "fr", "fr-FR"):
        body = {"resourceId": identifier, "resourceType": "workflow", "locale": locale, "content": {"k": "v"}}
        assert_error(await api.post("/v2/translations", json=body), 422)
    for content in ([1, 2], "text", {"k": [1]}, {"": "v"}):
        body = {"resourceId": identifier, "resourceType": "workflow", "locale": "en_US", "content": content}
        assert_error(await api.post("/v2/translations", json=body), 422)
    malformed = await api.post(
        "/v2/translations", content=b'{"resourceId": ', headers={"content-type": "application/json"}
    )
    assert malformed.status_code in (400, 422), malformed.text
    body = {"resourceId": "no-such-workflow", "resourceType": "workflow", "locale": "en_US", "content": {"k": "v"}}
    assert_error(await api.post("/v2/translations", json=body), 404)
    body = {"resourceId": identifier, "resourceType": "template", "locale": "en_US", "content": {"k": "v"}}
    assert_error(await api.post("/v2/translations", json=body), 422)
    assert_error(await api.get(f"/v2/translations/workflow/{identifier}/de_DE"), 404)
    assert_error(await api.get(f"/v2/translations/workflow/{identifier}/not-a-locale"), 422)
    assert_error(await api.get("/v2/translations/master-json?locale=invalid-locale"), 422)
    async with app.state.sessionmaker() as session:
        count = len(
            (
                await session.execute(select(Translation).where(Translation.environment_id == tenancy.environment_id))
            ).all()
        )
    assert count == 0


async def test_translations_are_scoped_to_the_environment(
    app: FastAPI,
    api: httpx.AsyncClient,
    production_api: httpx.AsyncClient,
    other_org_api: httpx.AsyncClient,
    tenancy: Tenancy,
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id)
    identifier = workflow["triggers"][0]["identifier"]
    body = {"resourceId": identifier, "resourceType": "workflow", "locale": "fr_FR", "content": FRENCH}
    assert (await api.post("/v2/translations", json=body)).status_code == 200
    for other in (production_api, other_org_api):
        assert_error(await other.get(f"/v2/translations/workflow/{identifier}/fr_FR"), 404)
        assert_error(await other.get(f"/v2/translations/group/workflow/{identifier}"), 404)
        assert_error(await other.delete(f"/v2/translations/workflow/{identifier}/fr_FR"), 404)
        assert_error(await other.post("/v2/translations", json=body), 404)  # the workflow is not theirs
        assert (await other.get("/v2/translations/master-json?locale=fr_FR")).json()["data"]["workflows"] == {}
    assert (await api.get(f"/v2/translations/workflow/{identifier}/fr_FR")).status_code == 200


async def test_delete_one_locale(app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id)
    identifier = workflow["triggers"][0]["identifier"]
    for locale in ("en_US", "fr_FR"):
        body = {"resourceId": identifier, "resourceType": "workflow", "locale": locale, "content": {"k": locale}}
        assert (await api.post("/v2/translations", json=body)).status_code == 200
    deleted = await api.delete(f"/v2/translations/workflow/{identifier}/fr_FR")
    assert deleted.status_code == 204, deleted.text
    assert_error(await api.get(f"/v2/translations/workflow/{identifier}/fr_FR"), 404)
    assert (await api.get(f"/v2/translations/workflow/{identifier}/en_US")).status_code == 200
    assert_error(await api.delete(f"/v2/translations/workflow/{identifier}/fr_FR"), 404)


async def test_group_lists_configured_and_stored_locales_and_outdated_ones(
    app: FastAPI, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id, name="Onboarding")
    identifier = workflow["triggers"][0]["identifier"]
    # The organization's locales change Production too: its own key sets them.
    settings = await production_api.patch(
        "/v1/organizations/settings", json={"defaultLocale": "en_US", "targetLocales": ["fr_FR", "de_DE"]}
    )
    assert settings.status_code == 200, settings.text
    assert settings.json()["data"] == {"defaultLocale": "en_US", "targetLocales": ["fr_FR", "de_DE"]}
    for locale in ("fr_FR", "ja_JP", "en_US"):  # en_US last: fr_FR and ja_JP are now older than the default
        body = {"resourceId": identifier, "resourceType": "workflow", "locale": locale, "content": {"k": locale}}
        assert (await api.post("/v2/translations", json=body)).status_code == 200
    group = (await api.get(f"/v2/translations/group/workflow/{identifier}")).json()["data"]
    assert group["resourceId"] == identifier and group["resourceType"] == "workflow"
    assert group["resourceName"] == "Onboarding"
    assert group["locales"] == ["en_US", "fr_FR", "de_DE", "ja_JP"]
    assert sorted(group["outdatedLocales"]) == ["fr_FR", "ja_JP"]
    assert_error(await api.get("/v2/translations/group/workflow/no-such-workflow"), 404)


async def test_delete_group_removes_every_locale_and_turns_translations_off(
    app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id)
    identifier = workflow["triggers"][0]["identifier"]
    for locale in ("en_US", "fr_FR"):
        body = {"resourceId": identifier, "resourceType": "workflow", "locale": locale, "content": {"k": locale}}
        assert (await api.post("/v2/translations", json=body)).status_code == 200
    deleted = await api.delete(f"/v2/translations/workflow/{identifier}")
    assert deleted.status_code == 204, deleted.text
    for locale in ("en_US", "fr_FR"):
        assert_error(await api.get(f"/v2/translations/workflow/{identifier}/{locale}"), 404)
    assert_error(await api.get(f"/v2/translations/group/workflow/{identifier}"), 404)
    async with app.state.sessionmaker() as session:
        stored = await session.get(Workflow, workflow["_id"])
        assert stored is not None and stored.is_translation_enabled is False
    assert_error(await api.delete("/v2/translations/workflow/no-such-workflow"), 404)


async def test_upload_files_one_per_locale(
    app: FastAPI, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id)
    identifier = workflow["triggers"][0]["identifier"]
    settings = await production_api.patch("/v1/organizations/settings", json={"targetLocales": ["fr_FR", "es_ES"]})
    assert settings.status_code == 200, settings.text
    response = await upload(api, identifier, {"en_US.json": {"k": "Hello"}, "fr_FR.json": {"k": "Bonjour"}})
    assert response.status_code == 200, response.text
    assert response.json()["data"] == {"totalFiles": 2, "successfulUploads": 2, "failedUploads": 0, "errors": []}
    assert (await api.get(f"/v2/translations/workflow/{identifier}/fr_FR")).json()["data"]["content"] == {
        "k": "Bonjour"
    }
    # The SDK names the files field files[]; a file that is not JSON fails alone.
    mixed = await upload(api, identifier, {"en_US.json": {"k": "Hi"}, "es_ES.json": b"not json"}, field="files[]")
    assert mixed.status_code == 200, mixed.text
    result = mixed.json()["data"]
    assert (result["totalFiles"], result["successfulUploads"], result["failedUploads"]) == (2, 1, 1)
    assert "Failed to process file 'es_ES.json'" in result["errors"][0]
    assert (await api.get(f"/v2/translations/workflow/{identifier}/en_US")).json()["data"]["content"] == {"k": "Hi"}
    assert_error(await api.get(f"/v2/translations/workflow/{identifier}/es_ES"), 404)


async def test_upload_refuses_bad_json_bad_names_and_unknown_locales(
    app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id)
    identifier = workflow["triggers"][0]["identifier"]
    bad_json = assert_error(await upload(api, identifier, {"en_US.json": b"invalid json content"}), 400)
    assert "No valid translation files were found" in bad_json["message"]
    not_object = assert_error(await upload(api, identifier, {"en_US.json": [1, 2]}), 400)
    assert "No valid translation files" in not_object["message"]
    bad_name = assert_error(await upload(api, identifier, {"invalid-filename.json": {"k": "v"}}), 400)
    assert "invalid names or formats" in bad_name["message"]
    assert "invalid-filename.json" in bad_name["errors"][0]
    unknown = assert_error(await upload(api, identifier, {"ja_JP.json": {"k": "v"}}), 400)
    assert "not configured for your organization: ja_JP" in unknown["message"]
    assert "en_US" in unknown["message"]
    assert_error(await upload(api, "no-such-workflow", {"en_US.json": {"k": "v"}}), 404)
    assert_error(await upload(api, identifier, {"en_US.json": {"k": "v"}}, resource_type="template"), 422)
    not_multipart = await api.post("/v2/translations/upload", json={"resourceId": identifier})
    assert_error(not_multipart, 400)
    async with app.state.sessionmaker() as session:
        count = len(
            (
                await session.execute(select(Translation).where(Translation.environment_id == tenancy.environment_id))
            ).all()
        )
    assert count == 0


async def test_locale_settings_validate(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    assert (await api.get("/v1/organizations/settings")).json()["data"] == {
        "defaultLocale": "en_US",
        "targetLocales": [],
    }
    assert_error(await production_api.patch("/v1/organizations/settings", json={"defaultLocale": "english"}), 422)
    assert_error(await production_api.patch("/v1/organizations/settings", json={"targetLocales": ["fr_FR", "xx"]}), 422)
    changed = await production_api.patch(
        "/v1/organizations/settings", json={"defaultLocale": "fr_FR", "targetLocales": ["fr_FR", "en_GB"]}
    )
    assert changed.json()["data"] == {"defaultLocale": "fr_FR", "targetLocales": ["en_GB"]}
    assert (await api.get("/v1/organizations/settings")).json()["data"] == {
        "defaultLocale": "fr_FR",
        "targetLocales": ["en_GB"],
    }


async def test_master_json_export_and_import(app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    translated = await translated_workflow(app, api, tenancy.environment_id)
    plain = await create_workflow(api)
    first, second = translated["triggers"][0]["identifier"], plain["triggers"][0]["identifier"]
    imported = await api.post(
        "/v2/translations/master-json",
        json={"locale": "en_US", "masterJson": {"workflows": {first: {"title": "Hello"}, second: {"title": "Plain"}}}},
    )
    assert imported.status_code == 200, imported.text
    result = imported.json()["data"]
    assert result["success"] is True and "2 resource" in result["message"]
    assert sorted(result["successful"]) == sorted([first, second]) and "failed" not in result
    # Only workflows with translations on are exported; the default locale when none is named.
    exported = (await api.get("/v2/translations/master-json")).json()["data"]
    assert exported == {"workflows": {first: {"title": "Hello"}}, "layouts": {}}
    assert (await api.get("/v2/translations/master-json?locale=de_DE")).json()["data"]["workflows"] == {}

    partial = (
        await api.post(
            "/v2/translations/master-json",
            json={"locale": "en_US", "masterJson": {"workflows": {first: {"title": "Hi"}, "missing": {"k": "v"}}}},
        )
    ).json()["data"]
    assert partial["success"] is True and "Partial import completed" in partial["message"]
    assert partial["successful"] == [first] and partial["failed"] == ["missing"]
    failed = (
        await api.post(
            "/v2/translations/master-json", json={"locale": "en_US", "masterJson": {"workflows": {"x": {}, "y": {}}}}
        )
    ).json()["data"]
    assert failed["success"] is False and "Failed to import any resources" in failed["message"]
    assert sorted(failed["failed"]) == ["x", "y"] and "successful" not in failed
    empty = (
        await api.post("/v2/translations/master-json", json={"locale": "en_US", "masterJson": {"workflows": {}}})
    ).json()["data"]
    assert empty["success"] is False and "No supported resources found" in empty["message"]
    assert_error(await api.post("/v2/translations/master-json", json={"locale": "bad", "masterJson": {}}), 422)
    assert_error(
        await api.post("/v2/translations/master-json", json={"locale": "en_US", "masterJson": {"workflows": []}}), 422
    )


async def test_master_json_upload(app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id)
    identifier = workflow["triggers"][0]["identifier"]
    master = json.dumps({"workflows": {identifier: {"title": "Salut"}}}).encode()
    response = await api.post(
        "/v2/translations/master-json/upload", files={"file": ("fr_FR.json", master, "application/json")}
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["successful"] == [identifier]
    assert (await api.get(f"/v2/translations/workflow/{identifier}/fr_FR")).json()["data"]["content"] == {
        "title": "Salut"
    }
    bad = await api.post(
        "/v2/translations/master-json/upload", files={"file": ("fr_FR.json", b"{oops", "application/json")}
    )
    assert_error(bad, 400)
    badly_named = await api.post(
        "/v2/translations/master-json/upload", files={"file": ("master.json", master, "application/json")}
    )
    assert_error(badly_named, 400)


async def test_uploaded_text_either_store_cannot_keep_is_refused(
    app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id)
    identifier = workflow["triggers"][0]["identifier"]
    for raw in (b'{"k": "nul \\u0000"}', b'{"k": "lone \\udfff"}', b'{"\\u0000": "v"}'):
        # The request guard refuses a NUL anywhere in a body (422); the rest fail as files (400).
        refused = await upload(api, identifier, {"en_US.json": raw})
        assert refused.status_code in (400, 422), refused.text
        assert refused.json()["statusCode"] == refused.status_code
    master = json.dumps({"layouts": {"x" * 301: {"k": "v"}, "lone\udfff": {"k": "v"}, "ok-layout": {"k": "v"}}}).encode()
    response = await api.post(
        "/v2/translations/master-json/upload", files={"file": ("en_US.json", master, "application/json")}
    )
    assert response.status_code == 200, response.text
    result = response.json()["data"]
    assert result["successful"] == ["ok-layout"] and len(result["failed"]) == 2
    assert_error(
        await api.post(
            "/v2/translations/upload",
            data={"resourceId": "x" * 301, "resourceType": "workflow"},
            files=[("files", ("en_US.json", b"{}", "application/json"))],
        ),
        422,
    )
    async with app.state.sessionmaker() as session:
        rows = (
            (await session.execute(select(Translation).where(Translation.environment_id == tenancy.environment_id)))
            .scalars()
            .all()
        )
    assert [(row.resource_type, row.resource_id) for row in rows] == [("layout", "ok-layout")]
