"""Bootstrap and API keys.

A key is shown once, when it is made. Its sha256 finds it; the key itself is
stored only sealed under HERALD_SECRET_KEY (``box``), so a leaked database
without that key does not leak working keys. The sealed key checks an inbox
session's ``subscriberHash`` (herald/inbox); a key made without a box (or
before migration 0009) cannot.

Every environment has Novu's in-app integration (providerId ``novu``, channel
in_app), made with it as Novu does: the Inbox finds the environment through
it, and its ``credentials.hmac`` asks inbox sessions for a ``subscriberHash``.
Bootstrap makes it for environments that have none (made before it existed).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.crypto import MASK, SecretBox, SecretKeyMismatch
from herald.kit.errors import BadRequestError, NotFoundError
from herald.kit.ids import new_id
from herald.models import ApiKey, Environment, Integration, NotificationGroup, Organization
from herald.organizations.repository import OrganizationRepository

ENVIRONMENT_NAMES = ("Development", "Production")
# Made protected: only its own API keys may change it (herald/environments/protection.py).
PROTECTED_ENVIRONMENT = "Production"
DEFAULT_GROUP_NAME = "General"
IN_APP_PROVIDER_ID = "novu"
IN_APP_INTEGRATION_NAME = "Novu Inbox"


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def generate_api_key() -> str:
    return secrets.token_hex(16)


@dataclass
class EnvironmentKeys:
    environment: Environment
    api_key: str | None  # only set when the key was created by this call


@dataclass
class BootstrapResult:
    organization: Organization
    environments: list[EnvironmentKeys]
    created: bool


async def create_api_key(session: AsyncSession, environment: Environment, box: SecretBox | None = None) -> str:
    key = generate_api_key()
    OrganizationRepository(session).add(
        ApiKey(
            environment_id=environment.id,
            organization_id=environment.organization_id,
            key_hash=hash_api_key(key),
            sealed_key=box.seal(key) if box is not None else None,
        )
    )
    await session.flush()
    return key


def in_app_integration(environment: Environment) -> Integration:
    """Novu's in-app integration of an environment: active, no credentials (``hmac`` off)."""
    return Integration(
        environment_id=environment.id,
        organization_id=environment.organization_id,
        provider_id=IN_APP_PROVIDER_ID,
        channel="in_app",
        name=IN_APP_INTEGRATION_NAME,
        identifier=f"novu-inbox-{new_id()[-6:]}",
        credentials={},
        active=True,
        primary=False,
        priority=0,
        deleted=False,
    )


async def ensure_in_app_integrations(session: AsyncSession, environments: list[Environment]) -> int:
    """Make the in-app integration of each environment that has none; how many were made."""
    repository = OrganizationRepository(session)
    made = 0
    for environment in environments:
        if not await repository.has_in_app_integration(environment.id, IN_APP_PROVIDER_ID):
            repository.add(in_app_integration(environment))
            made += 1
    await session.flush()
    return made


async def create_organization(session: AsyncSession, name: str = "Herald", box: SecretBox | None = None) -> BootstrapResult:
    """A new organization with Development and Production (protected), each with a key and a "General" group."""
    repository = OrganizationRepository(session)
    organization = Organization(name=name)
    repository.add(organization)
    await session.flush()
    environments = [
        await create_environment(session, organization.id, env_name, box, protected=env_name == PROTECTED_ENVIRONMENT)
        for env_name in ENVIRONMENT_NAMES
    ]
    return BootstrapResult(organization, environments, created=True)


async def create_environment(
    session: AsyncSession, organization_id: str, name: str, box: SecretBox | None = None, *, protected: bool = False
) -> EnvironmentKeys:
    """One environment of an organization as bootstrap makes each: its public identifier,
    a "General" group, Novu's in-app integration and an API key (returned, shown once).

    The environments routes (herald/environments) make custom environments with it too.
    """
    repository = OrganizationRepository(session)
    environment = Environment(
        organization_id=organization_id, name=name, identifier=secrets.token_urlsafe(9), protected=protected
    )
    repository.add(environment)
    await session.flush()
    repository.add(
        NotificationGroup(environment_id=environment.id, organization_id=organization_id, name=DEFAULT_GROUP_NAME)
    )
    repository.add(in_app_integration(environment))
    return EnvironmentKeys(environment, await create_api_key(session, environment, box))


