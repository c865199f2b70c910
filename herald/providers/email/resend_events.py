"""Resend's webhooks, signed by Svix: what became of a message Resend accepted (herald/providers/inbound.py).

Each request is one JSON event ``{"type": "email.delivered", "created_at": ...,
"data": {"email_id": ...}}``; ``data.email_id`` is the ``id`` Resend answered
the send with, which Herald keeps as the message's provider id.

Resend always signs, as Svix does: ``svix-signature`` lists ``v1,<base64>``
signatures, each the HMAC-SHA256 of ``{svix-id}.{svix-timestamp}.{body}``
keyed by the webhook's secret (``whsec_<base64>``, in
``configurations.inboundWebhookSigningKey``). A request without a matching
signature, or whose timestamp is more than 5 minutes from now (a replay), is
refused; so is every request while the integration has no secret.

An event's identity is its ``svix-id``: Svix's id of the webhook message,
signed with it, the same on every retry of it and unique otherwise.
"""

from __future__ import annotations

import base64

from herald.deliveries.schemas import DeliveryEvent, DeliveryStatus
from herald.kit.errors import BadRequestError, MisconfiguredError
from herald.providers.inbound import (
    InboundIntegration,
    InboundRequest,
    SignatureRefused,
    b64decode,
    check_timestamp,
    event_key,
    event_time,
    hmac_digest,
    same,
    text,
)

SECRET_PREFIX = "whsec_"

STATUSES: dict[str, DeliveryStatus] = {
    "email.sent": "sent",
    "email.delivered": "delivered",
    "email.delivery_delayed": "delayed",
    "email.bounced": "bounced",
    "email.complained": "complaint",
    "email.opened": "opened",
    "email.clicked": "clicked",
    "email.failed": "failed",
}


def signature(secret: str, message_id: str, timestamp: str, body: bytes) -> str:
    key = b64decode(secret.removeprefix(SECRET_PREFIX))
    if key is None:
        raise MisconfiguredError(
            "configurations.inboundWebhookSigningKey of this Resend integration is not the webhook's signing "
            "secret (whsec_...)"
        )
    content = f"{message_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac_digest(key, content, "sha256")).decode()


def verify(request: InboundRequest, secret: str) -> None:
    message_id, timestamp, given = (request.header(f"svix-{name}") for name in ("id", "timestamp", "signature"))
    if message_id is None or timestamp is None or given is None:
        raise SignatureRefused("The request is not signed: svix-id, svix-timestamp and svix-signature are required")
    expected = signature(secret, message_id, timestamp, request.body)
    candidates = [part.partition(",") for part in given.split()]
    if not any(version == "v1" and same(expected, value) for version, _, value in candidates):
        raise SignatureRefused("svix-signature does not match the body and the integration's signing secret")
    check_timestamp(timestamp, name="svix-timestamp")


def read_events(request: InboundRequest, integration: InboundIntegration) -> list[DeliveryEvent]:
    secret = integration.signing_key
    if secret is None:
        raise SignatureRefused(
            "This Resend integration has no signing secret: set configurations.inboundWebhookSigningKey to the "
            "webhook's whsec_... secret"
        )
    verify(request, secret)
    event = request.json()
    if not isinstance(event, dict) or not isinstance(event.get("data"), dict):
        raise BadRequestError("Resend's webhook posts one JSON event with type and data")
    status = STATUSES.get(str(event.get("type", "")))
    email_id = text(event["data"].get("email_id"))
    if status is None or email_id is None:
        return []
    bounce = event["data"].get("bounce") if isinstance(event["data"].get("bounce"), dict) else {}
    return [
        DeliveryEvent(
            reference=email_id,
            status=status,
            date=event_time(event.get("created_at")),
            raw=event,
            response=text(bounce.get("message")),
            # verify() refused the request without it.
            key=event_key("svix-id", request.header("svix-id")),
        )
    ]
