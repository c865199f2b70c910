"""Novu's bridge routes' bodies, and what a bridge's ``discover`` answers (the framework's DiscoverOutput)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from herald.kit.schemas import RequestSchema, Schema
from herald.workflows.schemas import TRIGGER_IDENTIFIER

BridgeUrl = Annotated[str, Field(min_length=1, max_length=2048, description="Where the framework's handler is served")]

# What one sync takes: a bridge serving more is refused with why, not stored in part.
MAX_WORKFLOWS = 200
MAX_STEPS = 50


class SyncRequest(RequestSchema):
    """``novu sync`` sends ``bridgeUrl`` alone; ``workflows`` is taken by Novu and not read by it either."""

    bridgeUrl: BridgeUrl
    workflows: list[Any] | None = Field(default=None, max_length=MAX_WORKFLOWS)


class ValidateRequest(RequestSchema):
    bridgeUrl: BridgeUrl


class ValidateResponse(Schema):
    isValid: bool


class _Discovered(BaseModel):
    # The framework adds keys in new versions: unknown ones are ignored.
    model_config = ConfigDict(extra="ignore")


class DiscoveredStep(_Discovered):
    stepId: str = Field(min_length=1, max_length=64)
    type: str = Field(min_length=1, max_length=32)
    controls: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    results: dict[str, Any] | None = None
    options: dict[str, Any] | None = None


class DiscoveredWorkflow(_Discovered):
    workflowId: str = Field(min_length=1, max_length=300)
    name: str | None = Field(default=None, max_length=300)
    description: str | None = Field(default=None, max_length=2000)
    tags: list[Annotated[str, Field(max_length=64)]] = Field(default_factory=list, max_length=32)
    severity: str | None = None
    active: bool | None = None
    preferences: dict[str, Any] | None = None
    payload: dict[str, Any] | None = None
    controls: dict[str, Any] | None = None
    steps: list[DiscoveredStep] = Field(default_factory=list, max_length=MAX_STEPS)

    @field_validator("workflowId")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not TRIGGER_IDENTIFIER.match(value):
            raise ValueError("must start with a letter or digit and hold only letters, digits, '-', '_', '.' and ':'")
        return value


class DiscoverAnswer(_Discovered):
    workflows: list[DiscoveredWorkflow] = Field(default_factory=list, max_length=MAX_WORKFLOWS)


class ControlValuesRequest(RequestSchema):
    """``PUT /v1/bridge/controls/...``: the step's control values, under ``variables`` as Novu takes them."""

    variables: dict[str, Any]


class BridgePreviewRequest(RequestSchema):
    """``POST /v1/bridge/preview/...``: controls (else the saved ones), and a payload and subscriber to preview with."""

    controls: dict[str, Any] | None = None
    payload: dict[str, Any] | None = None
    subscriber: dict[str, Any] | None = None
