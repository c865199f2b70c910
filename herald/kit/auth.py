"""API-key authentication: ``Authorization: ApiKey <key>``; subscriber tokens for the inbox routes.

The key fixes the environment and organization of every query the request
makes. Resolved keys are cached for ``api_key_cache_seconds`` (every request
needs one, and a database round trip per request is the largest fixed cost of
the trigger path). Keys are revoked in the store, by whichever process (``herald
keys revoke`` is one of its own), so every API process asks the store about once
a second for the keys revoked since it last looked and drops them from its
cache: a revoked key stops working everywhere within about a second.

A key the store does not know is remembered as unknown for
``UNKNOWN_KEY_SECONDS`` (at most ``MAX_UNKNOWN_KEYS`` of them, the oldest
forgotten first), and callers asking about a key whose look-up is under way
wait for that one: a flood of requests with a wrong key costs the store one
query every few seconds, not one a request. A key made right after it was
tried (``herald keys create`` in another process) works here once that time
has passed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Annotated, Any

import jwt
from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.kit.errors import UnauthorizedError
from herald.organizations.repository import OrganizationRepository
from herald.organizations.service import hash_api_key

logger = logging.getLogger("herald.auth")

SCHEME = "apikey"
# Each look for revoked keys reaches back this far before the latest revocation
# it has seen: a revocation committed late, or stamped by a process whose clock
# is a little behind, is still found. Dropping a key twice is harmless.
REVOCATION_OVERLAP = timedelta(seconds=60)
_BEFORE_ANY_REVOCATION = datetime(1970, 1, 1, tzinfo=UTC)
# How long a key the store does not know is answered 401 without asking it again,
# and how many such keys are remembered (a flood of random keys grows nothing past it).
UNKNOWN_KEY_SECONDS = 2.0
MAX_UNKNOWN_KEYS = 10_000


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: one environment of one organization."""

    environment_id: str
    organization_id: str
    api_key_id: str


