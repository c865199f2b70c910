"""SendGrid's Event Webhook: what became of the mail SendGrid accepted (herald/providers/inbound.py).

The body is a JSON array of events, each naming the message by
``sg_message_id``, whose first part (before the first dot) is the
``X-Message-Id`` SendGrid answered the send with, which Herald keeps as the
message's provider id.

Signing is opt-in at SendGrid, so it is here: with the webhook's verification
key (the base64 public key SendGrid shows, or its PEM) in
``configurations.inboundWebhookSigningKey``, every request must carry
``X-Twilio-Email-Event-Webhook-Signature``, an ECDSA P-256 / SHA-256 signature
(base64 DER) over ``X-Twilio-Email-Event-Webhook-Timestamp`` followed by the
raw body, with a recent timestamp; without a key, unsigned events are taken.

An event's identity is its ``sg_event_id``, which SendGrid gives every event
and keeps when it posts a batch again (it retries for 72 hours); events
without one (older accounts' formats) are known by a digest of the full
``sg_message_id`` (one per recipient), the event's name, its timestamp and
the clicked URL: a second open in the same second is then taken for the
first.
"""

from __future__ import annotations

import base64
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

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

SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"

# SendGrid's event names -> the statuses Herald records. Events not here
# (group_resubscribe, account_status_change...) say nothing of delivery and are skipped.
STATUSES: dict[str, DeliveryStatus] = {
    "processed": "accepted",
    "deferred": "deferred",
    "delivered": "delivered",
    "dropped": "dropped",
    "bounce": "bounced",
    "blocked": "blocked",
    "open": "opened",
    "click": "clicked",
    "spamreport": "spam",
    "unsubscribe": "unsubscribed",
    "group_unsubscribe": "unsubscribed",
}


def _public_key(key: str) -> ec.EllipticCurvePublicKey:
    try:
        if "-----BEGIN" in key:
            loaded = load_pem_public_key(key.encode())
        else:
            loaded = load_der_public_key(base64.b64decode("".join(key.split())))
    except ValueError:
        loaded = None
    if not isinstance(loaded, ec.EllipticCurvePublicKey):
        raise MisconfiguredError(
            "configurations.inboundWebhookSigningKey of this SendGrid integration is not SendGrid's "
            "verification key (an ECDSA public key, base64 or PEM)"
        )
    return loaded


def verify(request: InboundRequest, key: str) -> None:
    signature = request.header(SIGNATURE_HEADER)
    timestamp = request.header(TIMESTAMP_HEADER)
    if signature is None or timestamp is None:
        raise SignatureRefused(f"The request is not signed: {SIGNATURE_HEADER} and {TIMESTAMP_HEADER} are required")
    decoded = b64decode(signature)
    if decoded is None:
        raise SignatureRefused(f"{SIGNATURE_HEADER} is not base64")
    try:
        _public_key(key).verify(decoded, timestamp.encode() + request.body, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise SignatureRefused("The signature does not match the body and the integration's verification key") from None
    check_timestamp(timestamp, name=TIMESTAMP_HEADER)


def _event(item: dict[str, Any], status: DeliveryStatus) -> DeliveryEvent | None:
    sg_message_id = text(item.get("sg_message_id"))
    if sg_message_id is None:
        return None
    response = text(item.get("reason")) or text(item.get("response"))
    attempts = item.get("attempt")
    sg_event_id = text(item.get("sg_event_id"))
    key = (
        event_key("sg_event_id", sg_event_id)
        if sg_event_id is not None
        else event_key("digest", sg_message_id, item.get("event"), item.get("timestamp"), item.get("url"))
    )
    return DeliveryEvent(
        reference=sg_message_id.split(".", 1)[0],
        status=status,
        date=event_time(item.get("timestamp")),
        raw=item,
        attempts=int(attempts) if isinstance(attempts, int | str) and str(attempts).isdigit() else None,
        response=response,
        key=key,
    )


def read_events(request: InboundRequest, integration: InboundIntegration) -> list[DeliveryEvent]:
    if integration.signing_key is not None:
        verify(request, integration.signing_key)
    body = request.json()
    if isinstance(body, dict):
        body = [body]
    if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
        raise BadRequestError("SendGrid's event webhook posts a JSON array of event objects")
    events = []
    for item in body:
        status = STATUSES.get(str(item.get("event", "")))
        if status == "bounced" and item.get("type") == "blocked":
            status = "blocked"
        event = _event(item, status) if status is not None else None
        if event is not None:
            events.append(event)
    return events