async def bootstrap(session: AsyncSession, box: SecretBox | None = None) -> BootstrapResult:
    """Create the organization once; later calls report it without new keys.

    Safe to run from several processes at once (the README starts it beside
    several API processes): the second waits for the first and finds its organization.
    """
    repository = OrganizationRepository(session)
    await repository.lock_bootstrap()
    organization = await repository.first_organization()
    if organization is None:
        return await create_organization(session, box=box)
    rows = await repository.list_environments(organization.id)
    await ensure_in_app_integrations(session, rows)
    environments = [EnvironmentKeys(env, None) for env in rows]
    return BootstrapResult(organization, environments, created=False)


async def _bootstrapped_organization(repository: OrganizationRepository) -> Organization:
    organization = await repository.first_organization()
    if organization is None:
        raise NotFoundError("No organization yet: run `herald bootstrap` first")
    return organization


async def _named_environment(session: AsyncSession, environment_name: str) -> Environment:
    """The bootstrapped organization's environment of that name (the operator's commands name it so)."""
    repository = OrganizationRepository(session)
    organization = await _bootstrapped_organization(repository)
    environment = await repository.get_environment_by_name(organization.id, environment_name)
    if environment is None:
        known = ", ".join(env.name for env in await repository.list_environments(organization.id))
        raise NotFoundError(f"Environment {environment_name} not found (environments: {known})")
    return environment


async def create_key_for_environment(
    session: AsyncSession, environment_name: str, box: SecretBox | None = None
) -> tuple[Environment, str]:
    environment = await _named_environment(session, environment_name)
    return environment, await create_api_key(session, environment, box)


async def set_protection(session: AsyncSession, environment_name: str, protected: bool) -> Environment:
    """``herald environments protect|unprotect NAME``: the operator, who holds the database, asks no key."""
    environment = await _named_environment(session, environment_name)
    environment.protected = protected
    await session.flush()
    return environment


@dataclass(frozen=True)
class KeyListing:
    """An API key as ``herald keys list`` shows it: never the key itself."""

    environment: str
    masked: str
    created_at: datetime
    revoked_at: datetime | None


async def list_organization_keys(session: AsyncSession, box: SecretBox) -> list[KeyListing]:
    """``herald keys list``: every key of the organization, masked (by its hash's start when it was stored unsealed)."""
    repository = OrganizationRepository(session)
    organization = await _bootstrapped_organization(repository)
    listed = []
    for key, environment in await repository.list_keys(organization.id):
        try:
            masked = box.mask(key.sealed_key) if key.sealed_key else f"(hash {key.key_hash[:8]})"
        except SecretKeyMismatch:
            masked = box.mask(key.sealed_key or "", reveal_edges=False)
        listed.append(KeyListing(environment, masked, key.created_at, key.revoked_at))
    return listed


async def revoke_key(session: AsyncSession, key: str) -> bool:
    return await OrganizationRepository(session).revoke_key(hash_api_key(key))


@dataclass(frozen=True)
class ShownKey:
    """An API key as the console lists it: its id, its mask, whether it can be revealed."""

    id: str
    masked: str
    revealable: bool
    created_at: datetime


async def list_keys(session: AsyncSession, box: SecretBox, environment_id: str) -> list[ShownKey]:
    """The environment's working keys, masked (``abc****wxyz``); a key made without a box shows ``****``."""
    shown = []
    for row in await OrganizationRepository(session).active_keys(environment_id):
        masked = box.mask(row.sealed_key) if row.sealed_key else MASK
        shown.append(ShownKey(id=row.id, masked=masked, revealable=row.sealed_key is not None, created_at=row.created_at))
    return shown


async def reveal_key(session: AsyncSession, box: SecretBox, environment_id: str, key_id: str) -> str:
    """An environment's working key in the clear (the caller records the reveal in the audit log)."""
    row = await OrganizationRepository(session).active_key(environment_id, key_id)
    if row is None:
        raise NotFoundError(f"API key {key_id} not found")
    if row.sealed_key is None:
        raise BadRequestError("This key was made before keys were stored sealed and cannot be shown: regenerate it")
    return box.open(row.sealed_key)


async def regenerate_key(session: AsyncSession, box: SecretBox, environment: Environment) -> tuple[int, str]:
    """Revoke every working key of ``environment`` and make a new one: (how many were revoked, the new key)."""
    revoked = await OrganizationRepository(session).revoke_environment_keys(environment.id)
    return revoked, await create_api_key(session, environment, box)