class ApiKeyResolver:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], ttl_seconds: float) -> None:
        self._sessionmaker = sessionmaker
        self._ttl = ttl_seconds
        self._cache: dict[str, tuple[Principal, float]] = {}
        # Keys the store did not know, by hash: until when to take its word for it (oldest first).
        self._unknown: dict[str, float] = {}
        # Look-ups under way, by hash: concurrent requests with one key wait for the same one.
        self._pending: dict[str, asyncio.Future[Principal | None]] = {}
        # The latest revoked_at seen in the store (None until the first look).
        self._latest_revocation: datetime | None = None
        # Set when a key is cached: the watch for revocations sleeps until then while none is (an idle process).
        self._cached = asyncio.Event()

    async def resolve(self, key: str) -> Principal | None:
        key_hash = hash_api_key(key)
        cached = self._cache.get(key_hash)
        now = time.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        unknown_until = self._unknown.get(key_hash)
        if unknown_until is not None:
            if unknown_until > now:
                return None
            del self._unknown[key_hash]
        pending = self._pending.get(key_hash)
        if pending is None:
            pending = asyncio.ensure_future(self._look_up(key_hash))
            self._pending[key_hash] = pending
            pending.add_done_callback(partial(self._looked_up, key_hash))
        # Shielded: a caller that goes away does not cancel the others' look-up.
        return await asyncio.shield(pending)

    async def _look_up(self, key_hash: str) -> Principal | None:
        async with self._sessionmaker() as session:
            api_key = await OrganizationRepository(session).find_active_key(key_hash)
        now = time.monotonic()
        if api_key is None:
            self._cache.pop(key_hash, None)
            if len(self._unknown) >= MAX_UNKNOWN_KEYS:
                del self._unknown[next(iter(self._unknown))]
            self._unknown[key_hash] = now + UNKNOWN_KEY_SECONDS
            return None
        principal = Principal(api_key.environment_id, api_key.organization_id, api_key.id)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key_hash] = (principal, now + self._ttl)
        self._cached.set()
        return principal

    def _any_live_key(self) -> bool:
        """Whether a cached key is still used without a look (within its TTL); the expired ones are dropped."""
        now = time.monotonic()
        for key_hash in [key_hash for key_hash, (_, until) in self._cache.items() if until <= now]:
            del self._cache[key_hash]
        if not self._cache:
            self._cached.clear()
        return bool(self._cache)

    def _looked_up(self, key_hash: str, future: asyncio.Future[Principal | None]) -> None:
        self._pending.pop(key_hash, None)
        if not future.cancelled():
            future.exception()  # retrieved: every waiter may have gone (it is raised to those still there)

    async def drop_revoked(self) -> int:
        """Drop the keys revoked since the last look from the cache; returns how many were cached.

        The look is by the store's ``revoked_at`` values, not this process's
        clock, so clocks that differ between machines do not hide a revocation.
        """
        async with self._sessionmaker() as session:
            repository = OrganizationRepository(session)
            if self._latest_revocation is None:
                self._latest_revocation = await repository.latest_revocation() or _BEFORE_ANY_REVOCATION
            revoked = await repository.revocations_since(self._latest_revocation - REVOCATION_OVERLAP)
        dropped = 0
        for key_hash, revoked_at in revoked:
            if self._cache.pop(key_hash, None) is not None:
                dropped += 1
            self._latest_revocation = max(self._latest_revocation, revoked_at)
        return dropped

    def forget_environment(self, environment_id: str) -> None:
        """Drop this process's cached keys of an environment being deleted (others expire after the TTL)."""
        for key_hash, (principal, _) in list(self._cache.items()):
            if principal.environment_id == environment_id:
                self._cache.pop(key_hash, None)

    async def watch_revocations(self, stop: asyncio.Event, interval: float) -> None:
        """Run :meth:`drop_revoked` every ``interval`` seconds until ``stop`` is set.

        While the store cannot be reached the cache still expires entries after
        its TTL; the failure is logged once, not every second. While no key is
        cached (an idle process) there is nothing to drop: it waits for one, and
        asks the store nothing meanwhile (a key read then is read as it is).
        """
        failing = False
        while not stop.is_set():
            if not self._any_live_key():
                stopped = asyncio.ensure_future(stop.wait())
                cached = asyncio.ensure_future(self._cached.wait())
                try:
                    await asyncio.wait({stopped, cached}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in (stopped, cached):
                        waiter.cancel()
                continue
            try:
                dropped = await self.drop_revoked()
            except Exception as exc:
                if not failing:
                    logger.warning(
                        "cannot look for revoked API keys (%s: %s); cached keys expire after %g s meanwhile",
                        type(exc).__name__,
                        exc,
                        self._ttl,
                    )
                failing = True
            else:
                if failing:
                    logger.info("looking for revoked API keys again")
                failing = False
                if dropped:
                    logger.info("dropped %d revoked API key(s) from the cache", dropped)
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except TimeoutError:
                pass


# What a scheme's name looks like (Bearer, Basic, Token): one shown back is no secret.
_SCHEME_NAME = re.compile(r"[A-Za-z][A-Za-z-]{0,15}")


def scheme_refused(scheme: str) -> UnauthorizedError:
    """The 401 for a header whose first word is not the expected scheme.

    A header of a key alone has the key as its first word: it is never shown back
    (it would land in the caller's logs and error reports); a scheme's name is.
    """
    if _SCHEME_NAME.fullmatch(scheme):
        return UnauthorizedError(f'Invalid authentication scheme: "{scheme}"')
    return UnauthorizedError('Invalid authentication scheme: the header must read "ApiKey <API_KEY>"')


def parse_authorization(header: str | None) -> str:
    """The key from the header, or the 401 a caller needs to fix it."""
    if header is None or not header.strip():
        raise UnauthorizedError("Missing authorization header")
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != SCHEME:
        raise scheme_refused(scheme)
    key = credentials.strip()
    if not key:
        raise UnauthorizedError("API Key is empty")
    return key


# Declares the scheme in the OpenAPI document (the "Authorize" button of /docs);
# the header itself is parsed below, to answer with Novu's messages.
api_key_header = APIKeyHeader(
    name="Authorization",
    scheme_name="ApiKey",
    description="`ApiKey <key>`: the key fixes the environment and organization",
    auto_error=False,
)


async def authenticate(request: Request, _header: Annotated[str | None, Security(api_key_header)] = None) -> Principal:
    """The caller, from the ``Authorization`` header (a dependency, or called by a route itself)."""
    cached = getattr(request.state, "principal", None)
    if cached is not None:
        return cached
    key = parse_authorization(request.headers.get("authorization"))
    resolver: ApiKeyResolver = request.app.state.api_keys
    principal = await resolver.resolve(key)
    if principal is None:
        raise UnauthorizedError("API Key not found")
    request.state.principal = principal
    return principal


PrincipalDep = Annotated[Principal, Depends(authenticate)]

# For routes that call authenticate() themselves (the trigger route skips
# FastAPI's dependency solving): declares the same security in the document.
API_KEY_SECURITY: dict[str, Any] = {"security": [{api_key_header.scheme_name: []}]}


# -- subscriber tokens: the Inbox API (herald/inbox) -------------------------------------------
#
# ``POST /v1/inbox/session`` answers with a JWT that names one subscriber of one
# environment; every other inbox route takes it as ``Authorization: Bearer
# <token>`` and sees that subscriber's data only. The claims are Novu's
# (``_id``, ``subscriberId``, ``environmentId``, ``organizationId``; audience
# ``widget_user``, issuer ``novu_api``). HS256, keyed by a key derived from
# HERALD_SECRET_KEY for this use alone, so the token key is never the key that
# seals secrets.

SUBSCRIBER_TOKEN_AUDIENCE = "widget_user"
SUBSCRIBER_TOKEN_ISSUER = "novu_api"
_TOKEN_ALGORITHM = "HS256"


@dataclass(frozen=True, slots=True)
class SubscriberPrincipal:
    """Who is calling an inbox route: one subscriber of one environment."""

    environment_id: str
    organization_id: str
    # The subscriber's internal id (messages.subscriber_id) and the caller's own id for it.
    subscriber_id: str
    external_subscriber_id: str


def subscriber_token_key(secret_key: str) -> bytes:
    return hmac.new(secret_key.encode(), b"herald inbox subscriber token v1", hashlib.sha256).digest()


def issue_subscriber_token(principal: SubscriberPrincipal, secret_key: str, ttl_seconds: int) -> str:
    now = int(time.time())
    claims = {
        "_id": principal.subscriber_id,
        "subscriberId": principal.external_subscriber_id,
        "environmentId": principal.environment_id,
        "organizationId": principal.organization_id,
        "aud": SUBSCRIBER_TOKEN_AUDIENCE,
        "iss": SUBSCRIBER_TOKEN_ISSUER,
        "iat": now,
        "exp": now + ttl_seconds,
    }
    return jwt.encode(claims, subscriber_token_key(secret_key), algorithm=_TOKEN_ALGORITHM)


def verify_subscriber_token(token: str, secret_key: str) -> SubscriberPrincipal:
    """The subscriber a token names, or 401 (bad signature, expired, another audience or issuer)."""
    try:
        claims = jwt.decode(
            token,
            subscriber_token_key(secret_key),
            algorithms=[_TOKEN_ALGORITHM],
            audience=SUBSCRIBER_TOKEN_AUDIENCE,
            issuer=SUBSCRIBER_TOKEN_ISSUER,
            options={"require": ["exp", "aud", "iss"]},
        )
    except jwt.ExpiredSignatureError:
        raise UnauthorizedError("Token has expired") from None
    except jwt.PyJWTError:
        raise UnauthorizedError("Invalid token") from None
    fields = ("_id", "subscriberId", "environmentId", "organizationId")
    if not all(isinstance(claims.get(name), str) and claims[name] for name in fields):
        raise UnauthorizedError("Invalid token")
    return SubscriberPrincipal(
        environment_id=claims["environmentId"],
        organization_id=claims["organizationId"],
        subscriber_id=claims["_id"],
        external_subscriber_id=claims["subscriberId"],
    )


bearer_header = APIKeyHeader(
    name="Authorization",
    scheme_name="SubscriberToken",
    description="`Bearer <token>`: the token of POST /v1/inbox/session fixes the subscriber",
    auto_error=False,
)


async def authenticate_subscriber(
    request: Request, _header: Annotated[str | None, Security(bearer_header)] = None
) -> SubscriberPrincipal:
    # Verified by the rate limit (herald.kit.limits), which charged its environment.
    verified = request.scope.get("state", {}).get("subscriber")
    if verified is not None:
        return verified  # type: ignore[no-any-return]
    header = request.headers.get("authorization")
    if header is None or not header.strip():
        raise UnauthorizedError("Missing authorization header")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise scheme_refused(scheme)
    return verify_subscriber_token(token.strip(), request.app.state.settings.secret_key)


SubscriberPrincipalDep = Annotated[SubscriberPrincipal, Depends(authenticate_subscriber)]
