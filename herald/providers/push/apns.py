"""Apple Push Notification service, HTTP/2 provider API with token (p8 key) authentication."""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any, ClassVar

import jwt

from herald.providers.base import ProviderError, PushMessage, PushProvider, SendResult
from herald.providers.http import error_text, excerpt, is_transient_status, json_object, send_raw

PRODUCTION_URL = "https://api.push.apple.com"
SANDBOX_URL = "https://api.sandbox.push.apple.com"
# Apple refuses provider tokens older than an hour and throttles ones renewed
# more often than every 20 minutes.
TOKEN_LIFETIME = 50 * 60

# Provider tokens by (key id, team id, key hash): (token, issued at).
_provider_tokens: dict[tuple[str, str, str], tuple[str, float]] = {}


class ApnsProvider(PushProvider):
    """Credentials (Novu's names): secretKey (the .p8 private key, PEM), apiKey (key id),
    projectName (team id), applicationId (bundle id, the apns-topic), secure (production; else sandbox).

    ``data`` goes beside ``aps`` at the top of the payload. ``overrides`` may
    carry ``type: "background"``, ``sound``, ``badge``, ``category``,
    ``threadId``, ``mutableContent``, ``contentAvailable``, ``aps`` (merged
    into aps), and the headers' ``priority``, ``expiration``, ``collapseId``.

    Its requests go over HTTP/2, which Apple requires (``send_raw(..., http2=True)``,
    see ``herald.providers.http``).
    """

    provider_id: ClassVar[str] = "apns"
    display_name: ClassVar[str] = "Apple Push Notification service"
    required_credentials: ClassVar[tuple[str, ...]] = ("secretKey", "apiKey", "projectName", "applicationId")
    optional_credentials: ClassVar[tuple[str, ...]] = ("secure", "baseUrl")

    async def send(self, message: PushMessage) -> SendResult:
        tokens = self.check_tokens(message)
        key = self.require("secretKey").replace("\\n", "\n")
        key_id = self.require("apiKey")
        team_id = self.require("projectName")
        bundle_id = self.require("applicationId")
        cache_key = (key_id, team_id, hashlib.sha256(key.encode()).hexdigest())
        provider_token = self._provider_token(cache_key, key)

        payload, headers = _notification(message, bundle_id)
        headers["authorization"] = f"bearer {provider_token}"
        base = self.base_url(PRODUCTION_URL if self.flag("secure") else SANDBOX_URL)
        outcomes = await asyncio.gather(
            *(self._send_one(f"{base}/3/device/{token}", payload, headers) for token in tokens)
        )
        if any(isinstance(outcome, ProviderError) and outcome.status_code == 403 for outcome in outcomes):
            # ExpiredProviderToken / InvalidProviderToken: mint afresh next time.
            _provider_tokens.pop(cache_key, None)
        return self.settle(list(zip(tokens, outcomes, strict=True)))

    async def _send_one(self, url: str, payload: dict[str, Any], headers: dict[str, str]) -> str | None | ProviderError:
        try:
            response = await send_raw(self.http, self.provider_id, "POST", url, json=payload, headers=headers, http2=True)
        except ProviderError as error:
            return error
        if response.is_success:
            apns_id: str | None = response.headers.get("apns-id")
            return apns_id
        reason = json_object(response).get("reason")
        reason = excerpt(str(reason)) if reason else error_text(response)
        return self.error(
            f"answered {response.status_code}: {reason}",
            # BadDeviceToken, Unregistered (410), topic and key problems are
            # permanent; TooManyRequests (429) and 5xx pass.
            transient=is_transient_status(response.status_code),
            status_code=response.status_code,
        )

    def _provider_token(self, cache_key: tuple[str, str, str], key: str) -> str:
        cached = _provider_tokens.get(cache_key)
        now = time.time()
        if cached and now - cached[1] < TOKEN_LIFETIME:
            return cached[0]
        key_id, team_id, _ = cache_key
        try:
            token = jwt.encode({"iss": team_id, "iat": int(now)}, key, algorithm="ES256", headers={"kid": key_id})
        except (ValueError, TypeError, jwt.PyJWTError) as exc:
            raise self.error(f"credential secretKey is not a usable .p8 key: {exc}", transient=False) from None
        _provider_tokens[cache_key] = (token, now)
        return token


def _notification(message: PushMessage, bundle_id: str) -> tuple[dict[str, Any], dict[str, str]]:
    overrides = message.overrides
    background = overrides.get("type") in ("background", "data")
    aps: dict[str, Any] = {}
    if background:
        aps["content-available"] = 1
    else:
        aps["alert"] = {"title": message.title, "body": message.content}
    for key, wire in (
        ("sound", "sound"),
        ("badge", "badge"),
        ("category", "category"),
        ("threadId", "thread-id"),
        ("mutableContent", "mutable-content"),
        ("contentAvailable", "content-available"),
    ):
        if overrides.get(key) is not None:
            value = overrides[key]
            aps[wire] = int(value) if isinstance(value, bool) else value
    if isinstance(overrides.get("aps"), dict):
        aps.update(overrides["aps"])
    payload = {key: value for key, value in message.data.items() if key != "aps"}
    payload["aps"] = aps

    headers = {
        "apns-topic": str(overrides.get("topic") or bundle_id),
        "apns-push-type": "background" if background else "alert",
        "apns-priority": str(overrides.get("priority") or (5 if background else 10)),
    }
    if overrides.get("expiration") is not None:
        headers["apns-expiration"] = str(overrides["expiration"])
    if overrides.get("collapseId"):
        headers["apns-collapse-id"] = str(overrides["collapseId"])
    return payload, headers
