"""Amazon SES's events through Amazon SNS: what became of a message SES accepted (herald/providers/inbound.py).

SES publishes its events (a configuration set's event destination, or an
identity's bounce/complaint/delivery notifications) to an SNS topic; the topic's
HTTPS subscription is Herald's route. Each SNS message carries the SES event as
a JSON string in ``Message``, whose ``mail.messageId`` is the ``MessageId``
SES answered the send with, which Herald keeps as the message's provider id.

SNS always signs: ``Signature`` is an RSA signature (SHA1 for
``SignatureVersion`` 1, SHA256 for 2) of the message's fields, with the
certificate at ``SigningCertURL``, which must be served over HTTPS by
``sns.<region>.amazonaws.com``; it is fetched once through the outbound policy
and kept. A message that is not signed so, or whose ``Timestamp`` is more than
an hour old, is refused (SNS retries a delivery with the same signed message,
so the window is wider than for schemes that sign each try). A
``SubscriptionConfirmation`` that verifies is confirmed by fetching its
``SubscribeURL`` (on the same SNS host), so adding the subscription in AWS is
all it takes.

An event's identity is the SNS ``MessageId``: signed with the message, the
same on each of SNS's retries of it, and one per event SES publishes (SES
events carry no id of their own).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from herald.deliveries.schemas import DeliveryEvent, DeliveryStatus
from herald.kit.errors import BadRequestError
from herald.providers.inbound import (
    InboundIntegration,
    InboundRequest,
    SignatureRefused,
    b64decode,
    event_key,
    event_time,
    text,
)

SNS_HOST = re.compile(r"^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$")
TIMESTAMP_TOLERANCE_SECONDS = 3600
# The fields each type of SNS message signs, in the order they are signed.
SIGNED_FIELDS = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"),
    "UnsubscribeConfirmation": ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"),
}
MAX_CERTIFICATES = 32
# SigningCertURL -> its public key: SNS signs with few certificates, each for months.
_certificates: dict[str, rsa.RSAPublicKey] = {}


def is_sns_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "https" and parts.port in (None, 443) and bool(SNS_HOST.match(parts.hostname or ""))


def string_to_sign(message: dict[str, Any]) -> bytes:
    fields = SIGNED_FIELDS[message["Type"]]
    return "".join(
        f"{name}\n{message[name]}\n" for name in fields if name != "Subject" or message.get("Subject") is not None
    ).encode()


async def _public_key(request: InboundRequest, url: str) -> rsa.RSAPublicKey:
    known = _certificates.get(url)
    if known is not None:
        return known
    if request.fetch is None:
        raise SignatureRefused("Herald cannot fetch SNS's signing certificate here")
    try:
        certificate = x509.load_pem_x509_certificate(await request.fetch(url))
    except ValueError:
        raise SignatureRefused("SigningCertURL does not serve a PEM certificate") from None
    key = certificate.public_key()
    if not isinstance(key, rsa.RSAPublicKey):
        raise SignatureRefused("SigningCertURL's certificate is not an RSA certificate")
    if len(_certificates) >= MAX_CERTIFICATES:
        _certificates.pop(next(iter(_certificates)))
    _certificates[url] = key
    return key


async def verify(request: InboundRequest, message: dict[str, Any]) -> None:
    kind = message.get("Type")
    if kind not in SIGNED_FIELDS:
        raise BadRequestError(f"Not an SNS message Herald reads: Type {kind!r}")
    missing = [name for name in SIGNED_FIELDS[kind] if name != "Subject" and not isinstance(message.get(name), str)]
    signature = b64decode(str(message.get("Signature") or ""))
    cert_url = text(message.get("SigningCertURL")) or ""
    if missing or not signature:
        raise SignatureRefused(f"The SNS message is not signed or lacks {', '.join(missing) or 'Signature'}")
    if not is_sns_url(cert_url):
        raise SignatureRefused("SigningCertURL must be an https address of sns.<region>.amazonaws.com")
    algorithm = {"1": hashes.SHA1(), "2": hashes.SHA256()}.get(str(message.get("SignatureVersion")))
    if algorithm is None:
        raise SignatureRefused("SignatureVersion must be 1 or 2")
    key = await _public_key(request, cert_url)
    try:
        key.verify(signature, string_to_sign(message), padding.PKCS1v15(), algorithm)
    except InvalidSignature:
        raise SignatureRefused("The SNS signature does not match the message and SNS's certificate") from None
    published = event_time(message["Timestamp"]).timestamp()
    if abs(time.time() - published) > TIMESTAMP_TOLERANCE_SECONDS:
        raise SignatureRefused(
            f"The SNS message is more than {TIMESTAMP_TOLERANCE_SECONDS} seconds old: a replayed request is refused"
        )


def _status(event: dict[str, Any]) -> tuple[DeliveryStatus | None, str | None, Any]:
    """The status, the provider's reason and the time of one SES event (either form SES publishes)."""
    kind = str(event.get("eventType") or event.get("notificationType") or "")
    if kind == "Bounce":
        bounce = event.get("bounce") or {}
        recipients = bounce.get("bouncedRecipients") or [{}]
        reason = text(recipients[0].get("diagnosticCode")) or text(bounce.get("bounceSubType"))
        status: DeliveryStatus = "deferred" if bounce.get("bounceType") == "Transient" else "bounced"
        return status, reason, bounce.get("timestamp")
    simple: dict[str, tuple[DeliveryStatus, str]] = {
        "Send": ("accepted", "mail"),
        "Delivery": ("delivered", "delivery"),
        "Complaint": ("complaint", "complaint"),
        "Open": ("opened", "open"),
        "Click": ("clicked", "click"),
        "Reject": ("rejected", "reject"),
        "DeliveryDelay": ("delayed", "deliveryDelay"),
        "Rendering Failure": ("failed", "failure"),
    }
    if kind not in simple:
        return None, None, None
    status, section = simple[kind]
    detail = event.get(section) if isinstance(event.get(section), dict) else {}
    reason = text(detail.get("smtpResponse")) or text(detail.get("reason")) or text(detail.get("errorMessage"))
    return status, reason, detail.get("timestamp")


async def read_events(request: InboundRequest, integration: InboundIntegration) -> list[DeliveryEvent]:
    message = request.json()
    if not isinstance(message, dict):
        raise BadRequestError("Amazon SNS posts one JSON message")
    await verify(request, message)
    if message["Type"] == "SubscriptionConfirmation":
        if not is_sns_url(message["SubscribeURL"]) or request.fetch is None:
            raise BadRequestError("SubscribeURL must be an https address of sns.<region>.amazonaws.com")
        await request.fetch(message["SubscribeURL"])
        return []
    if message["Type"] != "Notification":
        return []
    try:
        event = json.loads(message["Message"])
    except ValueError:
        raise BadRequestError("The SNS message's Message is not an SES event") from None
    if not isinstance(event, dict) or not isinstance(event.get("mail"), dict):
        return []
    status, reason, when = _status(event)
    message_id = text(event["mail"].get("messageId"))
    if status is None or message_id is None:
        return []
    return [
        DeliveryEvent(
            reference=message_id,
            status=status,
            date=event_time(when or event["mail"].get("timestamp")),
            raw=event,
            response=reason,
            key=event_key("sns_message_id", message["MessageId"]),
        )
    ]
