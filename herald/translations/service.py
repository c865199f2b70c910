"""Translations: Novu's v2 ``/v2/translations`` use cases, open to every organization.

A translation is one locale's keys for one resource (a workflow, by its identifier; or a layout).
The organization's default locale (``en_US`` unless set) is the fallback when a subscriber's locale
has no translation, and with the target locales it is what uploads may name. The engine renders
``{{t.key}}`` with them (herald/translations/render.py) for workflows with translations enabled.

Environment promotion copies translations by their stable key with :func:`list_translations` and
:func:`copy_translations`.

The locale settings are the organization's, so changing them changes every environment's
rendering: the caller must be allowed to change each protected environment
(herald/environments/protection.py), which with Production protected means Production's keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.environments import protection
from herald.environments.repository import EnvironmentRepository
from herald.kit.auth import Principal
from herald.kit.errors import BadRequestError, NotFoundError, ValidationFailed
from herald.kit.time import isoformat
from herald.models import Translation
from herald.translations.repository import TranslationRepository
from herald.translations.schemas import (
    CreateTranslationRequest,
    ImportMasterJsonResponse,
    LocaleSettings,
    MasterJson,
    ResourceType,
    TranslationGroup,
    TranslationResponse,
    UpdateLocaleSettingsRequest,
    UploadTranslationsResponse,
)

DEFAULT_LOCALE = "en_US"
"""The default locale of an organization that has not set one."""

LOCALE_PATTERN = re.compile(r"^[a-z]{2,3}_[A-Z]{2}$")
"""Novu's locales are ``language_REGION`` (``en_US``, ``fr_FR``); a language alone (``en``) is not one."""
LOCALE_FORMAT = "language_REGION, e.g. en_US"

FILE_NAME_PATTERN = re.compile(r"^([a-z]{2,3}_[A-Z]{2})\.json$")
MAX_CONTENT_DEPTH = 20
"""Levels of nested objects a translation's content may have (keys are paths of at most this many parts)."""
MAX_TARGET_LOCALES = 200


# --------------------------------------------------------------------------- checks


def check_locale(locale: str, field: str = "locale") -> str:
    if not isinstance(locale, str) or not LOCALE_PATTERN.match(locale):
        raise ValidationFailed.field(field, f"{field} must be a locale in the format {LOCALE_FORMAT}", locale)
    return locale


def _content_problem(content: Any, depth: int = 1) -> str | None:
    """Why ``content`` cannot be a translation's keys, or None: an object whose values are text, numbers,
    booleans or objects of the same, at most MAX_CONTENT_DEPTH deep."""
    if not isinstance(content, dict):
        return "must be a JSON object of translation keys"
    if depth > MAX_CONTENT_DEPTH:
        return f"is nested more than {MAX_CONTENT_DEPTH} levels deep"
    for key, value in content.items():
        if not isinstance(key, str) or not key.strip():
            return "has an empty key"
        if not _storable(key) or (isinstance(value, str) and not _storable(value)):
            return f"has a NUL character or an unpaired surrogate under {key!r}"
        if isinstance(value, dict):
            problem = _content_problem(value, depth + 1)
            if problem is not None:
                return problem
        elif value is not None and not isinstance(value, (str, int, float, bool)):
            return f"has a value under {key!r} that is neither text nor an object of keys"
    return None


def _storable(text: str) -> bool:
    """Text both stores keep: PostgreSQL's JSONB refuses NUL, and UTF-8 has no unpaired surrogates.
    (JSON request bodies are checked by the request guard; uploaded files come here unchecked.)"""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


MAX_RESOURCE_ID_CHARS = 300


def usable_resource_id(resource_id: Any) -> bool:
    return (
        isinstance(resource_id, str)
        and 0 < len(resource_id) <= MAX_RESOURCE_ID_CHARS
        and bool(resource_id.strip())
        and _storable(resource_id)
    )


def check_resource_id(resource_id: Any, field: str = "resourceId") -> str:
    if not usable_resource_id(resource_id):
        raise ValidationFailed.field(
            field, f"{field} must be a workflow identifier of 1 to {MAX_RESOURCE_ID_CHARS} characters", resource_id
        )
    return resource_id


def check_content(content: Any, field: str = "content") -> dict[str, Any]:
    problem = _content_problem(content)
    if problem is not None:
        raise ValidationFailed.field(field, f"{field} {problem}")
    return content


# --------------------------------------------------------------------------- shaping


def translation_schema(translation: Translation) -> TranslationResponse:
    return TranslationResponse(
        resource_id=translation.resource_id,
        resource_type=ResourceType(translation.resource_type),
        locale=translation.locale,
        content=translation.content or {},
        created_at=isoformat(translation.created_at) or "",
        updated_at=isoformat(translation.updated_at) or "",
    )


