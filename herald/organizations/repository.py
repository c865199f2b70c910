from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.db import lock_for_transaction
from herald.kit.time import utcnow
from herald.models import ApiKey, Environment, Integration, NotificationGroup, Organization


class OrganizationRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def lock_bootstrap(self) -> None:
        """Concurrent bootstraps wait for each other until commit, so only the first creates."""
        await lock_for_transaction(self.session, "bootstrap")

    async def first_organization(self) -> Organization | None:
        result = await self.session.execute(select(Organization).order_by(Organization.created_at).limit(1))
        return result.scalar_one_or_none()

    async def list_environments(self, organization_id: str) -> list[Environment]:
        result = await self.session.execute(
            select(Environment).where(Environment.organization_id == organization_id).order_by(Environment.created_at)
        )
        return list(result.scalars())

    async def get_environment_by_name(self, organization_id: str, name: str) -> Environment | None:
        result = await self.session.execute(
            select(Environment).where(Environment.organization_id == organization_id, Environment.name == name)
        )
        return result.scalar_one_or_none()

    async def list_keys(self, organization_id: str) -> list[tuple[ApiKey, str]]:
        """The organization's keys, revoked ones included, each with its environment's name; oldest first."""
        result = await self.session.execute(
            select(ApiKey, Environment.name)
            .join(Environment, Environment.id == ApiKey.environment_id)
            .where(ApiKey.organization_id == organization_id)
            .order_by(Environment.created_at, ApiKey.created_at)
        )
        return [(key, name) for key, name in result.all()]

    async def find_active_key(self, key_hash: str) -> ApiKey | None:
        result = await self.session.execute(
            select(ApiKey).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        )
        return result.scalar_one_or_none()

    async def revoke_key(self, key_hash: str) -> bool:
        result = await self.session.execute(
            update(ApiKey)
            .where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def latest_revocation(self) -> datetime | None:
        result = await self.session.execute(select(func.max(ApiKey.revoked_at)))
        return result.scalar_one_or_none()

    async def revocations_since(self, since: datetime) -> list[tuple[str, datetime]]:
        """``(key_hash, revoked_at)`` of the keys revoked at or after ``since`` (served by ix_api_keys_revoked_at)."""
        result = await self.session.execute(
            select(ApiKey.key_hash, ApiKey.revoked_at).where(ApiKey.revoked_at >= since)
        )
        return [(key_hash, revoked_at) for key_hash, revoked_at in result.all()]

    async def get_default_group(self, environment_id: str) -> NotificationGroup | None:
        result = await self.session.execute(
            select(NotificationGroup)
            .where(NotificationGroup.environment_id == environment_id)
            .order_by(NotificationGroup.created_at)
            .limit(1)
        )
        return result.scalar_one_or_none()

    async def get_group(self, environment_id: str, group_id: str) -> NotificationGroup | None:
        result = await self.session.execute(
            select(NotificationGroup).where(
                NotificationGroup.environment_id == environment_id, NotificationGroup.id == group_id
            )
        )
        return result.scalar_one_or_none()

    async def has_in_app_integration(self, environment_id: str, provider_id: str) -> bool:
        result = await self.session.execute(
            select(Integration.id)
            .where(
                Integration.environment_id == environment_id,
                Integration.channel == "in_app",
                Integration.provider_id == provider_id,
                Integration.deleted.is_(False),
            )
            .limit(1)
        )
        return result.first() is not None

    def add(self, *rows: object) -> None:
        self.session.add_all(rows)

    async def active_keys(self, environment_id: str) -> list[ApiKey]:
        """The environment's keys that work, oldest first."""
        result = await self.session.execute(
            select(ApiKey)
            .where(ApiKey.environment_id == environment_id, ApiKey.revoked_at.is_(None))
            .order_by(ApiKey.created_at, ApiKey.id)
        )
        return list(result.scalars())

    async def active_key(self, environment_id: str, key_id: str) -> ApiKey | None:
        result = await self.session.execute(
            select(ApiKey).where(
                ApiKey.environment_id == environment_id, ApiKey.id == key_id, ApiKey.revoked_at.is_(None)
            )
        )
        return result.scalar_one_or_none()

    async def revoke_environment_keys(self, environment_id: str) -> int:
        result = await self.session.execute(
            update(ApiKey)
            .where(ApiKey.environment_id == environment_id, ApiKey.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
