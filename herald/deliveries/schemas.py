"""Delivery events as Herald records them, and the answers in Novu's shapes.

``DeliveryEvent`` is the normalised form every provider's webhook is read into
(herald/deliveries/parsers.py); ``WebhookResult`` is novu-py's
``WebhookResultDto``, the answer of ``POST /v2/inbound-webhooks/...``;
``ExecutionDetails`` is Novu's ``ExecutionDetailsResponseDto``
(``GET /v1/execution-details``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import Field

from herald.kit.schemas import Schema, optional_field
from herald.notifications.schemas import ExecutionDetailSource, ExecutionDetailStatus

# The event statuses novu-py's EventBody names, as providers report them.
DeliveryStatus = Literal[
    "opened",
    "rejected",
    "sent",
    "deferred",
    "delivered",
    "bounced",
    "dropped",
    "clicked",
    "blocked",
    "spam",
    "unsubscribed",
    "delayed",
    "complaint",
    "created",
    "accepted",
    "queued",
    "sending",
    "failed",
    "undelivered",
    "dismissed",
]
DELIVERY_STATUSES: tuple[str, ...] = get_args(DeliveryStatus)


@dataclass(frozen=True)
class DeliveryEvent:
    """One thing a delivery provider says happened to one message, whatever the provider.

    ``reference`` is how the provider names the message: Herald's message id or
    the provider's own id for it (``provider_message_id``). ``raw`` is the
    provider's event as received, kept as the execution detail's evidence.
    ``key`` is the event's identity (:func:`herald.providers.inbound.event_key`),
    set by a provider's own reader so that an event delivered twice is recorded
    once; in the generic form of ``activity.track`` an event has one when it
    states its date (the digest of its body), and one without a date is
    recorded every time it is posted.
    """

    reference: str
    status: DeliveryStatus
    date: datetime
    raw: dict[str, Any] = field(default_factory=dict)
    attempts: int | None = None
    response: str | None = None
    key: str | None = None


class EventBody(Schema):
    """novu-py's ``EventBody``: the event as recorded; ``row`` is the provider's event as a JSON string."""

    status: DeliveryStatus
    date: str
    externalId: str = optional_field()
    attempts: float = optional_field()
    response: str = optional_field()
    row: str = optional_field()


class WebhookResult(Schema):
    """novu-py's ``WebhookResultDto``: the message reference the event named, and the event."""

    id: str
    event: EventBody


class ExecutionDetails(Schema):
    """Novu's ``ExecutionDetailsResponseDto``: one thing that happened to one step of a notification."""

    id: str = Field(alias="_id")
    organization_id: str = Field(alias="_organizationId")
    job_id: str = optional_field(alias="_jobId")
    environment_id: str = Field(alias="_environmentId")
    notification_id: str = Field(alias="_notificationId")
    notification_template_id: str = Field(alias="_notificationTemplateId")
    subscriber_id: str = Field(alias="_subscriberId")
    message_id: str = optional_field(alias="_messageId")
    providerId: str = optional_field()
    transactionId: str
    # The step's type (Novu's StepTypeEnum); a string, so a detail of a step type added later still reads.
    channel: str = optional_field()
    detail: str
    source: ExecutionDetailSource
    status: ExecutionDetailStatus
    isTest: bool = False
    isRetry: bool
    # The provider's raw answer or event, as a JSON string (as the activity feed gives it).
    raw: str = optional_field()
    createdAt: str