@dataclass(frozen=True)
class Resource:
    """What a translation belongs to, resolved: ``resource_id`` is the stable id it is stored under."""

    resource_type: str
    resource_id: str
    name: str
    created_at: datetime | None = None
    updated_at: datetime | None = None
    # A workflow's group exists while its translations are on or it has keys; deleting the group ends both.
    translation_enabled: bool = False


async def _resource(
    repository: TranslationRepository, environment_id: str, resource_type: str, resource_id: str
) -> Resource:
    """The resource a request names. A workflow must exist in the caller's environment (by its identifier or
    _id; stored under its identifier). Herald has no layouts of its own: a layout id is taken as given."""
    if resource_type == ResourceType.WORKFLOW:
        workflow = await repository.workflow(environment_id, resource_id)
        if workflow is None:
            raise NotFoundError(f"Workflow with id {resource_id} not found")
        return Resource(
            ResourceType.WORKFLOW.value,
            workflow.trigger_identifier,
            workflow.name,
            workflow.created_at,
            workflow.updated_at,
            bool(workflow.is_translation_enabled),
        )
    return Resource(ResourceType.LAYOUT.value, resource_id, resource_id)


# --------------------------------------------------------------------------- locales


async def locale_settings(session: AsyncSession, organization_id: str) -> LocaleSettings:
    row = await TranslationRepository(session).locales(organization_id)
    if row is None:
        return LocaleSettings(default_locale=DEFAULT_LOCALE, target_locales=[])
    return LocaleSettings(default_locale=row.default_locale, target_locales=list(row.target_locales or []))


async def default_locale(session: AsyncSession, organization_id: str) -> str:
    return (await locale_settings(session, organization_id)).default_locale


def configured_locales(settings: LocaleSettings) -> list[str]:
    """The default locale, then the targets, once each."""
    return list(dict.fromkeys([settings.default_locale, *settings.target_locales]))


async def update_locale_settings(
    session: AsyncSession, principal: Principal, body: UpdateLocaleSettingsRequest
) -> LocaleSettings:
    protection.require_change(principal, await EnvironmentRepository(session).list(principal.organization_id))
    current = await locale_settings(session, principal.organization_id)
    default = (
        check_locale(body.default_locale, "defaultLocale")
        if body.default_locale is not None
        else current.default_locale
    )
    targets = current.target_locales
    if body.target_locales is not None:
        targets = [check_locale(locale, "targetLocales") for locale in body.target_locales]
    targets = [locale for locale in dict.fromkeys(targets) if locale != default][:MAX_TARGET_LOCALES]
    row = await TranslationRepository(session).put_locales(principal.organization_id, default, targets)
    return LocaleSettings(default_locale=row.default_locale, target_locales=list(row.target_locales))


# --------------------------------------------------------------------------- single translations


async def create_translation(
    session: AsyncSession, principal: Principal, body: CreateTranslationRequest
) -> TranslationResponse:
    """Creates the locale's keys for the resource, or replaces them when the locale has some already."""
    locale = check_locale(body.locale)
    content = check_content(body.content)
    repository = TranslationRepository(session)
    resource = await _resource(repository, principal.environment_id, body.resource_type.value, body.resource_id)
    translation = await repository.put(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        resource_type=resource.resource_type,
        resource_id=resource.resource_id,
        locale=locale,
        content=content,
    )
    return translation_schema(translation)


async def _stored_id(
    repository: TranslationRepository, environment_id: str, resource_type: str, resource_id: str
) -> str:
    """The id a resource's translations are stored under (a workflow's _id names it by its identifier)."""
    if resource_type == ResourceType.WORKFLOW:
        workflow = await repository.workflow(environment_id, resource_id)
        if workflow is not None:
            return workflow.trigger_identifier
    return resource_id


async def get_translation(
    session: AsyncSession, principal: Principal, resource_type: str, resource_id: str, locale: str
) -> TranslationResponse:
    check_locale(locale)
    repository = TranslationRepository(session)
    stored_id = await _stored_id(repository, principal.environment_id, resource_type, resource_id)
    translation = await repository.get(principal.environment_id, resource_type, stored_id, locale)
    if translation is None:
        raise NotFoundError(f"Translation for {resource_type} {resource_id} in locale {locale} not found")
    return translation_schema(translation)


