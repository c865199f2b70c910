from __future__ import annotations

from sqlalchemy import select
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
