"""Layout models, named as Novu's DTOs: v1 (LayoutDto, CreateLayoutRequestDto, ...) and v2
(LayoutResponseDto, CreateLayoutDto, UpdateLayoutDto, DuplicateLayoutDto, ...)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from herald.kit.schemas import RequestSchema, Schema, optional_field
from herald.kit.text import is_valid_identifier

INVALID_IDENTIFIER = (
    "must contain only letters (a-z, A-Z), digits, hyphens (-), underscores (_), colons (:) and dots (.)"
)


def _identifier(value: Any) -> Any:
    if value is None:
        return value
    if not isinstance(value, str) or not value.strip() or len(value) > 300 or not is_valid_identifier(value.strip()):
        raise PydanticCustomError("identifier", INVALID_IDENTIFIER)
    return value.strip()


def _name(value: Any) -> Any:
    if value is None:
        return value
    if not isinstance(value, str) or not value.strip():
        raise PydanticCustomError("name", "must be a non-empty string")
    if len(value) > 300:
        raise PydanticCustomError("name", "must be at most 300 characters")
    return value.strip()


# --------------------------------------------------------------------------- v1


class CreateLayoutRequestDto(RequestSchema):
    name: str
    identifier: str
    content: str
    description: str | None = None
    variables: list[dict[str, Any]] | None = None
    isDefault: bool | None = None

    _check_name = field_validator("name", mode="before")(_name)
    _check_identifier = field_validator("identifier", mode="before")(_identifier)


class UpdateLayoutRequestDto(RequestSchema):
    name: str | None = None
    identifier: str | None = None
    content: str | None = None
    description: str | None = None
    variables: list[dict[str, Any]] | None = None
    isDefault: bool | None = None

    _check_name = field_validator("name", mode="before")(_name)
    _check_identifier = field_validator("identifier", mode="before")(_identifier)


class CreatedLayout(Schema):
    id: str = Field(alias="_id")


class LayoutDto(Schema):
    """A layout as Novu's v1 routes answer it."""

    id: str = Field(alias="_id")
    organization_id: str = Field(alias="_organizationId")
    environment_id: str = Field(alias="_environmentId")
    creator_id: str = Field(alias="_creatorId")
    name: str
    identifier: str
    description: str = ""
    channel: Literal["email"] = "email"
    content: str
    contentType: Literal["customHtml"] = "customHtml"
    variables: list[dict[str, Any]] = Field(default_factory=list)
    isDefault: bool
    isDeleted: bool = False
    createdAt: str
    updatedAt: str


# --------------------------------------------------------------------------- v2


class EmailControlsDto(Schema):
    body: str
    editorType: Literal["html", "block"] = "html"


class LayoutControlValuesDto(Schema):
    email: EmailControlsDto | None = None


class LayoutControlsDto(Schema):
    values: LayoutControlValuesDto
    dataSchema: dict[str, Any] = optional_field()
    uiSchema: dict[str, Any] = optional_field()


class LayoutResponseDto(Schema):
    id: str = Field(alias="_id")
    layoutId: str
    slug: str
    name: str
    isDefault: bool
    isTranslationEnabled: bool
    updatedAt: str
    createdAt: str
    origin: Literal["novu-cloud", "novu-cloud-v1", "external"]
    type: Literal["REGULAR"] = "REGULAR"
    controls: LayoutControlsDto
    variables: dict[str, Any] | None = None


class ListLayoutResponseDto(Schema):
    layouts: list[LayoutResponseDto]
    totalCount: int


class CreateLayoutDto(RequestSchema):
    layoutId: str
    name: str
    isTranslationEnabled: bool = False
    source: str | None = Field(default=None, alias="__source")

    _check_name = field_validator("name", mode="before")(_name)
    _check_identifier = field_validator("layoutId", mode="before")(_identifier)


class EmailControlsRequest(RequestSchema):
    body: str
    editorType: Literal["html", "block"] = "html"


class UpdateControlValues(RequestSchema):
    email: EmailControlsRequest | None = None


class UpdateLayoutDto(RequestSchema):
    name: str
    isTranslationEnabled: bool = False
    controlValues: UpdateControlValues | None = None

    _check_name = field_validator("name", mode="before")(_name)


class DuplicateLayoutDto(RequestSchema):
    name: str
    layoutId: str | None = None
    isTranslationEnabled: bool = False

    _check_name = field_validator("name", mode="before")(_name)
    _check_identifier = field_validator("layoutId", mode="before")(_identifier)


class LayoutPreviewPayloadDto(RequestSchema):
    subscriber: dict[str, Any] | None = None


class LayoutPreviewRequestDto(RequestSchema):
    controlValues: dict[str, Any] | None = None
    previewPayload: LayoutPreviewPayloadDto | None = None


class EmailLayoutRenderOutput(Schema):
    body: str


class LayoutPreviewResult(Schema):
    type: Literal["email"] = "email"
    preview: EmailLayoutRenderOutput


class LayoutPreviewPayloadExample(Schema):
    subscriber: dict[str, Any] = Field(default_factory=dict)


class GenerateLayoutPreviewResponseDto(Schema):
    previewPayloadExample: LayoutPreviewPayloadExample
    result: LayoutPreviewResult
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


class WorkflowInfoDto(Schema):
    name: str
    workflowId: str


class GetLayoutUsageResponseDto(Schema):
    workflows: list[WorkflowInfoDto]
