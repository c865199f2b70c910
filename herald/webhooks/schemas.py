"""Outbound webhook endpoints: what the application registers, and what it is answered."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from herald.kit.schemas import RequestSchema, Schema

EventType = Literal[
    "message.sent",
    "message.failed",
    "message.delivered",
    "message.bounced",
    "message.seen",
    "message.read",
    "message.archived",
    "workflow.updated",
    "preference.updated",
]


class CreateWebhookEndpointRequest(RequestSchema):
    url: str = Field(min_length=1, max_length=2048, description="An http or https URL; deliveries go through the outbound policy")
    eventTypes: list[EventType] = Field(min_length=1, max_length=20)
    description: str = Field(default="", max_length=1000)


class WebhookEndpoint(Schema):
    id: str = Field(alias="_id")
    url: str
    description: str
    eventTypes: list[str]
    environment_id: str = Field(alias="_environmentId")
    # Healthy: both null. Failing: failingSince is the first failure since the last success.
    failingSince: str | None = None
    disabled: bool
    disabledAt: str | None = None
    disabledReason: str | None = None
    createdAt: str
    updatedAt: str


class CreatedWebhookEndpoint(WebhookEndpoint):
    secret: str = Field(description="The Standard Webhooks signing secret (whsec_...): shown this once")
