"""Postmark's webhooks: what became of a message Postmark accepted (herald/providers/inbound.py).

Each request is one JSON record whose ``RecordType`` says what it is
(``Delivery``, ``Bounce``, ``SpamComplaint``, ``Open``, ``Click``...) and whose
``MessageID`` is the id Postmark answered the send with, which Herald keeps as
the message's provider id.

Postmark does not sign its webhooks; it sends the user and password written in
the webhook's URL as HTTP basic auth. So Herald takes a Postmark event only
with basic auth matching the integration's ``user`` and ``password``
credentials (or ``user:password`` in ``configurations.inboundWebhookSigningKey``):
without them set, or without the header, every request is refused.

Postmark gives no id of the event itself (a bounce's ``ID`` names the bounce,
and its type can change: a soft bounce followed by a hard one), so an event's
identity is a digest of what it says: the record type, the message, the
recipient, the bounce's ID and type, the clicked link, and the event's own time
(``DeliveredAt``, ``ReceivedAt``... to Postmark's 100 ns), which tells two
opens apart.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from herald.deliveries.schemas import DeliveryEvent, DeliveryStatus
from herald.kit.errors import BadRequestError
from herald.providers.inbound import (
    InboundIntegration,
    InboundRequest,
    SignatureRefused,
    event_key,
    event_time,
    same,
    text,
)

# Postmark's bounce types that say the mail may still arrive (it retries) or that were no bounce at all.
NOT_A_BOUNCE = frozenset(
    {"Transient", "SoftBounce", "DnsError", "AutoResponder", "OpenRelayTest", "ChallengeVerification", "Subscribe"}
)


def _credentials(integration: InboundIntegration) -> tuple[str, str]:
    user, password = integration.credential("user"), integration.credential("password")
    if user is not None and password is not None:
        return user, password
    key = integration.signing_key
    if key is not None and ":" in key:
        user, _, password = key.partition(":")
        return user, password
    raise SignatureRefused(
        "This Postmark integration has no webhook user and password: set its user and password credentials "
        "(or configurations.inboundWebhookSigningKey to user:password) and give Postmark the webhook URL with them"
    )


def verify(request: InboundRequest, integration: InboundIntegration) -> None:
    user, password = _credentials(integration)
    header = request.header("Authorization") or ""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        raise SignatureRefused("Postmark's webhook must carry the integration's user and password (HTTP basic auth)")
    try:
        given = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureRefused("The Authorization header is not HTTP basic auth") from None
    if not same(f"{user}:{password}".encode(), given):
        raise SignatureRefused("The user and password do not match the integration's")


def _status(record: dict[str, Any]) -> DeliveryStatus | None:
    kind = record.get("RecordType")
    if kind == "Delivery":
        return "delivered"
    if kind == "Bounce":
        if record.get("Type") == "SpamComplaint":
            return "spam"
        if record.get("Type") in NOT_A_BOUNCE:
            return "deferred"
        return "blocked" if record.get("Type") == "Blocked" else "bounced"
    if kind == "SpamComplaint":
        return "spam"
    if kind == "Open":
        return "opened"
    if kind == "Click":
        return "clicked"
    if kind == "SubscriptionChange" and record.get("SuppressSending") is True:
        return "unsubscribed"
    return None


DATE_FIELDS = ("DeliveredAt", "BouncedAt", "ReceivedAt", "ChangedAt")


def read_events(request: InboundRequest, integration: InboundIntegration) -> list[DeliveryEvent]:
    verify(request, integration)
    record = request.json()
    if not isinstance(record, dict):
        raise BadRequestError("Postmark's webhook posts one JSON record")
    status = _status(record)
    message_id = text(record.get("MessageID"))
    if status is None or message_id is None:
        return []
    date = next((record[name] for name in DATE_FIELDS if record.get(name)), None)
    response = text(record.get("Details")) or text(record.get("Description"))
    key = event_key(
        "digest",
        record.get("RecordType"),
        message_id,
        record.get("Recipient") or record.get("Email"),
        record.get("ID"),
        record.get("Type"),
        record.get("OriginalLink"),
        record.get("SuppressSending"),
        date,
    )
    return [
        DeliveryEvent(
            reference=message_id, status=status, date=event_time(date), raw=record, response=response, key=key
        )
    ]
