"""Novu's v2 workflow bodies and answers (novu-py's CreateWorkflowDto, WorkflowResponseDto, ...)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from herald.kit.schemas import RequestSchema, Schema, optional_field
from herald.workflows.schemas import STEP_TYPES, TRIGGER_IDENTIFIER, UNSUPPORTED_STEP_TYPES, Severity

ResourceOrigin = Literal["novu-cloud", "novu-cloud-v1", "external"]
WorkflowStatus = Literal["ACTIVE", "INACTIVE", "ERROR"]


class ChannelPreferenceRequest(RequestSchema):
    enabled: bool = True


class AllPreferenceRequest(RequestSchema):
    enabled: bool = True
    readOnly: bool = False


class WorkflowPreferencesRequest(RequestSchema):
    """One level of Novu's preferences: every channel (``all``) and each channel on its own."""

    all: AllPreferenceRequest = Field(default_factory=AllPreferenceRequest)
    channels: dict[str, ChannelPreferenceRequest] = Field(default_factory=dict)


class PreferencesRequest(RequestSchema):
    """``user`` (the dashboard's) wins over ``workflow`` (the code's), as in Novu."""

    user: WorkflowPreferencesRequest | None = None
    workflow: WorkflowPreferencesRequest | None = None


class WorkflowChannelPreference(Schema):
    enabled: bool


class WorkflowAllPreference(Schema):
    enabled: bool
    readOnly: bool


class WorkflowPreferencesLevel(Schema):
    all: WorkflowAllPreference
    channels: dict[str, WorkflowChannelPreference]


class WorkflowPreferencesResponse(Schema):
    default: WorkflowPreferencesLevel
    user: WorkflowPreferencesLevel | None = None


class StepUpsert(RequestSchema):
    """A v2 step: its controls are checked as the v1 step they become."""

    id: str | None = Field(default=None, alias="_id", min_length=1, max_length=64)
    stepId: str | None = Field(default=None, min_length=1, max_length=300)
    name: str = Field(min_length=1, max_length=300)
    type: str
    controlValues: dict[str, Any] | None = None

    @field_validator("type")
    @classmethod
    def _supported_type(cls, value: str) -> str:
        if value in STEP_TYPES:
            return value
        if value in UNSUPPORTED_STEP_TYPES or value == "tool":
            raise PydanticCustomError(
                "step_type_unsupported",
                "{type} steps are not supported by Herald; use one of {allowed}",
                {"type": value, "allowed": ", ".join(STEP_TYPES)},
            )
        raise PydanticCustomError("step_type", "must be one of {allowed}", {"allowed": ", ".join(STEP_TYPES)})


def _identifier(value: str | None) -> str | None:
    if value is not None and not TRIGGER_IDENTIFIER.match(value):
        raise PydanticCustomError(
            "workflow_id", "must start with a letter or digit and hold only letters, digits, '-', '_', '.' and ':'"
        )
    return value


# Novu's v2 limits (create-workflow.dto.ts): names of 64 characters, descriptions of 256, tags of 1 to 32.
WorkflowName = Annotated[str, Field(min_length=1, max_length=64)]
Description = Annotated[str, Field(max_length=256)]
Tag = Annotated[str, Field(min_length=1, max_length=32)]


class _WorkflowV2Fields(RequestSchema):
    description: Description | None = None
    tags: list[Tag] | None = Field(default=None, max_length=16)
    active: bool | None = None
    validatePayload: bool | None = None
    payloadSchema: dict[str, Any] | None = None
    isTranslationEnabled: bool | None = None
    preferences: PreferencesRequest | None = None
    severity: Severity | None = None


class CreateWorkflowV2Request(_WorkflowV2Fields):
    name: WorkflowName
    workflowId: str = Field(min_length=1, max_length=300, description="The identifier to trigger the workflow by")
    steps: list[StepUpsert] = Field(max_length=20)

    _workflow_id = field_validator("workflowId")(classmethod(lambda cls, value: _identifier(value)))


class UpdateWorkflowV2Request(_WorkflowV2Fields):
    """Novu's PUT: the steps sent replace all steps (a step sent with its ``_id`` or ``stepId`` keeps its id)."""

    name: WorkflowName
    steps: list[StepUpsert] = Field(max_length=20)
    workflowId: str | None = Field(default=None, min_length=1, max_length=300)
    origin: ResourceOrigin | None = None

    _workflow_id = field_validator("workflowId")(classmethod(lambda cls, value: _identifier(value)))


class PatchWorkflowV2Request(RequestSchema):
    active: bool | None = None
    name: WorkflowName | None = None
    description: Description | None = None
    tags: list[Tag] | None = Field(default=None, max_length=16)
    payloadSchema: dict[str, Any] | None = None
    validatePayload: bool | None = None
    isTranslationEnabled: bool | None = None


class SyncWorkflowRequest(RequestSchema):
    targetEnvironmentId: str = Field(min_length=1, max_length=64)


class PreviewPayload(RequestSchema):
    subscriber: dict[str, Any] | None = None
    actor: dict[str, Any] | None = None
    payload: dict[str, Any] | None = None
    steps: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    env: dict[str, Any] | None = None


class GeneratePreviewRequest(RequestSchema):
    controlValues: dict[str, Any] | None = None
    previewPayload: PreviewPayload | None = None


class StepControls(Schema):
    values: dict[str, Any]
    dataSchema: dict[str, Any] = optional_field()


class StepResponse(Schema):
    controls: StepControls
    controlValues: dict[str, Any]
    variables: dict[str, Any]
    stepId: str
    id: str = Field(alias="_id")
    name: str
    slug: str
    type: str
    origin: ResourceOrigin
    workflowId: str
    workflowDatabaseId: str
    issues: dict[str, Any] = optional_field()


class WorkflowResponse(Schema):
    id: str = Field(alias="_id")
    workflowId: str
    slug: str
    name: str
    description: str
    tags: list[str]
    active: bool
    validatePayload: bool
    payloadSchema: dict[str, Any] | None = None
    isTranslationEnabled: bool
    severity: Severity
    preferences: WorkflowPreferencesResponse
    status: WorkflowStatus
    origin: ResourceOrigin
    steps: list[StepResponse]
    issues: dict[str, Any] = Field(default_factory=dict)
    createdAt: str
    updatedAt: str


class StepListItem(Schema):
    slug: str
    type: str


class WorkflowListItem(Schema):
    id: str = Field(alias="_id")
    workflowId: str
    slug: str
    name: str
    tags: list[str]
    status: WorkflowStatus
    origin: ResourceOrigin
    stepTypeOverviews: list[str]
    steps: list[StepListItem]
    isTranslationEnabled: bool
    createdAt: str
    updatedAt: str


class ListWorkflowResponse(Schema):
    workflows: list[WorkflowListItem]
    totalCount: int


class GeneratePreviewResponse(Schema):
    previewPayloadExample: dict[str, Any]
    result: dict[str, Any]
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
