"""What every provider's reader of its own delivery webhooks shares.

A provider that reports what became of a message (delivered, bounced, opened...)
calls Herald at ``/webhooks/organizations/{org}/environments/{env}/{channel}/{integrationId}``
(herald/deliveries/inbound.py). The reader of that provider's events lives
beside its sender (``herald/providers/<channel>/<provider>_events.py``): it
checks the provider's signature on the request as it arrived, byte for byte,
and reads the body into :class:`~herald.deliveries.schemas.DeliveryEvent`.

A request whose signature is missing or wrong raises :class:`SignatureRefused`
before anything of it is trusted; a body that is not the provider's format
raises :class:`~herald.kit.errors.BadRequestError`.

Most providers sign the body, so a captured request replayed can only bring
events Herald recorded already (and records once, below). A signature that
does not cover the body (Mailgun's: a timestamp and a random token) would carry
any body until its timestamp is out of the tolerance, so its reader spends the
token (:func:`spend_once`) and a second request with it is refused.

Providers deliver at least once, so every event a reader gives carries its
identity, :func:`event_key`: the provider's own id of the event where it has
one, else a digest of what the event says (the message, the status, the
event's own time...: never anything that changes from one try to the next,
such as a signature's timestamp or nonce). Each reader says which, and why.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from herald.deliveries.schemas import DeliveryEvent
from herald.kit.errors import BadRequestError, UnauthorizedError
from herald.kit.time import parse_iso, utcnow

# A signed timestamp further than this from now (either way) is refused: an old
# request replayed, or a clock too far off to trust.
TIMESTAMP_TOLERANCE_SECONDS = 300


class SignatureRefused(UnauthorizedError):
    """The request does not prove it comes from the provider (401, nothing recorded)."""


@dataclass(frozen=True)
class InboundRequest:
    """A provider's webhook request as it arrived: what its signature is computed over.

    ``url`` is the address the provider called, as the provider saw it (the
    request's own, or ``HERALD_PUBLIC_URL`` + path behind a proxy); ``headers``
    have lower-case names.
    """

    url: str
    headers: Mapping[str, str]
    body: bytes
    # How a reader reaches back to the provider (Amazon SNS: its signing certificate, a
    # subscription's confirmation): GET a URL through the outbound policy, the body back.
    fetch: Callable[[str], Awaitable[bytes]] | None = None

    def header(self, name: str) -> str | None:
        value = self.headers.get(name.lower())
        return value.strip() if value is not None and value.strip() else None

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            raise BadRequestError("The body must be the provider's JSON event payload") from None

    def form(self) -> list[tuple[str, str]]:
        try:
            return parse_qsl(self.body.decode(), keep_blank_values=True, strict_parsing=bool(self.body))
        except (ValueError, UnicodeDecodeError):
            raise BadRequestError("The body must be the provider's form-encoded callback") from None


# Spends a signature's token (a digest, kept until the given time); False when it was spent already.
SpendToken = Callable[[str, datetime], Awaitable[bool]]


@dataclass(frozen=True)
class InboundIntegration:
    """What a reader needs of the integration: its credentials and configurations (opened), and where tokens are spent."""

    provider_id: str
    credentials: Mapping[str, Any]
    configurations: Mapping[str, Any] = field(default_factory=dict)
    spend_token: SpendToken | None = None

    def credential(self, name: str) -> str | None:
        value = self.credentials.get(name)
        return value.strip() if isinstance(value, str) and value.strip() else None

    @property
    def signing_key(self) -> str | None:
        """``configurations.inboundWebhookSigningKey``: the provider's webhook key, when set."""
        value = self.configurations.get("inboundWebhookSigningKey")
        return value.strip() if isinstance(value, str) and value.strip() else None


# A reader answers the events, or (when it must reach back to the provider first) an awaitable of them.
EventReader = Callable[[InboundRequest, InboundIntegration], list[DeliveryEvent] | Awaitable[list[DeliveryEvent]]]


def check_timestamp(value: str | None, *, name: str, now: float | None = None) -> None:
    """Refuse a signed timestamp (seconds since 1970) that is missing, unreadable or not recent."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        seconds = None
    if seconds is None or not math.isfinite(seconds):
        raise SignatureRefused(f"{name} is missing or is not a number of seconds")
    current = time.time() if now is None else now
    if abs(current - seconds) > TIMESTAMP_TOLERANCE_SECONDS:
        raise SignatureRefused(
            f"{name} is more than {TIMESTAMP_TOLERANCE_SECONDS} seconds from now: a replayed or delayed "
            "request is refused"
        )


async def spend_once(integration: InboundIntegration, signing_key: str, token: str, timestamp: str, *, name: str) -> None:
    """Refuse a signature's ``token`` already spent; else spend it until ``timestamp`` is out of the tolerance.

    For a signature that does not cover the body, once it has been checked
    (and ``timestamp`` with :func:`check_timestamp`). The token is kept as an
    HMAC keyed by the signing key: one width whatever the provider sends, and
    a token spent under a key is spent for every integration holding that key.
    """
    if integration.spend_token is None:
        raise RuntimeError("a signature with a single-use token is read without a store to spend it in")
    digest = hmac_digest(signing_key.encode(), b"single-use token:" + token.encode(), "sha256").hex()
    expires_at = datetime.fromtimestamp(float(timestamp) + TIMESTAMP_TOLERANCE_SECONDS, tz=UTC)
    if not await integration.spend_token(digest, expires_at):
        raise SignatureRefused(
            f"{name} was used already: a signature that does not cover the body is taken once, and a "
            "replayed request is refused"
        )


def hmac_digest(key: bytes, content: bytes, algorithm: str) -> bytes:
    return hmac.new(key, content, getattr(hashlib, algorithm)).digest()


def same(expected: bytes | str, given: bytes | str) -> bool:
    a = expected.encode() if isinstance(expected, str) else expected
    b = given.encode() if isinstance(given, str) else given
    return hmac.compare_digest(a, b)


def b64decode(value: str) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        return None


_FRACTION = re.compile(r"(\.\d{6})\d+")


def event_time(value: Any) -> datetime:
    """A provider's event time: seconds since 1970 or ISO 8601 (more than 6 fraction digits allowed)."""
    if isinstance(value, bool) or value is None or value == "":
        return utcnow()
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 10_000_000_000 else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return utcnow()
    if isinstance(value, str):
        try:
            return parse_iso(_FRACTION.sub(r"\1", value))
        except ValueError:
            try:
                return event_time(float(value))
            except ValueError:
                return utcnow()
    return utcnow()


def event_key(kind: str, *parts: Any) -> str:
    """An event's identity: the 64 hex digits of SHA-256 over ``kind`` and ``parts``.

    ``kind`` names what the parts are (``"sg_event_id"``, ``"digest"``...), so a
    provider's event id can never be taken for a digest of another event. The
    parts are JSON-encoded together (a missing one as null), so ``("a", "bc")``
    and ``("ab", "c")`` differ. A fixed width whatever the provider's ids.
    """
    content = json.dumps([kind, *parts], separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(content.encode()).hexdigest()


def text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list | bool):
        return None
    result = str(value).strip()
    return result or None
