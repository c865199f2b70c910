from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import Tenant


class TenantRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get_by_identifier(self, environment_id: str, identifier: str) -> Tenant | None:
        result = await self.session.execute(
            select(Tenant).where(Tenant.environment_id == environment_id, Tenant.identifier == identifier)
        )
        return result.scalar_one_or_none()

    async def identifiers_that_exist(self, environment_id: str, identifiers: Collection[str]) -> set[str]:
        result = await self.session.execute(
            select(Tenant.identifier).where(
                Tenant.environment_id == environment_id, Tenant.identifier.in_(list(identifiers))
            )
        )
        return set(result.scalars())

    async def insert(self, tenant: Tenant) -> bool:
        """Insert a new tenant; False when its identifier was taken meanwhile (a concurrent create)."""
        try:
            async with self.session.begin_nested():
                self.session.add(tenant)
                await self.session.flush()
        except IntegrityError:
            return False
        return True

    async def save(self) -> bool:
        """Write pending changes; False when a new identifier collides with another tenant's."""
        try:
            async with self.session.begin_nested():
                await self.session.flush()
        except IntegrityError:
            return False
        return True

    async def list_page(self, environment_id: str, *, offset: int, limit: int) -> Sequence[Tenant]:
        """Newest first, as Novu lists them."""
        result = await self.session.execute(
            select(Tenant)
            .where(Tenant.environment_id == environment_id)
            .order_by(Tenant.created_at.desc(), Tenant.id.desc())
            .offset(offset)
            .limit(limit)
        )
        return result.scalars().all()

    async def count(self, environment_id: str) -> int:
        result = await self.session.execute(
            select(func.count()).select_from(Tenant).where(Tenant.environment_id == environment_id)
        )
        return int(result.scalar_one())

    async def delete(self, tenant: Tenant) -> None:
        await self.session.delete(tenant)
        await self.session.flush()