async def delete_translation(
    session: AsyncSession, principal: Principal, resource_type: str, resource_id: str, locale: str
) -> None:
    check_locale(locale)
    repository = TranslationRepository(session)
    stored_id = await _stored_id(repository, principal.environment_id, resource_type, resource_id)
    translation = await repository.get(principal.environment_id, resource_type, stored_id, locale)
    if translation is None:
        raise NotFoundError(f"Translation for {resource_type} {resource_id} in locale {locale} not found")
    await repository.delete(translation)


# --------------------------------------------------------------------------- groups


def _outdated(translations: Sequence[Translation], default: str) -> list[str]:
    """Locales last changed before the default locale was: Novu marks them 'Outdated, needs update'."""
    base = next((t for t in translations if t.locale == default), None)
    if base is None:
        return []
    return [t.locale for t in translations if t.locale != default and t.updated_at < base.updated_at]


async def get_group(
    session: AsyncSession, principal: Principal, resource_type: str, resource_id: str
) -> TranslationGroup:
    """Every locale of the resource: the organization's configured locales and any other it has keys for."""
    repository = TranslationRepository(session)
    resource = await _resource(repository, principal.environment_id, resource_type, resource_id)
    translations = await repository.for_resource(principal.environment_id, resource.resource_type, resource.resource_id)
    if not translations and not resource.translation_enabled:
        # Novu deletes the group document with its translations: afterwards the group is gone.
        raise NotFoundError(f"Translation group for {resource.resource_type} {resource_id} not found")
    settings = await locale_settings(session, principal.organization_id)
    locales = list(dict.fromkeys([*configured_locales(settings), *(t.locale for t in translations)]))
    created = min((t.created_at for t in translations), default=resource.created_at)
    updated = max((t.updated_at for t in translations), default=resource.updated_at)
    return TranslationGroup(
        resource_id=resource.resource_id,
        resource_type=ResourceType(resource.resource_type),
        resource_name=resource.name,
        locales=locales,
        outdated_locales=_outdated(translations, settings.default_locale),
        created_at=isoformat(created) or "",
        updated_at=isoformat(updated) or "",
    )


async def delete_group(session: AsyncSession, principal: Principal, resource_type: str, resource_id: str) -> None:
    """Deletes every locale of the resource and turns its translations off (Novu's 'Disable & delete translations')."""
    repository = TranslationRepository(session)
    resource = await _resource(repository, principal.environment_id, resource_type, resource_id)
    deleted = await repository.delete_resource(principal.environment_id, resource.resource_type, resource.resource_id)
    if resource.resource_type == ResourceType.WORKFLOW:
        workflow = await repository.workflow(principal.environment_id, resource.resource_id)
        if workflow is not None:
            workflow.is_translation_enabled = False
            await session.flush()
    elif deleted == 0:
        raise NotFoundError(f"Translation group for layout {resource_id} not found")


def key_paths(content: Mapping[str, Any], prefix: str = "", depth: int = 0) -> list[str]:
    """The keys of a locale's content as templates read them (``{{t.cart.title}}``: ``cart.title``)."""
    paths: list[str] = []
    for key, value in content.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and depth < MAX_CONTENT_DEPTH:
            paths += key_paths(value, path + ".", depth + 1)
        else:
            paths.append(path)
    return paths


def missing_keys(contents: Mapping[str, Mapping[str, Any]], default: str) -> dict[str, list[str]]:
    """For each locale but the default, the default locale's keys it lacks (none when the default has no keys)."""
    wanted = key_paths(contents.get(default) or {})
    missing: dict[str, list[str]] = {}
    for locale, content in contents.items():
        if locale != default:
            present = set(key_paths(content))
            missing[locale] = [path for path in wanted if path not in present]
    return missing


# --------------------------------------------------------------------------- uploads


@dataclass(frozen=True)
class UploadedFile:
    filename: str
    content: bytes


def _parse_json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


