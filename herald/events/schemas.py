"""Trigger request and response models (spec §4.4)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from herald.kit.schemas import RequestSchema, Schema, optional_field
from herald.tenants.schemas import UpdateTenantRequest

TriggerStatus = Literal[
    "error",
    "trigger_not_active",
    "no_workflow_active_steps_defined",
    "no_workflow_steps_defined",
    "processed",
    "no_tenant_found",
    "invalid_recipients",
]

MAX_CONTEXT_KEYS = 5


class ContextReference(RequestSchema):
    """A context named with data: ``{"id": "acme", "data": {...}}`` (stored, replacing its data)."""

    id: str = Field(min_length=1, max_length=100)
    data: dict[str, Any] | None = None


# A trigger's context: per type, the id of a context, or the object form.
TriggerContext = dict[str, str | ContextReference]

# Recipients are checked one by one by the trigger use case rather than by the
# model: one bad recipient must not fail a request that names good ones.
Recipient = str | dict[str, Any]


class TriggerEventRequest(RequestSchema):
    name: str = Field(min_length=1, max_length=300, description="Trigger identifier of the workflow")
    to: Recipient | list[Recipient] = Field(
        description=(
            "A subscriberId, a subscriber object {subscriberId, email, ...}, a topic "
            '{"type": "Topic", "topicKey": "..."}, or an array mixing them'
        )
    )
    payload: dict[str, Any] = Field(default_factory=dict)
    overrides: dict[str, Any] = Field(default_factory=dict)
    transactionId: str | None = Field(default=None, min_length=1, max_length=255)
    actor: str | dict[str, Any] | None = None
    tenant: str | dict[str, Any] | None = None
    context: TriggerContext | None = None
    # Sent by the framework's own ``workflow.trigger()``: the workflow is discovered on this bridge and run
    # there without a sync (herald/bridge/stateless.py). Hidden in Novu's API reference, as here.
    bridgeUrl: str | None = Field(default=None, min_length=1, max_length=2048)
    # With ``bridgeUrl``: ``{"steps": {<stepId>: {control values}}}``, sent to the bridge as each step's controls.
    controls: dict[str, Any] | None = None

    @field_validator("context")
    @classmethod
    def _context_size(cls, value: TriggerContext | None) -> TriggerContext | None:
        if value is not None and len(value) > MAX_CONTEXT_KEYS:
            raise ValueError(f"context may have at most {MAX_CONTEXT_KEYS} keys")
        return value


class TriggerTenant(UpdateTenantRequest):
    """A trigger's tenant object: an existing tenant, whose name and data it may update."""

    identifier: str = Field(min_length=1, max_length=255)


class BroadcastEventRequest(RequestSchema):
    name: str = Field(min_length=1, max_length=300)
    payload: dict[str, Any]
    overrides: dict[str, Any] = Field(default_factory=dict)
    transactionId: str | None = Field(default=None, min_length=1, max_length=255)
    actor: str | dict[str, Any] | None = None
    tenant: str | dict[str, Any] | None = None
    context: TriggerContext | None = None


class BulkTriggerEventRequest(RequestSchema):
    events: list[TriggerEventRequest] = Field(min_length=1, max_length=100)


class TriggerEventResponse(Schema):
    acknowledged: bool
    status: TriggerStatus
    error: list[str] = optional_field()
    transactionId: str = optional_field()
