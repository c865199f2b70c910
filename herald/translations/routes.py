from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from herald.environments import protection
from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.errors import ValidationFailed
from herald.kit.schemas import ERROR_RESPONSES, DataResponse
from herald.translations import service
from herald.translations.multipart import parse_form
from herald.translations.schemas import (
    CreateTranslationRequest,
    ImportMasterJsonRequest,
    ImportMasterJsonResponse,
    LocaleSettings,
    MasterJson,
    ResourceType,
    TranslationGroup,
    TranslationResponse,
    UpdateLocaleSettingsRequest,
    UploadTranslationsResponse,
)

ResourceTypePath = Annotated[ResourceType, Path(description="workflow or layout")]
ResourceIdPath = Annotated[
    str, Path(description="The workflow's identifier (workflowId), or the layout's id", max_length=300)
]
LocalePath = Annotated[str, Path(description="A locale in the format language_REGION, e.g. en_US", max_length=16)]

router = APIRouter(tags=["Translations"], responses=ERROR_RESPONSES)

# The multipart bodies, read by hand (herald/translations/multipart.py), described for the document.
_FILE = {"type": "string", "format": "binary", "description": "A JSON file named <locale>.json, e.g. en_US.json"}
UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["resourceId", "resourceType", "files"],
                    "properties": {
                        "resourceId": {"type": "string", "description": "The workflow's identifier"},
                        "resourceType": {"type": "string", "enum": ["workflow", "layout"]},
                        "files": {"type": "array", "items": _FILE},
                    },
                }
            }
        },
    }
}
MASTER_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {"file": _FILE}}}
        },
    }
}


@router.post("/v2/translations", response_model=DataResponse[TranslationResponse], summary="Create a translation")
async def create_translation(
    body: CreateTranslationRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[TranslationResponse]:
    """Creates the locale's keys for the resource, or replaces them when it has some already."""
    return DataResponse(data=await service.create_translation(session, principal, body))


@router.post(
    "/v2/translations/upload",
    response_model=DataResponse[UploadTranslationsResponse],
    summary="Upload translation files",
    openapi_extra=UPLOAD_BODY,
)
async def upload_translations(
    request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[UploadTranslationsResponse]:
    """multipart/form-data: ``resourceId``, ``resourceType`` and one file per locale named ``<locale>.json``."""
    form = parse_form(request.headers.get("content-type"), await request.body())
    resource_id = service.check_resource_id(form.fields.get("resourceId", "").strip())
    raw_type = form.fields.get("resourceType", "")
    try:
        resource_type = ResourceType(raw_type)
    except ValueError:
        raise ValidationFailed.field("resourceType", "resourceType must be workflow or layout", raw_type) from None
    files = form.files_named("files", "files[]")
    return DataResponse(
        data=await service.upload_translations(session, principal, resource_type.value, resource_id, files)
    )


@router.get(
    "/v2/translations/master-json", response_model=DataResponse[MasterJson], summary="Retrieve master translations JSON"
)
async def get_master_json(
    session: SessionDep,
    principal: PrincipalDep,
    locale: Annotated[
        str | None, Query(description="The locale; the default locale when left out", max_length=16)
    ] = None,
) -> DataResponse[MasterJson]:
    return DataResponse(data=await service.get_master_json(session, principal, locale))


@router.post(
    "/v2/translations/master-json",
    response_model=DataResponse[ImportMasterJsonResponse],
    summary="Import master translations JSON",
)
async def import_master_json(
    body: ImportMasterJsonRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[ImportMasterJsonResponse]:
    return DataResponse(data=await service.import_master_json(session, principal, body.locale, body.master_json))


@router.post(
    "/v2/translations/master-json/upload",
    response_model=DataResponse[ImportMasterJsonResponse],
    summary="Upload master translations JSON file",
    openapi_extra=MASTER_UPLOAD_BODY,
)
async def upload_master_json(
    request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[ImportMasterJsonResponse]:
    """multipart/form-data: the master JSON as ``file``, named ``<locale>.json``."""
    form = parse_form(request.headers.get("content-type"), await request.body())
    files = form.files_named("file")
    return DataResponse(data=await service.upload_master_json(session, principal, files[0] if files else None))


@router.get(
    "/v2/translations/group/{resourceType}/{resourceId}",
    response_model=DataResponse[TranslationGroup],
    summary="Retrieve a translation group",
)
async def get_group(
    resourceType: ResourceTypePath, resourceId: ResourceIdPath, session: SessionDep, principal: PrincipalDep
) -> DataResponse[TranslationGroup]:
    return DataResponse(data=await service.get_group(session, principal, resourceType.value, resourceId))


@router.get(
    "/v2/translations/{resourceType}/{resourceId}/{locale}",
    response_model=DataResponse[TranslationResponse],
    summary="Retrieve a translation",
)
async def get_translation(
    resourceType: ResourceTypePath,
    resourceId: ResourceIdPath,
    locale: LocalePath,
    session: SessionDep,
    principal: PrincipalDep,
) -> DataResponse[TranslationResponse]:
    return DataResponse(data=await service.get_translation(session, principal, resourceType.value, resourceId, locale))


@router.delete(
    "/v2/translations/{resourceType}/{resourceId}/{locale}",
    status_code=204,
    response_class=Response,
    summary="Delete a translation",
)
async def delete_translation(
    resourceType: ResourceTypePath,
    resourceId: ResourceIdPath,
    locale: LocalePath,
    session: SessionDep,
    principal: PrincipalDep,
) -> Response:
    await service.delete_translation(session, principal, resourceType.value, resourceId, locale)
    return Response(status_code=204)


@router.delete(
    "/v2/translations/{resourceType}/{resourceId}",
    status_code=204,
    response_class=Response,
    summary="Delete a translation group",
)
async def delete_group(
    resourceType: ResourceTypePath, resourceId: ResourceIdPath, session: SessionDep, principal: PrincipalDep
) -> Response:
    """Deletes every locale of the resource and turns the workflow's translations off."""
    await service.delete_group(session, principal, resourceType.value, resourceId)
    return Response(status_code=204)


@router.get("/v1/organizations/settings", response_model=DataResponse[LocaleSettings], summary="Organization locales")
async def get_locale_settings(session: SessionDep, principal: PrincipalDep) -> DataResponse[LocaleSettings]:
    """The organization's default locale (the fallback of every translation) and its target locales."""
    return DataResponse(data=await service.locale_settings(session, principal.organization_id))


@router.patch(
    "/v1/organizations/settings",
    response_model=DataResponse[LocaleSettings],
    summary="Set organization locales",
    responses=protection.REFUSED,
)
async def update_locale_settings(
    body: UpdateLocaleSettingsRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[LocaleSettings]:
    """Sets the default locale and the target locales (Novu's translation settings); other settings are not kept."""
    return DataResponse(data=await service.update_locale_settings(session, principal, body))
