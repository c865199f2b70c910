from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.db import lock_for_transaction
from herald.models import Integration, IntegrationHealth


class IntegrationRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def add(self, integration: Integration) -> None:
        self.session.add(integration)

    async def get(self, environment_id: str, integration_id: str) -> Integration | None:
        result = await self.session.execute(
            select(Integration).where(
                Integration.id == integration_id,
                Integration.environment_id == environment_id,
                Integration.deleted.is_(False),
            )
        )
        return result.scalar_one_or_none()

    async def list_for_organization(self, organization_id: str, *, active_only: bool) -> Sequence[Integration]:
        query = select(Integration).where(
            Integration.organization_id == organization_id, Integration.deleted.is_(False)
        )
        if active_only:
            query = query.where(Integration.active.is_(True))
        result = await self.session.execute(query.order_by(Integration.created_at, Integration.id))
        return result.scalars().all()

    async def list_for_environment(self, environment_id: str) -> Sequence[Integration]:
        result = await self.session.execute(
            select(Integration)
            .where(Integration.environment_id == environment_id, Integration.deleted.is_(False))
            .order_by(Integration.created_at, Integration.id)
        )
        return result.scalars().all()

    async def identifier_taken(self, environment_id: str, identifier: str, *, excluding_id: str | None = None) -> bool:
        query = select(Integration.id).where(
            Integration.environment_id == environment_id,
            Integration.identifier == identifier,
            Integration.deleted.is_(False),
        )
        if excluding_id is not None:
            query = query.where(Integration.id != excluding_id)
        return (await self.session.execute(query.limit(1))).first() is not None

    async def lock_channel(self, environment_id: str, channel: str) -> None:
        """Serialize changes of a channel's primary and priorities in an environment until commit.

        ``uq_integrations_one_primary`` guarantees one primary; the lock makes
        concurrent requests wait for each other instead of one failing on it.
        """
        await lock_for_transaction(self.session, f"integrations:{environment_id}:{channel}")

    async def active_of_channel(self, environment_id: str, channel: str, *, for_update: bool = False) -> Sequence[Integration]:
        """Active integrations of a channel in failover order: the primary, then highest priority first."""
        query = (
            select(Integration)
            .where(
                Integration.environment_id == environment_id,
                Integration.channel == channel,
                Integration.active.is_(True),
                Integration.deleted.is_(False),
            )
            .order_by(Integration.primary.desc(), Integration.priority.desc(), Integration.created_at.desc())
        )
        if for_update:
            query = query.with_for_update()
        return (await self.session.execute(query)).scalars().all()

    async def demote_primaries(self, environment_id: str, channel: str, *, except_id: str) -> None:
        await self.session.execute(
            update(Integration)
            .where(
                Integration.environment_id == environment_id,
                Integration.channel == channel,
                Integration.primary.is_(True),
                Integration.id != except_id,
            )
            .values(primary=False)
        )

    async def health_of(self, integration_ids: Sequence[str]) -> dict[str, IntegrationHealth]:
        """The breaker rows of these integrations (a healthy one has none)."""
        if not integration_ids:
            return {}
        result = await self.session.execute(
            select(IntegrationHealth).where(IntegrationHealth.integration_id.in_(list(integration_ids)))
        )
        return {row.integration_id: row for row in result.scalars()}