async def upload_translations(
    session: AsyncSession, principal: Principal, resource_type: str, resource_id: str, files: Sequence[UploadedFile]
) -> UploadTranslationsResponse:
    """One locale per file, named ``<locale>.json``; each replaces that locale's keys.

    Files with bad names, or locales the organization has not configured, refuse the whole upload
    (400); a file that is not a JSON object of keys fails alone and is listed in ``errors``.
    """
    if not files:
        raise BadRequestError("No files were uploaded: send one or more files named <locale>.json, e.g. en_US.json")
    bad_names = [f.filename for f in files if not FILE_NAME_PATTERN.match(f.filename)]
    if bad_names:
        raise BadRequestError(
            "One or more files have invalid names or formats; name each file <locale>.json, e.g. en_US.json",
            errors=[f"Invalid file name '{name}': expected {LOCALE_FORMAT}, as en_US.json" for name in bad_names],
        )
    repository = TranslationRepository(session)
    resource = await _resource(repository, principal.environment_id, resource_type, resource_id)
    settings = await locale_settings(session, principal.organization_id)
    configured = configured_locales(settings)
    locales = [f.filename.removesuffix(".json") for f in files]
    unknown = [locale for locale in dict.fromkeys(locales) if locale not in configured]
    if unknown:
        raise BadRequestError(
            f"The following locales are not configured for your organization: {', '.join(unknown)}. "
            f"Please add these locales in your translation settings before uploading. "
            f"Current configured locales: {', '.join(configured)}"
        )
    errors: list[str] = []
    succeeded = 0
    for file, locale in zip(files, locales, strict=True):
        content = _parse_json_object(file.content)
        problem = "it is not a JSON object" if content is None else _content_problem(content)
        if problem is not None:
            errors.append(
                f"Failed to process file '{file.filename}': {problem if content is None else 'content ' + problem}"
            )
            continue
        assert content is not None
        await repository.put(
            environment_id=principal.environment_id,
            organization_id=principal.organization_id,
            resource_type=resource.resource_type,
            resource_id=resource.resource_id,
            locale=locale,
            content=content,
        )
        succeeded += 1
    if succeeded == 0:
        raise BadRequestError("No valid translation files were found: " + "; ".join(errors), errors=errors)
    return UploadTranslationsResponse(
        total_files=len(files), successful_uploads=succeeded, failed_uploads=len(files) - succeeded, errors=errors
    )


# --------------------------------------------------------------------------- master JSON


async def get_master_json(session: AsyncSession, principal: Principal, locale: str | None) -> MasterJson:
    """One locale's keys (the default locale's when none is named) of every workflow with translations enabled."""
    if locale is None:
        locale = await default_locale(session, principal.organization_id)
    check_locale(locale)
    repository = TranslationRepository(session)
    identifiers = await repository.translated_workflow_identifiers(principal.environment_id)
    workflows = await repository.for_locale(principal.environment_id, ResourceType.WORKFLOW.value, locale, identifiers)
    return MasterJson(workflows={t.resource_id: t.content for t in workflows}, layouts={})


async def import_master_json(
    session: AsyncSession, principal: Principal, locale: str, master_json: Any
) -> ImportMasterJsonResponse:
    """Sets the locale's keys of every resource the master JSON names (``{"workflows": {id: keys}, "layouts": ...}``).

    Each resource's keys replace what the locale had. Workflows that do not exist in the environment,
    and keys that are not a JSON object, are listed under ``failed``; the rest are imported.
    """
    check_locale(locale)
    if not isinstance(master_json, dict):
        raise ValidationFailed.field("masterJson", "masterJson must be a JSON object with workflows and layouts")
    sections = {
        ResourceType.WORKFLOW.value: master_json.get("workflows"),
        ResourceType.LAYOUT.value: master_json.get("layouts"),
    }
    for name, section in (("workflows", sections["workflow"]), ("layouts", sections["layout"])):
        if section is not None and not isinstance(section, dict):
            raise ValidationFailed.field(f"masterJson.{name}", f"masterJson.{name} must be an object of resource ids")
    repository = TranslationRepository(session)
    workflow_section: dict[str, Any] = sections["workflow"] or {}
    found = await repository.workflows(principal.environment_id, [i for i in workflow_section if usable_resource_id(i)])
    successful: list[str] = []
    failed: list[str] = []
    for resource_type, section in sections.items():
        for resource_id, content in (section or {}).items():
            stored_id = resource_id
            if not usable_resource_id(resource_id):
                failed.append(resource_id.encode("utf-8", "replace").decode("utf-8"))  # answerable as JSON
                continue
            if resource_type == ResourceType.WORKFLOW:
                workflow = found.get(resource_id)
                if workflow is None:
                    failed.append(resource_id)
                    continue
                stored_id = workflow.trigger_identifier
            if _content_problem(content) is not None:
                failed.append(resource_id)
                continue
            await repository.put(
                environment_id=principal.environment_id,
                organization_id=principal.organization_id,
                resource_type=resource_type,
                resource_id=stored_id,
                locale=locale,
                content=content,
            )
            successful.append(resource_id)
    if not successful and not failed:
        return ImportMasterJsonResponse(success=False, message="No supported resources found in the master JSON")
    if not successful:
        return ImportMasterJsonResponse(
            success=False, message=f"Failed to import any resources ({len(failed)} failed)", failed=failed
        )
    if failed:
        return ImportMasterJsonResponse(
            success=True,
            message=f"Partial import completed: {len(successful)} resource(s) imported, {len(failed)} failed",
            successful=successful,
            failed=failed,
        )
    return ImportMasterJsonResponse(
        success=True, message=f"Successfully imported {len(successful)} resource(s)", successful=successful
    )


