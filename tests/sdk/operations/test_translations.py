"""novu.translations.*: translations, translation groups and the master JSON."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from novu_py import Novu, models

from herald.translations.service import set_translation_enabled
from tests.conftest import Tenancy
from tests.fixtures.builders import unique
from tests.sdk.operations.conftest import call

FRENCH = {"welcome": {"title": "Bienvenue"}, "cta": "Commencer"}


async def _workflow(server_url: str, tenancy: Tenancy) -> str:
    """A workflow (made through the v1 route: the SDK's v2 workflows are served elsewhere); its identifier."""
    async with httpx.AsyncClient(base_url=server_url, headers={"Authorization": f"ApiKey {tenancy.api_key}"}) as client:
        response = await client.post(
            "/v1/workflows",
            json={
                "name": unique("translated"),
                "active": True,
                "steps": [{"name": "inbox", "template": {"type": "in_app", "content": "{{t.welcome.title}}"}}],
            },
        )
        assert response.status_code == 201, response.text
        return response.json()["data"]["triggers"][0]["identifier"]


class _ReadBodyClient(httpx.Client):
    """httpx's client with each request's body read as it is built.

    novu-py 3.19's request hook rebuilds every request from ``request.content``, which a
    multipart request (the two uploads) has not read yet: httpx raises RequestNotRead before
    anything is sent. A client that reads the body first is the fix on the caller's side; the
    SDK is otherwise unchanged.
    """

    def build_request(self, *args: Any, **kwargs: Any) -> httpx.Request:
        request = super().build_request(*args, **kwargs)
        request.read()
        return request


@pytest.fixture
def novu_uploads(server_url: str, tenancy: Tenancy) -> Novu:
    """The SDK with :class:`_ReadBodyClient`, for the multipart operations."""
    return Novu(secret_key=tenancy.api_key, server_url=server_url, client=_ReadBodyClient(follow_redirects=True))


@pytest.fixture
async def workflow_id(server_url: str, tenancy: Tenancy) -> str:
    return await _workflow(server_url, tenancy)


async def _create(novu: Novu, workflow_id: str, locale: str, content: dict[str, Any]) -> models.TranslationResponseDto:
    return await call(
        lambda: novu.translations.create(
            create_translation_request_dto={
                "resource_id": workflow_id,
                "resource_type": models.ResourceType.WORKFLOW,
                "locale": locale,
                "content": content,
            }
        )
    )


def _retrieve(novu: Novu, workflow_id: str, locale: str) -> models.TranslationResponseDto:
    return novu.translations.retrieve(
        resource_type=models.TranslationControllerGetSingleTranslationPathParamResourceType.WORKFLOW,
        resource_id=workflow_id,
        locale=locale,
    )


async def test_translations_create(novu: Novu, workflow_id: str) -> None:
    created = await _create(novu, workflow_id, "fr_FR", FRENCH)
    assert created.resource_id == workflow_id and created.locale == "fr_FR"
    assert created.resource_type == models.TranslationResponseDtoResourceType.WORKFLOW
    assert created.content == FRENCH
    fetched = await call(lambda: _retrieve(novu, workflow_id, "fr_FR"))
    assert fetched.content == FRENCH


async def test_translations_retrieve(novu: Novu, workflow_id: str) -> None:
    await _create(novu, workflow_id, "en_US", {"welcome": {"title": "Welcome"}})
    await _create(novu, workflow_id, "fr_FR", FRENCH)
    fetched = await call(lambda: _retrieve(novu, workflow_id, "en_US"))
    assert fetched.locale == "en_US" and fetched.content == {"welcome": {"title": "Welcome"}}
    with pytest.raises(models.APIError) as missing:
        await call(lambda: _retrieve(novu, workflow_id, "de_DE"))
    assert missing.value.status_code == 404


async def test_translations_delete(novu: Novu, workflow_id: str) -> None:
    await _create(novu, workflow_id, "fr_FR", FRENCH)
    await call(
        lambda: novu.translations.delete(
            resource_type=models.TranslationControllerDeleteTranslationEndpointPathParamResourceType.WORKFLOW,
            resource_id=workflow_id,
            locale="fr_FR",
        )
    )
    with pytest.raises(models.APIError) as gone:
        await call(lambda: _retrieve(novu, workflow_id, "fr_FR"))
    assert gone.value.status_code == 404


async def test_translations_upload(novu_uploads: Novu, novu: Novu, workflow_id: str) -> None:
    result = await call(
        lambda: novu_uploads.translations.upload(
            request_body={
                "resource_id": workflow_id,
                "resource_type": models.TranslationControllerUploadTranslationFilesResourceType.WORKFLOW,
                "files": [
                    {
                        "file_name": "en_US.json",
                        "content": json.dumps({"title": "Hello"}).encode(),
                        "content_type": "application/json",
                    }
                ],
            }
        )
    )
    assert (result.total_files, result.successful_uploads, result.failed_uploads, result.errors) == (1, 1, 0, [])
    fetched = await call(lambda: _retrieve(novu, workflow_id, "en_US"))
    assert fetched.content == {"title": "Hello"}


async def test_translations_groups_retrieve(novu: Novu, workflow_id: str) -> None:
    await _create(novu, workflow_id, "fr_FR", FRENCH)
    await _create(novu, workflow_id, "en_US", {"welcome": {"title": "Welcome"}})
    group = await call(
        lambda: novu.translations.groups.retrieve(
            resource_type=models.TranslationControllerGetTranslationGroupEndpointPathParamResourceType.WORKFLOW,
            resource_id=workflow_id,
        )
    )
    assert group.resource_id == workflow_id
    assert group.locales == ["en_US", "fr_FR"]
    assert group.outdated_locales == ["fr_FR"]  # the default locale changed after it


async def test_translations_groups_delete(novu: Novu, workflow_id: str) -> None:
    await _create(novu, workflow_id, "fr_FR", FRENCH)
    await _create(novu, workflow_id, "en_US", {"k": "v"})
    await call(
        lambda: novu.translations.groups.delete(
            resource_type=models.PathParamResourceType.WORKFLOW, resource_id=workflow_id
        )
    )
    for locale in ("fr_FR", "en_US"):
        with pytest.raises(models.APIError) as gone:
            await call(lambda locale=locale: _retrieve(novu, workflow_id, locale))
        assert gone.value.status_code == 404
    with pytest.raises(models.APIError) as group_gone:
        await call(
            lambda: novu.translations.groups.retrieve(
                resource_type=models.TranslationControllerGetTranslationGroupEndpointPathParamResourceType.WORKFLOW,
                resource_id=workflow_id,
            )
        )
    assert group_gone.value.status_code == 404


async def test_translations_master_retrieve(novu: Novu, app: FastAPI, tenancy: Tenancy, workflow_id: str) -> None:
    # Only workflows with translations on are in the master JSON; import sets the keys of any.
    await call(
        lambda: novu.translations.master.import_master_json(
            import_master_json_request_dto={"locale": "fr_FR", "master_json": {"workflows": {workflow_id: FRENCH}}}
        )
    )
    empty = await call(lambda: novu.translations.master.retrieve(locale="fr_FR"))
    assert empty.workflows == {} and empty.layouts == {}
    async with app.state.sessionmaker() as session:  # the v1 workflow routes do not carry isTranslationEnabled
        assert await set_translation_enabled(session, tenancy.environment_id, workflow_id, True)
        await session.commit()
    master = await call(lambda: novu.translations.master.retrieve(locale="fr_FR"))
    assert master.workflows == {workflow_id: FRENCH}
    assert (await call(lambda: novu.translations.master.retrieve(locale="de_DE"))).workflows == {}


async def test_translations_master_import_master_json(novu: Novu, workflow_id: str) -> None:
    result = await call(
        lambda: novu.translations.master.import_master_json(
            import_master_json_request_dto={
                "locale": "en_US",
                "master_json": {"workflows": {workflow_id: {"title": "Hello"}, "no-such-workflow": {"k": "v"}}},
            }
        )
    )
    assert result.success is True
    assert result.successful == [workflow_id] and result.failed == ["no-such-workflow"]
    assert (await call(lambda: _retrieve(novu, workflow_id, "en_US"))).content == {"title": "Hello"}


async def test_translations_master_upload(novu_uploads: Novu, novu: Novu, workflow_id: str) -> None:
    master = json.dumps({"workflows": {workflow_id: {"title": "Hallo"}}}).encode()
    result = await call(
        lambda: novu_uploads.translations.master.upload(
            request_body={"file": {"file_name": "de_DE.json", "content": master, "content_type": "application/json"}}
        )
    )
    assert result.success is True and result.successful == [workflow_id]
    assert (await call(lambda: _retrieve(novu, workflow_id, "de_DE"))).content == {"title": "Hallo"}
