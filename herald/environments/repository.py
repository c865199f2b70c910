"""Queries of the environments feature: the organization's environments, and what promotion reads.

Environments are organization-wide, as Novu's routes are: every query takes the
caller's organization, and an environment of another answers as if absent.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.db import lock_for_transaction
from herald.models import (
    AuditEntry,
    Base,
    ConsoleSession,
    Environment,
    EnvironmentVariable,
    NotificationGroup,
    Workflow,
)


class EnvironmentRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def add(self, row: object) -> None:
        self.session.add(row)

    async def list(self, organization_id: str) -> Sequence[Environment]:
        result = await self.session.execute(
            select(Environment)
            .where(Environment.organization_id == organization_id)
            .order_by(Environment.created_at, Environment.id)
        )
        return result.scalars().all()

    async def get(self, organization_id: str, environment_id: str) -> Environment | None:
        result = await self.session.execute(
            select(Environment).where(Environment.organization_id == organization_id, Environment.id == environment_id)
        )
        return result.scalar_one_or_none()

    async def count(self, organization_id: str) -> int:
        result = await self.session.execute(
            select(func.count()).select_from(Environment).where(Environment.organization_id == organization_id)
        )
        return int(result.scalar_one())

    async def lock_creation(self, organization_id: str) -> None:
        """Until the transaction ends, other creations of the organization's environments wait."""
        await lock_for_transaction(self.session, f"environments:{organization_id}")

    async def name_taken(self, organization_id: str, name: str, *, excluding_id: str | None = None) -> bool:
        query = select(Environment.id).where(Environment.organization_id == organization_id, Environment.name == name)
        if excluding_id is not None:
            query = query.where(Environment.id != excluding_id)
        return (await self.session.execute(query.limit(1))).first() is not None

    async def identifier_taken(self, identifier: str, *, excluding_id: str) -> bool:
        """Identifiers are unique across organizations: the Inbox finds an environment by it alone."""
        query = select(Environment.id).where(Environment.identifier == identifier, Environment.id != excluding_id)
        return (await self.session.execute(query.limit(1))).first() is not None

    async def delete(self, environment: Environment) -> None:
        """The environment and everything scoped to it (every table with an ``environment_id``).

        But the audit log, which outlives what it records (its rows are
        append-only, and the deletion itself is one of them), and the
        console's sessions, whose choice of environment is only forgotten:
        the member stays signed in and the console picks another.
        """
        for table in reversed(Base.metadata.sorted_tables):
            if table.name in (AuditEntry.__tablename__, ConsoleSession.__tablename__) or "environment_id" not in table.c:
                continue
            await self.session.execute(delete(table).where(table.c.environment_id == environment.id))
        await self.session.execute(
            update(ConsoleSession).where(ConsoleSession.environment_id == environment.id).values(environment_id=None)
        )
        # Environment variables are the organization's: only this environment's values go.
        variables = await self.session.execute(
            select(EnvironmentVariable).where(EnvironmentVariable.organization_id == environment.organization_id)
        )
        for variable in variables.scalars():
            if environment.id in (variable.values or {}):
                variable.values = {key: value for key, value in variable.values.items() if key != environment.id}
        await self.session.delete(environment)
        await self.session.flush()

    async def workflow_tags(self, environment_id: str) -> list[str]:
        result = await self.session.execute(
            select(Workflow.tags).where(Workflow.environment_id == environment_id, Workflow.deleted.is_(False))
        )
        tags: dict[str, None] = {}
        for (row_tags,) in result.all():
            for tag in row_tags or []:
                if isinstance(tag, str):
                    tags.setdefault(tag)
        return sorted(tags)

    async def workflows_of(self, environment_id: str) -> Sequence[Workflow]:
        result = await self.session.execute(
            select(Workflow)
            .where(Workflow.environment_id == environment_id, Workflow.deleted.is_(False))
            .order_by(Workflow.created_at, Workflow.id)
        )
        return result.scalars().all()

    async def groups_of(self, environment_id: str) -> Sequence[NotificationGroup]:
        result = await self.session.execute(
            select(NotificationGroup)
            .where(NotificationGroup.environment_id == environment_id)
            .order_by(NotificationGroup.created_at, NotificationGroup.id)
        )
        return result.scalars().all()
