"""The only place that queries the audit log: insert and read, never update or delete (the store refuses both)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.cursor import CursorPage, CursorParams, cursor_page
from herald.models import AuditEntry


@dataclass(frozen=True)
class AuditFilter:
    """What the Audit log page narrows the log to; every value bounded by its caller."""

    action: str | None = None
    actor: str | None = None  # an email, or an API key's id
    resource: str | None = None  # a resource type, or ``type:id``
    since: datetime | None = None
    until: datetime | None = None
    environment_id: str | None = None


class AuditRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def add(self, entry: AuditEntry) -> None:
        self.session.add(entry)

    async def page(
        self,
        organization_id: str,
        *,
        limit: int,
        before: tuple[datetime, str] | None = None,
        filters: AuditFilter = AuditFilter(),
        environment_or_organization: str | None = None,
    ) -> Sequence[AuditEntry]:
        """Up to ``limit`` entries, newest first, older than ``before`` (created_at, id) when given.

        ``environment_or_organization``: only that environment's entries and
        the organization-wide ones (what an API key sees).
        """
        conditions: list[Any] = [AuditEntry.organization_id == organization_id]
        if environment_or_organization is not None:
            conditions.append(
                or_(AuditEntry.environment_id == environment_or_organization, AuditEntry.environment_id.is_(None))
            )
        if filters.environment_id is not None:
            conditions.append(AuditEntry.environment_id == filters.environment_id)
        if filters.action:
            conditions.append(AuditEntry.action.startswith(filters.action, autoescape=True))
        if filters.actor:
            conditions.append(or_(AuditEntry.actor_email == filters.actor.lower(), AuditEntry.actor_id == filters.actor))
        if filters.resource:
            resource_type, _, resource_id = filters.resource.partition(":")
            conditions.append(AuditEntry.resource_type == resource_type)
            if resource_id:
                conditions.append(AuditEntry.resource_id == resource_id)
        if filters.since is not None:
            conditions.append(AuditEntry.created_at >= filters.since)
        if filters.until is not None:
            conditions.append(AuditEntry.created_at < filters.until)
        if before is not None:
            at, entry_id = before
            conditions.append(or_(AuditEntry.created_at < at, and_(AuditEntry.created_at == at, AuditEntry.id < entry_id)))
        result = await self.session.execute(
            select(AuditEntry)
            .where(*conditions)
            .order_by(AuditEntry.created_at.desc(), AuditEntry.id.desc())
            .limit(limit)
        )
        return list(result.scalars())

    async def entry(self, organization_id: str, entry_id: str) -> AuditEntry | None:
        result = await self.session.execute(
            select(AuditEntry).where(AuditEntry.organization_id == organization_id, AuditEntry.id == entry_id)
        )
        return result.scalar_one_or_none()

    async def cursor_page(self, organization_id: str, environment_id: str, params: CursorParams) -> CursorPage:
        """A v2-style page (kit.cursor) of one environment's entries and the organization-wide ones."""
        conditions = [
            AuditEntry.organization_id == organization_id,
            or_(AuditEntry.environment_id == environment_id, AuditEntry.environment_id.is_(None)),
        ]
        return await cursor_page(self.session, AuditEntry, conditions, params, {"createdAt": AuditEntry.created_at})
