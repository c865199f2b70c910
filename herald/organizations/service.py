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

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.crypto import SecretBox
from herald.kit.errors import NotFoundError
from herald.kit.ids import new_id
from herald.models import ApiKey, Environment, Integration, NotificationGroup, Organization
from herald.organizations.repository import OrganizationRepository

ENVIRONMENT_NAMES = ("Development", "Production")
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
    """A new organization with Development and Production, each with a key and a "General" group."""
    repository = OrganizationRepository(session)
    organization = Organization(name=name)
    repository.add(organization)
    await session.flush()
    environments = [await create_environment(session, organization.id, env_name, box) for env_name in ENVIRONMENT_NAMES]
    return BootstrapResult(organization, environments, created=True)


async def create_environment(
    session: AsyncSession, organization_id: str, name: str, box: SecretBox | None = None
) -> EnvironmentKeys:
    """One environment of an organization as bootstrap makes each: its public identifier,
    a "General" group, Novu's in-app integration and an API key (returned, shown once).

    The environments routes (herald/environments) make custom environments with it too.
    """
    repository = OrganizationRepository(session)
    environment = Environment(organization_id=organization_id, name=name, identifier=secrets.token_urlsafe(9))
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


async def create_key_for_environment(
    session: AsyncSession, environment_name: str, box: SecretBox | None = None
) -> tuple[Environment, str]:
    repository = OrganizationRepository(session)
    organization = await repository.first_organization()
    if organization is None:
        raise NotFoundError("No organization yet: run `herald bootstrap` first")
    environment = await repository.get_environment_by_name(organization.id, environment_name)
    if environment is None:
        known = ", ".join(env.name for env in await repository.list_environments(organization.id))
        raise NotFoundError(f"Environment {environment_name} not found (environments: {known})")
    return environment, await create_api_key(session, environment, box)


async def revoke_key(session: AsyncSession, key: str) -> bool:
    return await OrganizationRepository(session).revoke_key(hash_api_key(key))
