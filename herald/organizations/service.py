"""Bootstrap and API keys.

A key is shown once, when it is made; only its sha256 is stored, so a leaked
database does not leak working keys.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.errors import NotFoundError
from herald.models import ApiKey, Environment, NotificationGroup, Organization
from herald.organizations.repository import OrganizationRepository

ENVIRONMENT_NAMES = ("Development", "Production")
DEFAULT_GROUP_NAME = "General"


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


async def create_api_key(session: AsyncSession, environment: Environment) -> str:
    key = generate_api_key()
    OrganizationRepository(session).add(
        ApiKey(environment_id=environment.id, organization_id=environment.organization_id, key_hash=hash_api_key(key))
    )
    await session.flush()
    return key


async def create_organization(session: AsyncSession, name: str = "Herald") -> BootstrapResult:
    """A new organization with Development and Production, each with a key and a "General" group."""
    repository = OrganizationRepository(session)
    organization = Organization(name=name)
    repository.add(organization)
    await session.flush()
    environments = []
    for env_name in ENVIRONMENT_NAMES:
        environment = Environment(
            organization_id=organization.id, name=env_name, identifier=secrets.token_urlsafe(9)
        )
        repository.add(environment)
        await session.flush()
        repository.add(
            NotificationGroup(
                environment_id=environment.id, organization_id=organization.id, name=DEFAULT_GROUP_NAME
            )
        )
        environments.append(EnvironmentKeys(environment, await create_api_key(session, environment)))
    return BootstrapResult(organization, environments, created=True)


async def bootstrap(session: AsyncSession) -> BootstrapResult:
    """Create the organization once; later calls report it without new keys.

    Safe to run from several processes at once (the README starts it beside
    several API processes): the second waits for the first and finds its organization.
    """
    repository = OrganizationRepository(session)
    await repository.lock_bootstrap()
    organization = await repository.first_organization()
    if organization is None:
        return await create_organization(session)
    environments = [EnvironmentKeys(env, None) for env in await repository.list_environments(organization.id)]
    return BootstrapResult(organization, environments, created=False)


async def create_key_for_environment(session: AsyncSession, environment_name: str) -> tuple[Environment, str]:
    repository = OrganizationRepository(session)
    organization = await repository.first_organization()
    if organization is None:
        raise NotFoundError("No organization yet: run `herald bootstrap` first")
    environment = await repository.get_environment_by_name(organization.id, environment_name)
    if environment is None:
        known = ", ".join(env.name for env in await repository.list_environments(organization.id))
        raise NotFoundError(f"Environment {environment_name} not found (environments: {known})")
    return environment, await create_api_key(session, environment)


async def revoke_key(session: AsyncSession, key: str) -> bool:
    return await OrganizationRepository(session).revoke_key(hash_api_key(key))
