"""Mailgun's webhooks: what became of a message Mailgun accepted (herald/providers/inbound.py).

Each request is one event, JSON ``{"signature": {...}, "event-data": {...}}``;
``event-data.message.headers.message-id`` is the id Mailgun answered the send
with, less its angle brackets (Herald keeps it as Mailgun gave it,
``<...@domain>``).

Signing is opt-in here: with the domain's HTTP webhook signing key in
``configurations.inboundWebhookSigningKey``, ``signature.signature`` must be the
hex HMAC-SHA256 of ``signature.timestamp`` followed by ``signature.token``,
keyed by it, and the timestamp must be recent; without a key, events are taken
unsigned. The signature does not cover the body, so its token is taken once,
as Mailgun advises: a request whose token was used already is refused, whatever
its body (herald/providers/inbound.py, ``spend_once``).

An event's identity is ``event-data.id``, Mailgun's id of the event (the same
on each retry); without one, a digest of the message id, the event, its
severity, the recipient and the event's timestamp (to the microsecond).
"""

from __future__ import annotations

from typing import Any

from herald.deliveries.schemas import DeliveryEvent, DeliveryStatus
from herald.kit.errors import BadRequestError
from herald.providers.inbound import (
    InboundIntegration,
    InboundRequest,
    SignatureRefused,
    check_timestamp,
    event_key,
    event_time,
    hmac_digest,
    same,
    spend_once,
    text,
)

STATUSES: dict[str, DeliveryStatus] = {
    "accepted": "accepted",
    "delivered": "delivered",
    "opened": "opened",
    "clicked": "clicked",
    "complained": "complaint",
    "unsubscribed": "unsubscribed",
    "rejected": "rejected",
}


def signature(signing_key: str, timestamp: str, token: str) -> str:
    return hmac_digest(signing_key.encode(), (timestamp + token).encode(), "sha256").hex()


def verify(body: dict[str, Any], signing_key: str) -> tuple[str, str]:
    """Check the signature; answers its timestamp and token."""
    signed = body.get("signature")
    if not isinstance(signed, dict):
        raise SignatureRefused("The request is not signed: Mailgun sends signature {timestamp, token, signature}")
    timestamp, token, given = (text(signed.get(key)) for key in ("timestamp", "token", "signature"))
    if timestamp is None or token is None or given is None:
        raise SignatureRefused("signature must carry timestamp, token and signature")
    if not same(signature(signing_key, timestamp, token), given.lower()):
        raise SignatureRefused("The signature does not match the integration's webhook signing key")
    check_timestamp(timestamp, name="signature.timestamp")
    return timestamp, token


def _status(data: dict[str, Any]) -> DeliveryStatus | None:
    event = str(data.get("event", ""))
    if event == "failed":
        # A temporary failure is retried by Mailgun; a permanent one is a bounce (or a drop before sending).
        if data.get("severity") == "temporary":
            return "deferred"
        return (
            "dropped"
            if data.get("reason") in ("suppress-bounce", "suppress-complaint", "suppress-unsubscribe")
            else "bounced"
        )
    return STATUSES.get(event)


async def read_events(request: InboundRequest, integration: InboundIntegration) -> list[DeliveryEvent]:
    body = request.json()
    if not isinstance(body, dict):
        raise BadRequestError("Mailgun's webhook posts a JSON object with signature and event-data")
    signing_key = integration.signing_key
    if signing_key is not None:
        timestamp, token = verify(body, signing_key)
        await spend_once(integration, signing_key, token, timestamp, name="signature.token")
    data = body.get("event-data")
    if not isinstance(data, dict):
        raise BadRequestError("Mailgun's webhook carries the event in event-data")
    status = _status(data)
    message = data.get("message") if isinstance(data.get("message"), dict) else {}
    headers = message.get("headers") if isinstance(message.get("headers"), dict) else {}
    message_id = text(headers.get("message-id"))
    if status is None or message_id is None:
        return []
    delivery = data.get("delivery-status") if isinstance(data.get("delivery-status"), dict) else {}
    response = text(delivery.get("description")) or text(delivery.get("message")) or text(data.get("reason"))
    attempts = delivery.get("attempt-no")
    event_id = text(data.get("id"))
    key = (
        event_key("mailgun_event_id", event_id)
        if event_id is not None
        else event_key(
            "digest", message_id, data.get("event"), data.get("severity"), data.get("recipient"), data.get("timestamp")
        )
    )
    return [
        DeliveryEvent(
            reference=f"<{message_id.strip('<>')}>",
            status=status,
            date=event_time(data.get("timestamp")),
            raw=data,
            attempts=attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else None,
            response=response,
            key=key,
        )
    ]
