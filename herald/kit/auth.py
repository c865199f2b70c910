"""API-key authentication: ``Authorization: ApiKey <key>``.

The key fixes the environment and organization of every query the request
makes. Resolved keys are cached for a short time (every request needs one, and
a database round trip per request is the largest fixed cost of the trigger
path); revoking a key through this process drops it from the cache at once,
other processes stop trusting it within ``api_key_cache_seconds``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.kit.errors import UnauthorizedError
from herald.organizations.repository import OrganizationRepository
from herald.organizations.service import hash_api_key

SCHEME = "apikey"


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

    async def resolve(self, key: str) -> Principal | None:
        key_hash = hash_api_key(key)
        cached = self._cache.get(key_hash)
        now = time.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        async with self._sessionmaker() as session:
            api_key = await OrganizationRepository(session).find_active_key(key_hash)
        if api_key is None:
            self._cache.pop(key_hash, None)
            return None
        principal = Principal(api_key.environment_id, api_key.organization_id, api_key.id)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key_hash] = (principal, now + self._ttl)
        return principal

    def forget(self, key: str) -> None:
        self._cache.pop(hash_api_key(key), None)


def parse_authorization(header: str | None) -> str:
    """The key from the header, or the 401 a caller needs to fix it."""
    if header is None or not header.strip():
        raise UnauthorizedError("Missing authorization header")
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != SCHEME:
        raise UnauthorizedError(f'Invalid authentication scheme: "{scheme}"')
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
