"""The Translations page: each workflow's locales, their keys edited as JSON, uploaded and downloaded as
``<locale>.json``, and the keys each locale lacks beside the default locale."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.responses import Response

from herald.console.deps import Console, ConsoleDep
from herald.kit.errors import BadRequestError, NotFoundError, ValidationFailed
from herald.translations import service
from herald.translations.schemas import CreateTranslationRequest

router = APIRouter()

RESOURCE_TYPE = "workflow"
MAX_KEYS_CHARS = 200_000
MAX_UPLOAD_BYTES = 1_000_000
MAX_FILES = 20


async def _resource_page(
    console: Console, resource_id: str, locale: str = "", keys_text: str | None = None, *, status_code: int = 200
) -> Response:
    group = await service.get_group(console.db, console.principal, RESOURCE_TYPE, resource_id)
    records = [
        record
        for record in await service.list_translations(console.db, console.principal.environment_id)
        if record.resource_type == RESOURCE_TYPE and record.resource_id == group.resource_id
    ]
    settings = await service.locale_settings(console.db, console.organization_id)
    contents = {record.locale: record.content for record in records}
    missing = service.missing_keys(contents, settings.default_locale)
    chosen = locale if locale in group.locales else (group.locales[0] if group.locales else settings.default_locale)
    if keys_text is None:
        keys_text = json.dumps(contents.get(chosen, {}), indent=2, ensure_ascii=False, sort_keys=True)
    locales = [
        {
            "locale": name,
            "key_count": len(service.key_paths(contents[name])) if name in contents else None,
            "missing": missing.get(name, []) if name in contents or name != settings.default_locale else [],
            "default": name == settings.default_locale,
            "outdated": name in group.outdated_locales,
        }
        for name in group.locales
    ]
    return console.render(
        "translations_edit.html",
        title=f"Translations of {group.resource_name}",
        status_code=status_code,
        group=group,
        locales=locales,
        chosen=chosen,
        keys_text=keys_text,
        default_locale=settings.default_locale,
        may_write=console.allows("translations.write"),
    )


@router.get("/translations")
async def translations_page(console: ConsoleDep) -> Response:
    console.authorize("workflows.read")
    by_resource: dict[str, list[str]] = defaultdict(list)
    for record in await service.list_translations(console.db, console.principal.environment_id):
        if record.resource_type == RESOURCE_TYPE:
            by_resource[record.resource_id].append(record.locale)
    settings = await service.locale_settings(console.db, console.organization_id)
    rows = [{"resource_id": key, "locales": sorted(locales)} for key, locales in sorted(by_resource.items())]
    return console.render(
        "translations.html",
        title="Translations",
        rows=rows,
        default_locale=settings.default_locale,
        configured=service.configured_locales(settings),
    )


@router.get("/translations/open")
async def open_resource(console: ConsoleDep, workflow: str = "") -> Response:
    """The form on the list: a workflow named by its identifier."""
    console.authorize("workflows.read")
    identifier = workflow.strip()[:300]
    if not service.usable_resource_id(identifier):
        raise BadRequestError("Enter a workflow identifier")
    return console.redirect(f"/console/translations/{RESOURCE_TYPE}/{identifier}")


@router.get("/translations/workflow/{resource_id}")
async def resource_page(resource_id: str, console: ConsoleDep, locale: str = "") -> Response:
    console.authorize("workflows.read")
    return await _resource_page(console, resource_id[:300], locale[:16])


@router.post("/translations/workflow/{resource_id}/keys")
async def save_keys(resource_id: str, console: ConsoleDep) -> Response:
    console.authorize("translations.write")
    form = await console.form()
    locale = console.field(form, "locale", 16)
    raw = form.get("keys")
    text = raw[:MAX_KEYS_CHARS] if isinstance(raw, str) else ""
    try:
        content = json.loads(text or "{}")
    except ValueError as exc:
        console.fail("keys", f"The keys are not JSON: {exc}")
        return await _resource_page(console, resource_id[:300], locale, text, status_code=422)
    try:
        body = CreateTranslationRequest.model_validate(
            {"resourceId": resource_id[:300], "resourceType": RESOURCE_TYPE, "locale": locale, "content": content}
        )
        saved = await service.create_translation(console.db, console.principal, body)
    except (ValidationError, ValidationFailed) as exc:
        message = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else _first_message(exc)
        console.fail("keys", f"The keys cannot be saved: {message}")
        return await _resource_page(console, resource_id[:300], locale, text, status_code=422)
    console.record(
        "translation.updated", "translation", f"{saved.resource_id}:{saved.locale}", changes={"keys": len(service.key_paths(saved.content))}
    )
    return console.redirect(
        f"/console/translations/{RESOURCE_TYPE}/{saved.resource_id}?locale={saved.locale}", flash=f"{saved.locale} saved"
    )


def _first_message(exc: ValidationFailed) -> str:
    errors = exc.extra.get("errors") or {}
    for entry in errors.values():
        if entry.get("messages"):
            return str(entry["messages"][0])
    return exc.message


@router.post("/translations/workflow/{resource_id}/upload")
async def upload(resource_id: str, console: ConsoleDep) -> Response:
    console.authorize("translations.write")
    form = await console.form()
    files = [item for item in form.getlist("files") if isinstance(item, UploadFile) and item.filename][:MAX_FILES]
    uploaded = [service.UploadedFile(item.filename or "", await item.read(MAX_UPLOAD_BYTES + 1)) for item in files]
    if any(len(item.content) > MAX_UPLOAD_BYTES for item in uploaded):
        console.fail("files", f"A file is larger than {MAX_UPLOAD_BYTES:,} bytes")
        return await _resource_page(console, resource_id[:300], status_code=422)
    try:
        answer = await service.upload_translations(console.db, console.principal, RESOURCE_TYPE, resource_id[:300], uploaded)
    except BadRequestError as exc:
        console.fail("files", exc.message)
        return await _resource_page(console, resource_id[:300], status_code=400)
    console.record(
        "translation.uploaded",
        "translation",
        resource_id[:300],
        changes={"files": [item.filename for item in uploaded], "errors": answer.errors},
    )
    flash = f"{answer.successful_uploads} of {answer.total_files} files uploaded"
    if answer.errors:
        flash += ": " + "; ".join(answer.errors)
    return console.redirect(f"/console/translations/{RESOURCE_TYPE}/{resource_id[:300]}", flash=flash)


@router.get("/translations/workflow/{resource_id}/{locale}.json")
async def download(resource_id: str, locale: str, console: ConsoleDep) -> Response:
    console.authorize("workflows.read")
    try:
        translation = await service.get_translation(console.db, console.principal, RESOURCE_TYPE, resource_id[:300], locale[:16])
    except ValidationFailed as exc:
        raise NotFoundError(exc.message) from None
    body: dict[str, Any] = translation.content
    return Response(
        json.dumps(body, indent=2, ensure_ascii=False, sort_keys=True),
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{translation.locale}.json"'},
    )
