"""The promotion helpers: an environment's translations listed and copied by stable key."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from herald.translations.service import copy_translations, list_translations
from tests.conftest import Tenancy
from tests.translations.helpers import translated_workflow


async def test_list_and_copy_translations_by_stable_key(
    app: FastAPI, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    first = await translated_workflow(app, api, tenancy.environment_id)
    second = await translated_workflow(app, api, tenancy.environment_id)
    ids = [first["triggers"][0]["identifier"], second["triggers"][0]["identifier"]]
    for identifier in ids:
        for locale in ("en_US", "fr_FR"):
            body = {
                "resourceId": identifier,
                "resourceType": "workflow",
                "locale": locale,
                "content": {"k": f"{identifier}-{locale}"},
            }
            assert (await api.post("/v2/translations", json=body)).status_code == 200

    async with app.state.sessionmaker() as session:
        listed = await list_translations(session, tenancy.environment_id)
        assert sorted(record.key for record in listed) == sorted(
            ("workflow", identifier, locale) for identifier in ids for locale in ("en_US", "fr_FR")
        )
        assert await list_translations(session, tenancy.production_environment_id) == []
        # Only the first workflow's keys, into production.
        written = await copy_translations(
            session,
            source_environment_id=tenancy.environment_id,
            target_environment_id=tenancy.production_environment_id,
            organization_id=tenancy.organization_id,
            resource_ids=[ids[0]],
        )
        await session.commit()
    assert sorted(written) == [("workflow", ids[0], "en_US"), ("workflow", ids[0], "fr_FR")]
    async with app.state.sessionmaker() as session:
        copied = {
            record.key: record.content for record in await list_translations(session, tenancy.production_environment_id)
        }
    assert copied == {("workflow", ids[0], locale): {"k": f"{ids[0]}-{locale}"} for locale in ("en_US", "fr_FR")}

    # Copying again replaces the target's content under the same keys; the source is unchanged.
    body = {"resourceId": ids[0], "resourceType": "workflow", "locale": "fr_FR", "content": {"k": "changed"}}
    assert (await api.post("/v2/translations", json=body)).status_code == 200
    async with app.state.sessionmaker() as session:
        await copy_translations(
            session,
            source_environment_id=tenancy.environment_id,
            target_environment_id=tenancy.production_environment_id,
            organization_id=tenancy.organization_id,
        )
        await session.commit()
        target = {
            record.key: record.content for record in await list_translations(session, tenancy.production_environment_id)
        }
        source = await list_translations(session, tenancy.environment_id)
    assert len(target) == 4 and target[("workflow", ids[0], "fr_FR")] == {"k": "changed"}
    assert len(source) == 4
