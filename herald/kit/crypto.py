"""Encryption of integration secrets at rest.

Only the credential fields that are secrets are encrypted (the same set Novu
encrypts). Values are sealed with AES-256-GCM under a key derived from
``HERALD_SECRET_KEY``; the ``hsk1.`` prefix marks a sealed value so that
reading twice, or reading a value stored before encryption, is harmless.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SECRET_CREDENTIAL_FIELDS = frozenset(
    {"apiKey", "apiToken", "secretKey", "token", "password", "serviceAccount"}
)
_PREFIX = "hsk1."


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

    def seal_credentials(self, credentials: Mapping[str, Any] | None) -> dict[str, Any]:
        return {
            key: self.seal(value)
            if key in SECRET_CREDENTIAL_FIELDS and isinstance(value, str)
            else value
            for key, value in (credentials or {}).items()
        }

    def open_credentials(self, credentials: Mapping[str, Any] | None) -> dict[str, Any]:
        return {
            key: self.open(value)
            if key in SECRET_CREDENTIAL_FIELDS and isinstance(value, str)
            else value
            for key, value in (credentials or {}).items()
        }
