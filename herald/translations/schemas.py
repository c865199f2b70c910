"""Translations as Novu's v2 API names them (novu-py's models of the same names)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from herald.kit.schemas import RequestSchema, Schema, optional_field


class ResourceType(StrEnum):
    """What a translation belongs to: a workflow, or an email layout."""

    WORKFLOW = "workflow"
    LAYOUT = "layout"


class CreateTranslationRequest(RequestSchema):
    """Novu's CreateTranslationRequestDto: creates the locale's keys, or replaces them."""

    resource_id: str = Field(alias="resourceId", min_length=1, max_length=300)
    resource_type: ResourceType = Field(alias="resourceType")
    locale: str = Field(max_length=16)
    content: dict[str, Any]


class TranslationResponse(Schema):
    """Novu's TranslationResponseDto."""

    resource_id: str = Field(alias="resourceId")
    resource_type: ResourceType = Field(alias="resourceType")
    locale: str
    content: dict[str, Any]
    created_at: str = Field(alias="createdAt")
    updated_at: str = Field(alias="updatedAt")


class TranslationGroup(Schema):
    """Novu's TranslationGroupDto: every locale of one resource."""

    resource_id: str = Field(alias="resourceId")
    resource_type: ResourceType = Field(alias="resourceType")
    resource_name: str = Field(alias="resourceName")
    locales: list[str]
    outdated_locales: list[str] | None = optional_field("outdatedLocales")
    created_at: str = Field(alias="createdAt")
    updated_at: str = Field(alias="updatedAt")


class UploadTranslationsResponse(Schema):
    """Novu's UploadTranslationsResponseDto."""

    total_files: int = Field(alias="totalFiles")
    successful_uploads: int = Field(alias="successfulUploads")
    failed_uploads: int = Field(alias="failedUploads")
    errors: list[str]


class MasterJson(Schema):
    """Novu's GetMasterJSONResponseDto: one locale's keys of every resource, by resource id."""

    workflows: dict[str, Any]
    layouts: dict[str, Any]


class ImportMasterJsonRequest(RequestSchema):
    """Novu's ImportMasterJSONRequestDto."""

    locale: str = Field(max_length=16)
    master_json: dict[str, Any] = Field(alias="masterJson")


class ImportMasterJsonResponse(Schema):
    """Novu's ImportMasterJSONResponseDto: ``successful`` and ``failed`` are left out when empty."""

    success: bool
    message: str
    successful: list[str] | None = optional_field()
    failed: list[str] | None = optional_field()


class LocaleSettings(Schema):
    """The organization's locales, as Novu's organization settings carry them."""

    default_locale: str = Field(alias="defaultLocale")
    target_locales: list[str] = Field(alias="targetLocales")


class UpdateLocaleSettingsRequest(RequestSchema):
    """The locale fields of Novu's ``PATCH /v1/organizations/settings``; either may be left out."""

    default_locale: str | None = Field(default=None, alias="defaultLocale", max_length=16)
    target_locales: list[str] | None = Field(default=None, alias="targetLocales", max_length=200)
