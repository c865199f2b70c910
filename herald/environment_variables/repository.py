"""Queries of environment variables: organization-wide, as Novu's are (values are per environment)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import Environment, EnvironmentVariable, Workflow


class EnvironmentVariableRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def add(self, row: EnvironmentVariable) -> None:
        self.session.add(row)

    async def list(self, organization_id: str, search: str | None = None) -> Sequence[EnvironmentVariable]:
        query = select(EnvironmentVariable).where(EnvironmentVariable.organization_id == organization_id)
        if search:
            query = query.where(func.lower(EnvironmentVariable.key).contains(search.lower(), autoescape=True))
        result = await self.session.execute(query.order_by(EnvironmentVariable.key))
        return result.scalars().all()

    async def get_by_key(self, organization_id: str, key: str) -> EnvironmentVariable | None:
        result = await self.session.execute(
            select(EnvironmentVariable).where(
                EnvironmentVariable.organization_id == organization_id, EnvironmentVariable.key == key
            )
        )
        return result.scalar_one_or_none()

    async def environments(self, organization_id: str) -> dict[str, Environment]:
        """The organization's environments by id: where values may be, and which are protected."""
        result = await self.session.execute(select(Environment).where(Environment.organization_id == organization_id))
        return {environment.id: environment for environment in result.scalars()}

    async def workflows(self, environment_id: str) -> Sequence[Workflow]:
        result = await self.session.execute(
            select(Workflow)
            .where(Workflow.environment_id == environment_id, Workflow.deleted.is_(False))
            .order_by(Workflow.created_at, Workflow.id)
        )
        return result.scalars().all()

    async def delete(self, variable: EnvironmentVariable) -> None:
        await self.session.delete(variable)
        await self.session.flush()
