"""Encryption of credential secrets at rest, and their masked form in answers.

Only the credential fields that are secrets are encrypted: the set Novu
encrypts, plus ``webhookUrl`` (the address of a Slack, Discord, Teams or
Mattermost webhook is its credential: whoever has it can post). An
integration's ``configurations.inboundWebhookSigningKey`` is one too: it is
what a provider's delivery webhook is checked with (herald/deliveries/inbound.py),
so whoever reads it can forge "bounced" or "delivered" for the integration's
messages; Novu stores it in the clear. Values are
sealed with AES-256-GCM under a key derived from ``HERALD_SECRET_KEY``; the
``hsk1.`` prefix marks a sealed value so that reading twice, or reading a value
stored before encryption, is harmless.

Secrets are write-only: no answer carries one. Where an answer shows
credentials, each secret is replaced by its mask, a string again
(:func:`mask_secret`): a secret of at least ``MASK_REVEAL_MIN_LENGTH`` (24)
characters keeps its first 3 and last 4 characters around ``****``
(``SG.****ab12``), enough to tell two keys apart while at least 17 characters
stay hidden; a shorter one is ``****`` whole. A secret of another environment
than the caller's is always ``****`` whole. A client that sends a mask back
(an update that echoes what it read) keeps the stored secret
(:meth:`SecretBox.seal_credentials` with ``stored``); any other value replaces it.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SECRET_CREDENTIAL_FIELDS = frozenset(
    {"apiKey", "apiToken", "secretKey", "token", "password", "serviceAccount", "webhookUrl"}
)
# An integration's configurations that are secrets: the key its providers' webhooks are checked with.
SECRET_CONFIGURATION_FIELDS = frozenset({"inboundWebhookSigningKey"})
_PREFIX = "hsk1."
MASK = "****"
MASK_REVEAL_MIN_LENGTH = 24


def mask_secret(value: str, *, reveal_edges: bool = True) -> str:
    """The mask of a secret: ``abc****wxyz`` when long enough and ``reveal_edges``, else ``****``."""
    if reveal_edges and len(value) >= MASK_REVEAL_MIN_LENGTH:
        return f"{value[:3]}{MASK}{value[-4:]}"
    return MASK


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret of ``secrets`` (and a URL secret's path) replaced by its mask.

    For messages built from what a provider answered, which may echo a key or
    the webhook address it was called at. Secrets under 8 characters are left
    alone: replacing them would garble the text and reveal which words they are.
    """
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) < 8:
            continue
        text = text.replace(secret, mask_secret(secret))
        scheme, _, rest = secret.partition("://")
        path = rest[rest.find("/") :] if scheme and "/" in rest else ""
        if len(path) >= 8:
            text = text.replace(path, f"/{MASK}")
    return text


def is_secret(key: str, value: Any, fields: frozenset[str] = SECRET_CREDENTIAL_FIELDS) -> bool:
    return key in fields and isinstance(value, str)


class SecretKeyMismatch(ValueError):
    """A sealed value that this key cannot open: it was sealed under another HERALD_SECRET_KEY."""


class SecretBox:
    """Seals and opens strings with one key."""

    def __init__(self, secret_key: str) -> None:
        self._aead = AESGCM(hashlib.sha256(secret_key.encode()).digest())

    def seal(self, value: str) -> str:
        if value.startswith(_PREFIX):
            return value
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, value.encode(), None)
        return _PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, value: str) -> str:
        if not value.startswith(_PREFIX):
            return value
        raw = base64.urlsafe_b64decode(value[len(_PREFIX) :])
        try:
            return self._aead.decrypt(raw[:12], raw[12:], None).decode()
        except InvalidTag as exc:
            raise SecretKeyMismatch(
                "an integration secret cannot be decrypted: HERALD_SECRET_KEY differs from "
                "the key it was stored with"
            ) from exc

    def seal_credentials(
        self, credentials: Mapping[str, Any] | None, stored: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``credentials`` with their secrets sealed.

        A secret given as the mask of the one in ``stored`` (the credentials
        being replaced, as stored) keeps the stored value: the client sent back
        what it was shown.
        """
        return self._seal(credentials, stored, SECRET_CREDENTIAL_FIELDS)

    def seal_configurations(
        self, configurations: Mapping[str, Any] | None, stored: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """An integration's ``configurations`` with their secrets sealed, as :meth:`seal_credentials`.

        ``None`` stays ``None`` (an integration made without configurations).
        """
        if configurations is None:
            return None
        return self._seal(configurations, stored, SECRET_CONFIGURATION_FIELDS)

    def _seal(
        self, values: Mapping[str, Any] | None, stored: Mapping[str, Any] | None, fields: frozenset[str]
    ) -> dict[str, Any]:
        stored = stored or {}
        sealed: dict[str, Any] = {}
        for key, value in (values or {}).items():
            if is_secret(key, value, fields):
                kept = stored.get(key)
                if isinstance(kept, str) and MASK in value and value == self._mask_or_none(kept):
                    sealed[key] = kept
                else:
                    sealed[key] = self.seal(value)
            else:
                sealed[key] = value
        return sealed

    def _mask_or_none(self, value: str) -> str | None:
        try:
            return self.mask(value)
        except SecretKeyMismatch:
            # Never shown (answers refuse to show what cannot be opened), so not echoed back either.
            return None

    def mask(self, value: str, *, reveal_edges: bool = True) -> str:
        """The mask of a value as stored (sealed or not)."""
        if not reveal_edges:
            return MASK
        return mask_secret(self.open(value))

    def mask_credentials(self, credentials: Mapping[str, Any] | None, *, reveal_edges: bool = True) -> dict[str, Any]:
        """Credentials as an answer shows them: every secret masked, the rest as they are."""
        return self._mask(credentials, SECRET_CREDENTIAL_FIELDS, reveal_edges=reveal_edges)

    def mask_configurations(
        self, configurations: Mapping[str, Any] | None, *, reveal_edges: bool = True
    ) -> dict[str, Any] | None:
        """An integration's configurations as an answer shows them, as :meth:`mask_credentials`."""
        if configurations is None:
            return None
        return self._mask(configurations, SECRET_CONFIGURATION_FIELDS, reveal_edges=reveal_edges)

    def _mask(self, values: Mapping[str, Any] | None, fields: frozenset[str], *, reveal_edges: bool) -> dict[str, Any]:
        return {
            key: self.mask(value, reveal_edges=reveal_edges) if is_secret(key, value, fields) else value
            for key, value in (values or {}).items()
        }

    def open_credentials(self, credentials: Mapping[str, Any] | None) -> dict[str, Any]:
        return self._open(credentials, SECRET_CREDENTIAL_FIELDS)

    def open_configurations(self, configurations: Mapping[str, Any] | None) -> dict[str, Any]:
        return self._open(configurations, SECRET_CONFIGURATION_FIELDS)

    def _open(self, values: Mapping[str, Any] | None, fields: frozenset[str]) -> dict[str, Any]:
        return {key: self.open(value) if is_secret(key, value, fields) else value for key, value in (values or {}).items()}