async def upload_master_json(
    session: AsyncSession, principal: Principal, file: UploadedFile | None
) -> ImportMasterJsonResponse:
    """A master JSON file named ``<locale>.json``: imported as :func:`import_master_json` imports its body."""
    if file is None:
        raise BadRequestError("No file was uploaded: send the master JSON as the file field, named <locale>.json")
    match = FILE_NAME_PATTERN.match(file.filename)
    if match is None:
        raise BadRequestError(
            f"Invalid file name '{file.filename}': name the master JSON <locale>.json, e.g. en_US.json"
        )
    master_json = _parse_json_object(file.content)
    if master_json is None:
        raise BadRequestError(f"The file '{file.filename}' is not a JSON object")
    return await import_master_json(session, principal, match.group(1), master_json)


# --------------------------------------------------------------------------- workflows and promotion


async def set_translation_enabled(session: AsyncSession, environment_id: str, workflow_id: str, enabled: bool) -> bool:
    """Turns a workflow's translations on or off (Novu's isTranslationEnabled); False when there is no such workflow.

    Stored in ``workflows.is_translation_enabled``. The workflow routes call this with the flag a
    request carries; the engine reads the column with each step's event.
    """
    workflow = await TranslationRepository(session).workflow(environment_id, workflow_id)
    if workflow is None:
        return False
    workflow.is_translation_enabled = enabled
    await session.flush()
    return True


@dataclass(frozen=True)
class TranslationRecord:
    """One translation by its stable key: the same key names the same resource's locale in every environment."""

    resource_type: str
    resource_id: str
    locale: str
    content: dict[str, Any]
    updated_at: datetime
    # The row's own id in its environment (differs between environments; never part of the key).
    id: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.resource_type, self.resource_id, self.locale)


async def list_translations(session: AsyncSession, environment_id: str) -> list[TranslationRecord]:
    """Every translation of the environment, by stable key ``(resource_type, resource_id, locale)``.

    ``resource_id`` is a workflow's identifier (or a layout's id), which stays the same when the
    workflow is copied into another environment; the rows' own ids are not part of the key.
    """
    rows = await TranslationRepository(session).all(environment_id)
    return [
        TranslationRecord(
            row.resource_type, row.resource_id, row.locale, dict(row.content or {}), row.updated_at, row.id
        )
        for row in rows
    ]


async def copy_translations(
    session: AsyncSession,
    *,
    source_environment_id: str,
    target_environment_id: str,
    organization_id: str,
    resource_ids: Sequence[str] | None = None,
) -> list[tuple[str, str, str]]:
    """Copies the source environment's translations into the target environment by stable key.

    For environment promotion: each ``(resource_type, resource_id, locale)`` of the source is
    created in the target, or replaces the target's content under the same key; translations the
    target has and the source does not are left alone. ``resource_ids`` limits the copy to those
    resources (workflow identifiers). Both environments must belong to ``organization_id``: the
    caller checks that. The workflows themselves are not copied, and a translation may arrive
    before its workflow does (it is keyed by the identifier, so it applies once the workflow is
    there). Returns the keys written. Never commits.
    """
    wanted = set(resource_ids) if resource_ids is not None else None
    repository = TranslationRepository(session)
    written: list[tuple[str, str, str]] = []
    for record in await list_translations(session, source_environment_id):
        if wanted is not None and record.resource_id not in wanted:
            continue
        await repository.put(
            environment_id=target_environment_id,
            organization_id=organization_id,
            resource_type=record.resource_type,
            resource_id=record.resource_id,
            locale=record.locale,
            content=record.content,
        )
        written.append(record.key)
    return written


async def copy_translation(
    session: AsyncSession, record: TranslationRecord, *, target_environment_id: str, organization_id: str
) -> None:
    """Copies one translation (one resource's locale) into the target environment under the same key.

    For environment promotion of a single item; the same contract as :func:`copy_translations`.
    """
    await TranslationRepository(session).put(
        environment_id=target_environment_id,
        organization_id=organization_id,
        resource_type=record.resource_type,
        resource_id=record.resource_id,
        locale=record.locale,
        content=record.content,
    )


async def remove_translation(session: AsyncSession, environment_id: str, record: TranslationRecord) -> None:
    """Deletes the environment's translation of ``record``'s key (promotion: it is gone from the source)."""
    repository = TranslationRepository(session)
    row = await repository.get(environment_id, record.resource_type, record.resource_id, record.locale)
    if row is not None:
        await repository.delete(row)
