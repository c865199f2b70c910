"""Telnyx's messaging webhooks (API v2): what became of a message Telnyx accepted (herald/providers/inbound.py).

Each request is one JSON event ``{"data": {"event_type": "message.sent" |
"message.finalized", "payload": {"id", "to": [{"status"}], "errors"}}}``;
``payload.id`` is the id Telnyx answered the send with, which Herald keeps as
the message's provider id, and the recipient's ``status`` says where it is.

Telnyx always signs: ``telnyx-signature-ed25519`` is the base64 Ed25519
signature of ``{telnyx-timestamp}|{body}`` by Telnyx's key, whose public half
(base64, from the Mission Control portal's Public Key page) goes in
``configurations.inboundWebhookSigningKey``. A request without a valid
signature, or with a timestamp more than 5 minutes from now, is refused; so is
every request while the key is not set.

An event's identity is ``data.id``, Telnyx's id of the event (the same on
each retry: ``meta.attempt`` counts them); without one, a digest of the
message, the event type, the recipient's status and ``occurred_at``.
"""

from __future__ import annotations

from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

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
    text,
)

SIGNATURE_HEADER = "telnyx-signature-ed25519"
TIMESTAMP_HEADER = "telnyx-timestamp"

STATUSES: dict[str, DeliveryStatus] = {
    "queued": "queued",
    "sending": "sending",
    "sent": "sent",
    "delivered": "delivered",
    "delivery_failed": "undelivered",
    "sending_failed": "failed",
    "expired": "failed",
}


def _public_key(key: str) -> Ed25519PublicKey:
    raw = b64decode("".join(key.split()))
    try:
        return Ed25519PublicKey.from_public_bytes(raw or b"")
    except ValueError:
        raise MisconfiguredError(
            "configurations.inboundWebhookSigningKey of this Telnyx integration is not Telnyx's public key "
            "(32 bytes, base64)"
        ) from None


def verify(request: InboundRequest, key: str) -> None:
    signature, timestamp = request.header(SIGNATURE_HEADER), request.header(TIMESTAMP_HEADER)
    if signature is None or timestamp is None:
        raise SignatureRefused(f"The request is not signed: {SIGNATURE_HEADER} and {TIMESTAMP_HEADER} are required")
    decoded = b64decode(signature)
    try:
        _public_key(key).verify(decoded or b"", f"{timestamp}|".encode() + request.body)
    except InvalidSignature:
        raise SignatureRefused(
            "The signature does not match the body and the integration's Telnyx public key"
        ) from None
    check_timestamp(timestamp, name=TIMESTAMP_HEADER)


def read_events(request: InboundRequest, integration: InboundIntegration) -> list[DeliveryEvent]:
    key = integration.signing_key
    if key is None:
        raise SignatureRefused(
            "This Telnyx integration has no public key: set configurations.inboundWebhookSigningKey to the "
            "public key Telnyx signs its webhooks with"
        )
    verify(request, key)
    body = request.json()
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("payload"), dict):
        raise BadRequestError("Telnyx's webhook posts one JSON event with data.payload")
    payload: dict[str, Any] = data["payload"]
    if not str(data.get("event_type", "")).startswith("message.") or payload.get("direction") == "inbound":
        return []
    recipients = [item for item in payload.get("to") or [] if isinstance(item, dict)]
    status = STATUSES.get(str(recipients[0].get("status"))) if recipients else None
    message_id = text(payload.get("id"))
    if status is None or message_id is None:
        return []
    errors = [item for item in payload.get("errors") or [] if isinstance(item, dict)]
    response = "; ".join(
        " ".join(
            part for part in (text(error.get("code")), text(error.get("title")) or text(error.get("detail"))) if part
        )
        for error in errors
    )
    event_id = text(data.get("id"))
    key = (
        event_key("telnyx_event_id", event_id)
        if event_id is not None
        else event_key(
            "digest", message_id, data.get("event_type"), recipients[0].get("status"), data.get("occurred_at")
        )
    )
    return [
        DeliveryEvent(
            reference=message_id,
            status=status,
            date=event_time(payload.get("completed_at") or data.get("occurred_at")),
            raw=body,
            response=response or None,
            key=key,
        )
    ]
