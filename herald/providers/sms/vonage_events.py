"""Vonage's SMS delivery receipts: what became of an SMS Vonage accepted (herald/providers/inbound.py).

Vonage's SMS API posts a delivery receipt (``messageId``, ``status``,
``err-code``, ``message-timestamp``...) to the account's delivery receipt URL,
form-encoded or JSON as the dashboard says (Herald's route takes POST, either
way); ``messageId`` is the ``message-id`` Vonage answered the send with, which
Herald keeps as the message's provider id.

Signing is opt-in at Vonage (signed webhooks, with the account's signature
secret), so it is here: with that secret in
``configurations.inboundWebhookSigningKey``, every receipt must carry ``sig``
and ``timestamp``: ``sig`` is the hex digest, by the dashboard's signature
method (MD5 hash, or an MD5, SHA-1, SHA-256 or SHA-512 HMAC keyed by the
secret), of each other parameter as ``&name=value`` sorted by name (``&`` and
``=`` in values read as ``_``), the MD5 hash with the secret appended; a
``timestamp`` more than 5 minutes from now is a replay. Without a secret,
unsigned receipts are taken.

A receipt carries no id of its own: its identity is a digest of the
``messageId``, Vonage's ``status`` string, ``err-code`` and ``scts`` (when the
carrier gave the receipt): never ``timestamp``, ``nonce`` or ``sig``, which a
signed retry may renew, nor ``message-timestamp``, Vonage's time of pushing it.
"""

from __future__ import annotations

import hashlib
import hmac
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
    same,
    text,
)

STATUSES: dict[str, DeliveryStatus] = {
    "accepted": "accepted",
    "buffered": "queued",
    "delivered": "delivered",
    "expired": "undelivered",
    "failed": "failed",
    "rejected": "rejected",
}
HMAC_METHODS = ("md5", "sha1", "sha256", "sha512")


def signed_content(params: dict[str, str]) -> bytes:
    return "".join(
        f"&{name}={params[name].replace('&', '_').replace('=', '_')}" for name in sorted(params) if name != "sig"
    ).encode()


def signatures(params: dict[str, str], secret: str) -> list[str]:
    """The digests Vonage may have sent, one per signature method."""
    content = signed_content(params)
    digests = [hashlib.md5(content + secret.encode()).hexdigest()]  # noqa: S324 - Vonage's "MD5 hash" method
    digests += [hmac.new(secret.encode(), content, method).hexdigest() for method in HMAC_METHODS]
    return digests


def _params(request: InboundRequest) -> dict[str, str]:
    content_type = (request.header("content-type") or "").lower()
    if "json" in content_type:
        body = request.json()
        if not isinstance(body, dict):
            raise BadRequestError("Vonage's delivery receipt is one JSON object")
        return {str(name): "" if value is None else str(value) for name, value in body.items()}
    return dict(request.form())


def verify(params: dict[str, str], secret: str) -> None:
    given = params.get("sig", "").strip().lower()
    if not given or not params.get("timestamp"):
        raise SignatureRefused("The receipt is not signed: Vonage's signed webhooks carry sig and timestamp")
    if not any(same(expected, given) for expected in signatures(params, secret)):
        raise SignatureRefused("sig does not match the receipt and the integration's signature secret")
    check_timestamp(params["timestamp"], name="timestamp")


def read_events(request: InboundRequest, integration: InboundIntegration) -> list[DeliveryEvent]:
    params = _params(request)
    if integration.signing_key is not None:
        verify(params, integration.signing_key)
    message_id = text(params.get("messageId"))
    if message_id is None:
        raise BadRequestError("Vonage's delivery receipt names the message by messageId")
    vonage_status = params.get("status", "")
    status = STATUSES.get(vonage_status)
    if status is None:
        return []
    error_code = params.get("err-code")
    raw: dict[str, Any] = {name: value for name, value in params.items() if name not in ("sig", "api-key")}
    return [
        DeliveryEvent(
            reference=message_id,
            status=status,
            date=event_time(params.get("message-timestamp")),
            raw=raw,
            response=f"Vonage error {error_code}" if error_code and error_code != "0" else None,
            key=event_key("digest", message_id, status, vonage_status, error_code, params.get("scts")),
        )
    ]
