"""Plivo's message status callback: what became of an SMS Plivo accepted (herald/providers/inbound.py).

Plivo posts a form (``MessageUUID``, ``Status``, ``ErrorCode``...) to the
``url`` given with the send (or the application's message URL);
``MessageUUID`` is the ``message_uuid`` Plivo answered the send with, which
Herald keeps as the message's provider id.

Plivo always signs: ``X-Plivo-Signature-V3`` lists base64 HMAC-SHA256
signatures, keyed by the account's auth token (the integration's ``token``
credential), of the URL Plivo called (its query sorted, then ``?``, the query,
a ``.`` when there is one), each form field's name and value sorted by name,
``.`` and ``X-Plivo-Signature-V3-Nonce``. A request without a matching one is
refused. The scheme carries a nonce, not a time, so a replay cannot be told
from a retry.

The callback carries no id of the event: its identity is a digest of the
``MessageUUID``, Plivo's ``Status`` string and ``MessageTime`` (never the
nonce, new on each try). A message passes through each status once, so a
second callback with the same status is the first again and is recorded once.
"""

from __future__ import annotations

import base64
from urllib.parse import parse_qsl, urlsplit, urlunsplit

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

SIGNATURE_HEADER = "X-Plivo-Signature-V3"
NONCE_HEADER = "X-Plivo-Signature-V3-Nonce"

STATUSES: dict[str, DeliveryStatus] = {
    "queued": "queued",
    "sent": "sent",
    "delivered": "delivered",
    "undelivered": "undelivered",
    "failed": "failed",
    "rejected": "rejected",
    "read": "opened",
}


def signed_content(url: str, params: list[tuple[str, str]]) -> str:
    """What Plivo's V3 signature of a form POST to ``url`` is computed over (before ``.nonce``)."""
    parts = urlsplit(url)
    query = "&".join(f"{name}={value}" for name, value in sorted(parse_qsl(parts.query, keep_blank_values=True)))
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    if params:
        base += f"?{query}" + ("." if query else "")
    elif query:
        base += f"?{query}"
    return base + "".join(f"{name}{value}" for name, value in sorted(dict(params).items()))


def signature(url: str, params: list[tuple[str, str]], nonce: str, auth_token: str) -> str:
    content = f"{signed_content(url, params)}.{nonce}".encode()
    return base64.b64encode(hmac_digest(auth_token.encode(), content, "sha256")).decode()


def read_events(request: InboundRequest, integration: InboundIntegration) -> list[DeliveryEvent]:
    auth_token = integration.credential("token")
    if auth_token is None:
        raise SignatureRefused(
            "This Plivo integration has no token credential (the account's auth token) to check Plivo's signature"
        )
    given, nonce = request.header(SIGNATURE_HEADER), request.header(NONCE_HEADER)
    if given is None or nonce is None:
        raise SignatureRefused(f"The request is not signed: Plivo sends {SIGNATURE_HEADER} and {NONCE_HEADER}")
    params = request.form()
    expected = signature(request.url, params, nonce, auth_token)
    if not any(same(expected, candidate.strip()) for candidate in given.split(",")):
        raise SignatureRefused(
            f"{SIGNATURE_HEADER} does not match the URL, the form and the integration's auth token "
            "(behind a proxy, set HERALD_PUBLIC_URL to the address Plivo calls)"
        )
    form = dict(params)
    uuid = form.get("MessageUUID")
    if not uuid:
        raise BadRequestError("Plivo's status callback names the message by MessageUUID")
    plivo_status = form.get("Status", "")
    status = STATUSES.get(plivo_status)
    if status is None:
        return []
    error_code = form.get("ErrorCode")
    return [
        DeliveryEvent(
            reference=uuid,
            status=status,
            date=utcnow(),
            raw=form,
            response=f"Plivo error {error_code}" if error_code and error_code != "0" else None,
            key=event_key("digest", uuid, status, plivo_status, form.get("MessageTime")),
        )
    ]
