"""Builders of the translation tests: workflows with translations on, multipart uploads."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi import FastAPI

from herald.translations.service import set_translation_enabled
from tests.fixtures.builders import create_unchecked_workflow, create_workflow, unique


async def translated_workflow(
    app: FastAPI, api: httpx.AsyncClient, environment_id: str, *, unchecked: bool = False, **fields: Any
) -> dict[str, Any]:
    """A workflow with isTranslationEnabled on (set in the store: the v1 workflow routes do not carry the flag).

    ``unchecked``: its templates are stored as given (create_unchecked_workflow), past the checks on save.
    """
    workflow = await create_unchecked_workflow(app, api, **fields) if unchecked else await create_workflow(api, **fields)
    async with app.state.sessionmaker() as session:
        assert await set_translation_enabled(session, environment_id, workflow["_id"], True)
        await session.commit()
    return workflow


async def upload(
    api: httpx.AsyncClient,
    resource_id: str,
    files: dict[str, Any],
    resource_type: str = "workflow",
    field: str = "files",
) -> httpx.Response:
    """POST /v2/translations/upload with one file per name; dict values are sent as JSON, bytes as they are."""
    parts = [
        (field, (name, content if isinstance(content, bytes) else json.dumps(content).encode(), "application/json"))
        for name, content in files.items()
    ]
    return await api.post(
        "/v2/translations/upload", data={"resourceId": resource_id, "resourceType": resource_type}, files=parts
    )


def new_identifier() -> str:
    return unique("wf")
