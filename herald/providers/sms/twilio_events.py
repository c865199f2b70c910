"""Twilio's SMS status callback: what became of a message Twilio accepted (herald/providers/inbound.py).

Twilio posts a form (``MessageSid``, ``MessageStatus``, ``ErrorCode``...) to the
integration's route, given as the send's ``StatusCallback`` or the Messaging
Service's. ``MessageSid`` is the ``sid`` Twilio answered the send with, which
Herald keeps as the message's provider id.

Twilio always signs: ``X-Twilio-Signature`` is the base64 HMAC-SHA1, keyed by
the account's auth token (the integration's ``token`` credential), of the full
URL Twilio called followed by each form parameter's name and value, sorted by
name. A request without it, or with another, is refused. Behind a proxy the URL
Twilio called is not the one Herald sees: ``HERALD_PUBLIC_URL`` says it.
Twilio's scheme carries no timestamp, so a replay cannot be told from a retry.

The callback carries no id of its own either, nor (but for ``RawDlrDoneDate``
on a carrier's receipt) a time: an event's identity is a digest of the
message's sid, Twilio's status string and ``RawDlrDoneDate``. A message
passes through each status once, so a second callback with the same status is
the first again (a retry or a replay) and is recorded once.
"""

from __future__ import annotations

import base64

from herald.deliveries.schemas import DeliveryEvent, DeliveryStatus
from herald.kit.errors import BadRequestError
from herald.kit.time import utcnow
from herald.providers.inbound import (
    InboundIntegration,
    InboundRequest,
    SignatureRefused,
    event_key,
    hmac_digest,
    same,
)

SIGNATURE_HEADER = "X-Twilio-Signature"

# Twilio's MessageStatus -> the status Herald records; the rest (receiving,
# received: inbound messages) say nothing of a sent one and are skipped.
STATUSES: dict[str, DeliveryStatus] = {
    "accepted": "accepted",
    "scheduled": "queued",
    "queued": "queued",
    "sending": "sending",
    "sent": "sent",
    "delivered": "delivered",
    "undelivered": "undelivered",
    "failed": "failed",
    "canceled": "dropped",
    "read": "opened",
}


def signature(url: str, params: list[tuple[str, str]], auth_token: str) -> str:
    """Twilio's signature of a form POST to ``url``."""
    content = url + "".join(name + value for name, value in sorted(params, key=lambda pair: pair[0]))
    return base64.b64encode(hmac_digest(auth_token.encode(), content.encode(), "sha1")).decode()


def read_events(request: InboundRequest, integration: InboundIntegration) -> list[DeliveryEvent]:
    auth_token = integration.credential("token")
    if auth_token is None:
        raise SignatureRefused(
            "This Twilio integration has no token credential (the account's auth token) to check Twilio's signature"
        )
    given = request.header(SIGNATURE_HEADER)
    if given is None:
        raise SignatureRefused(f"The request is not signed: Twilio sends {SIGNATURE_HEADER}")
    params = request.form()
    if not same(signature(request.url, params, auth_token), given):
        raise SignatureRefused(
            f"{SIGNATURE_HEADER} does not match the URL, the form and the integration's auth token "
            "(behind a proxy, set HERALD_PUBLIC_URL to the address Twilio calls)"
        )
    form = dict(params)
    sid = form.get("MessageSid") or form.get("SmsSid")
    twilio_status = form.get("MessageStatus") or form.get("SmsStatus") or ""
    status = STATUSES.get(twilio_status)
    if not sid:
        raise BadRequestError("Twilio's status callback names the message by MessageSid")
    if status is None:
        return []
    error_code = form.get("ErrorCode")
    return [
        DeliveryEvent(
            reference=sid,
            status=status,
            # The callback carries no time of its own: it is sent as the status changes.
            date=utcnow(),
            raw=form,
            response=f"Twilio error {error_code}" if error_code else None,
            key=event_key("digest", sid, status, twilio_status, form.get("RawDlrDoneDate")),
        )
    ]
