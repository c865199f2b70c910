"""An OpenID Connect relying party: the identity provider's discovery document and keys, the code exchange, the ID token.

The authorization code flow with PKCE (S256), state and nonce; the state
and what goes with it are kept by herald/members/sso.py. Every request to the
identity provider (discovery, keys, token) goes through the outbound policy
(herald/kit/outbound.py), bounded in time and size; an identity provider on
the private network is allowed with ``HERALD_OUTBOUND_ALLOW``.

The ID token is checked as OpenID Connect Core 3.1.3.7 says: signed by a key
of the provider's JWKS with an asymmetric algorithm (never ``none`` nor a
shared secret), ``iss`` the discovery document's issuer, ``aud`` holding the
client id (and ``azp`` the client id when there are other audiences),
``exp`` not past, and ``nonce`` the sign-in's.

A failure raises :class:`SsoError` with a sentence for the person signing in
and the audit log; it never carries a token, a code or the client secret.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from authlib.common.security import generate_token
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.errors import ExpiredTokenError, JoseError
from joserfc.jwk import KeySet

from herald import __version__
from herald.kit.outbound import OutboundPolicy, OutboundRefused

# Algorithms an ID token may be signed with: the provider's public keys, never a shared secret.
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
TIMEOUT = 10.0
# A discovery document, a key set or a token answer is a few kilobytes; more is not one.
MAX_ANSWER_BYTES = 256 * 1024
# The discovery document and keys are asked for again after this long (a key rotation shows up sooner:
# a token signed by a key not in the set refreshes the set once).
CACHE_SECONDS = 3600.0
# Clocks of Herald and the identity provider may differ by this much.
LEEWAY_SECONDS = 60
SCOPES = "openid email profile"


class SsoError(Exception):
    """Single sign-on did not sign someone in: ``str(exc)`` says why, in a sentence that names no secret."""


@dataclass
class _Cached:
    value: Any = None
    at: float = 0.0

    def fresh(self) -> bool:
        return self.value is not None and time.monotonic() - self.at < CACHE_SECONDS


@dataclass
class OidcClient:
    """One identity provider, as HERALD_OIDC_* name it; one per API process (it caches the provider's documents)."""

    issuer: str
    client_id: str
    client_secret: str = field(default="", repr=False)
    outbound: OutboundPolicy = field(default_factory=OutboundPolicy)
    _metadata: _Cached = field(default_factory=_Cached)
    _keys: _Cached = field(default_factory=_Cached)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    def _client(self) -> httpx.AsyncClient:
        from herald.providers.http import OutboundTransport

        return httpx.AsyncClient(
            transport=OutboundTransport(self.outbound, http2=False),
            timeout=TIMEOUT,
            follow_redirects=False,
            trust_env=False,
            headers={"user-agent": f"herald/{__version__}", "accept": "application/json"},
        )

    async def _json(self, what: str, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        """The JSON object at ``url``; SsoError naming ``what`` when there is no such answer."""
        try:
            async with asyncio.timeout(TIMEOUT), self._client() as client, client.stream(method, url, **kwargs) as response:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        raise SsoError(f"The identity provider's {what} is larger than {MAX_ANSWER_BYTES // 1024} KB")
        except OutboundRefused as exc:
            raise SsoError(f"Herald may not connect to the identity provider: {exc}") from None
        except (TimeoutError, httpx.HTTPError) as exc:
            raise SsoError(f"The identity provider did not answer for its {what} ({type(exc).__name__})") from None
        try:
            document = json.loads(bytes(body))
        except ValueError:
            document = None
        if not response.is_success:
            error = document.get("error") if isinstance(document, dict) else None
            said = f": {str(error)[:100]}" if error else ""
            raise SsoError(f"The identity provider refused the {what} (HTTP {response.status_code}{said})")
        if not isinstance(document, dict):
            raise SsoError(f"The identity provider's {what} is not a JSON object")
        return document

    async def metadata(self) -> dict[str, Any]:
        """The discovery document, checked: its issuer is HERALD_OIDC_ISSUER and its endpoints are URLs."""
        if self._metadata.fresh():
            return self._metadata.value
        async with self._lock:
            if self._metadata.fresh():
                return self._metadata.value
            document = await self._json("discovery document", "GET", self.discovery_url)
            if str(document.get("issuer", "")).rstrip("/") != self.issuer.rstrip("/"):
                raise SsoError("The identity provider's discovery document names another issuer than HERALD_OIDC_ISSUER")
            secure = urlsplit(self.issuer).scheme == "https"
            for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                value = document.get(name)
                parts = urlsplit(value) if isinstance(value, str) else None
                if parts is None or parts.scheme not in ("https", "http") or (secure and parts.scheme != "https") or not parts.hostname:
                    raise SsoError(f"The identity provider's discovery document has no usable {name}")
            self._metadata = _Cached(document, time.monotonic())
            return document

    async def _key_set(self, refresh: bool = False) -> KeySet:
        if not refresh and self._keys.fresh():
            return self._keys.value
        document = await self._json("signing keys", "GET", (await self.metadata())["jwks_uri"])
        try:
            keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise SsoError(f"The identity provider's signing keys cannot be read ({type(exc).__name__})") from None
        self._keys = _Cached(keys, time.monotonic())
        return keys

    async def authorization_url(self, *, redirect_uri: str, state: str, nonce: str, code_verifier: str) -> str:
        """Where to send the browser to sign in at the identity provider."""
        endpoint = (await self.metadata())["authorization_endpoint"]
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": redirect_uri,
                "scope": SCOPES,
                "state": state,
                "nonce": nonce,
                "code_challenge": create_s256_code_challenge(code_verifier),
                "code_challenge_method": "S256",
            }
        )
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"

    async def exchange(self, *, code: str, redirect_uri: str, code_verifier: str, nonce: str) -> dict[str, Any]:
        """Trade the code for tokens and return the ID token's claims, verified."""
        metadata = await self.metadata()
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri, "code_verifier": code_verifier}
        methods = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        auth: httpx.BasicAuth | None = None
        if not self.client_secret:
            form["client_id"] = self.client_id
        elif "client_secret_basic" in methods or "client_secret_post" not in methods:
            auth = httpx.BasicAuth(self.client_id, self.client_secret)
        else:
            form.update(client_id=self.client_id, client_secret=self.client_secret)
        answer = await self._json("token", "POST", metadata["token_endpoint"], data=form, auth=auth)
        id_token = answer.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise SsoError("The identity provider's token answer has no ID token")
        return await self.verify(id_token, nonce=nonce)

    async def verify(self, id_token: str, *, nonce: str) -> dict[str, Any]:
        """The ID token's claims when it is the provider's, for this client and this sign-in; SsoError otherwise."""
        metadata = await self.metadata()
        try:
            token = await self._decode(id_token)
        except SsoError:
            raise
        except (JoseError, ValueError, TypeError) as exc:
            raise SsoError(f"The ID token's signature is not the identity provider's ({type(exc).__name__})") from None
        claims = token.claims
        registry = jwt.JWTClaimsRegistry(
            leeway=LEEWAY_SECONDS,
            iss={"essential": True, "value": metadata["issuer"]},
            aud={"essential": True, "value": self.client_id},
            sub={"essential": True},
            exp={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise SsoError("The ID token has expired") from None
        except JoseError as exc:
            claim = str(getattr(exc, "claim", "") or "")[:50]
            raise SsoError(
                f"The ID token's {claim} claim is not right for this sign-in" if claim else "The ID token's claims are not right"
            ) from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.client_id:
            raise SsoError("The ID token's azp claim is not right for this sign-in")
        if not isinstance(claims.get("sub"), str) or not 0 < len(claims["sub"]) <= 255:
            raise SsoError("The ID token's sub claim is not right for this sign-in")
        return claims

    async def _decode(self, id_token: str) -> Any:
        if len(id_token) > 16 * 1024:
            raise SsoError("The ID token is too large")
        keys = await self._key_set()
        try:
            return jwt.decode(id_token, keys, algorithms=ALGORITHMS)
        except (JoseError, ValueError):
            # A key the cached set does not have yet (the provider rotated its keys): ask once more.
            return jwt.decode(id_token, await self._key_set(refresh=True), algorithms=ALGORITHMS)


def new_secret() -> str:
    """A state, nonce or PKCE verifier: 48 characters from the unreserved set (RFC 7636 wants 43 to 128)."""
    return generate_token(48)
