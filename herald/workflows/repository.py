from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Text, bindparam, cast, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import Environment, NotificationGroup, Workflow


class TriggerTarget(NamedTuple):
    """The columns of a workflow that accepting a trigger reads (see ``trigger_targets``)."""

    id: str
    trigger_identifier: str
    active: bool
    steps: list[Any]
    # Every change to a workflow moves it (the ORM's onupdate): a cached target
    # is checked against it (herald/events/targets.py).
    updated_at: datetime
    # The JSON schema a trigger's payload must match: set only when the
    # workflow's validatePayload is on (herald/workflows/payload.py).
    payload_schema: dict[str, Any] | None = None


_WORKFLOWS = Workflow.__table__
_TRIGGER_TARGETS = select(
    _WORKFLOWS.c.id,
    _WORKFLOWS.c.trigger_identifier,
    _WORKFLOWS.c.active,
    _WORKFLOWS.c.steps,
    _WORKFLOWS.c.updated_at,
    _WORKFLOWS.c.validate_payload,
    _WORKFLOWS.c.payload_schema,
).where(
    _WORKFLOWS.c.environment_id == bindparam("environment_id"),
    _WORKFLOWS.c.trigger_identifier.in_(bindparam("identifiers", expanding=True)),
    _WORKFLOWS.c.deleted.is_(False),
)


class WorkflowRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def add(self, row: Workflow | NotificationGroup) -> None:
        self.session.add(row)

    async def trigger_targets(self, environment_id: str, identifiers: Collection[str]) -> Sequence[TriggerTarget]:
        """What a trigger needs of the workflows it names: id, identifier, whether active, the steps.

        Columns, not mapped objects, by a Core statement built once and run
        on the session's connection: read once per batch of triggers, where
        loading whole workflows through the ORM cost more than the rest of
        the read, and building the statement each time was still a tenth of
        a SQLite batch.
        """
        connection = await self.session.connection()
        result = await connection.execute(
            _TRIGGER_TARGETS, {"environment_id": environment_id, "identifiers": list(identifiers)}
        )
        return [
            TriggerTarget(id, identifier, active, steps, updated_at, schema if validate and schema else None)
            for id, identifier, active, steps, updated_at, validate, schema in result.all()
        ]

    async def get(self, environment_id: str, workflow_id: str) -> Workflow | None:
        result = await self.session.execute(
            select(Workflow).where(
                Workflow.id == workflow_id,
                Workflow.environment_id == environment_id,
                Workflow.deleted.is_(False),
            )
        )
        return result.scalar_one_or_none()

    async def get_by_identifier(self, environment_id: str, identifier: str) -> Workflow | None:
        result = await self.session.execute(
            select(Workflow).where(
                Workflow.environment_id == environment_id,
                Workflow.trigger_identifier == identifier,
                Workflow.deleted.is_(False),
            )
        )
        return result.scalar_one_or_none()

    async def trigger_identifiers(self, environment_id: str, limit: int) -> list[str]:
        """Up to ``limit`` trigger identifiers of the environment's workflows, newest first."""
        result = await self.session.execute(
            select(Workflow.trigger_identifier)
            .where(Workflow.environment_id == environment_id, Workflow.deleted.is_(False))
            .order_by(Workflow.created_at.desc())
            .limit(limit)
        )
        return list(result.scalars())

    async def environment_of_organization(self, organization_id: str, environment_id: str) -> Environment | None:
        """The environment, when it belongs to the organization (a workflow is synced only within one)."""
        result = await self.session.execute(
            select(Environment).where(Environment.id == environment_id, Environment.organization_id == organization_id)
        )
        return result.scalar_one_or_none()

    async def search(
        self, environment_id: str, *, search: str | None, active: bool | None, order_by: str, descending: bool
    ) -> Sequence[Workflow]:
        """Every workflow of the environment that matches, in order (Novu v2's search, before tags and paging).

        ``search`` matches part of the name or the trigger identifier, ignoring case.
        """
        conditions = [Workflow.environment_id == environment_id, Workflow.deleted.is_(False)]
        if search:
            needle = search.lower()
            conditions.append(
                or_(
                    func.lower(Workflow.name).contains(needle, autoescape=True),
                    func.lower(Workflow.trigger_identifier).contains(needle, autoescape=True),
                )
            )
        if active is not None:
            conditions.append(Workflow.active.is_(active))
        column = {"name": Workflow.name, "updatedAt": Workflow.updated_at}.get(order_by, Workflow.created_at)
        ordering = [column.desc(), Workflow.id.desc()] if descending else [column.asc(), Workflow.id.asc()]
        rows = await self.session.execute(select(Workflow).where(*conditions).order_by(*ordering))
        return rows.scalars().all()

    async def identifier_taken(self, environment_id: str, identifier: str, *, excluding_id: str | None = None) -> bool:
        query = select(Workflow.id).where(
            Workflow.environment_id == environment_id,
            Workflow.trigger_identifier == identifier,
            Workflow.deleted.is_(False),
        )
        if excluding_id is not None:
            query = query.where(Workflow.id != excluding_id)
        return (await self.session.execute(query.limit(1))).first() is not None

    async def list_page(
        self, environment_id: str, *, offset: int, limit: int, search: str | None = None, search_tags: bool = False
    ) -> tuple[Sequence[Workflow], int]:
        """One page of the environment's workflows, newest first, and how many there are in all.

        ``search`` matches part of the name or the trigger identifier, ignoring
        case, and with ``search_tags`` part of a tag too (the console's search).
        """
        conditions = [Workflow.environment_id == environment_id, Workflow.deleted.is_(False)]
        if search:
            needle = search.lower()
            matches = [
                func.lower(Workflow.name).contains(needle, autoescape=True),
                func.lower(Workflow.trigger_identifier).contains(needle, autoescape=True),
            ]
            if search_tags:
                # The tags' JSON text: a part of one tag is found in it on either store.
                matches.append(func.lower(cast(Workflow.tags, Text)).contains(needle, autoescape=True))
            conditions.append(or_(*matches))
        total = (await self.session.execute(select(func.count(Workflow.id)).where(*conditions))).scalar_one()
        rows = await self.session.execute(
            select(Workflow)
            .where(*conditions)
            .order_by(Workflow.created_at.desc(), Workflow.id.desc())
            .offset(offset)
            .limit(limit)
        )
        return rows.scalars().all(), int(total)

    async def list_groups(self, environment_id: str) -> Sequence[NotificationGroup]:
        result = await self.session.execute(
            select(NotificationGroup)
            .where(NotificationGroup.environment_id == environment_id)
            .order_by(NotificationGroup.created_at, NotificationGroup.id)
        )
        return result.scalars().all()

    async def groups_by_id(self, environment_id: str, group_ids: Collection[str]) -> dict[str, NotificationGroup]:
        if not group_ids:
            return {}
        result = await self.session.execute(
            select(NotificationGroup).where(
                NotificationGroup.environment_id == environment_id, NotificationGroup.id.in_(set(group_ids))
            )
        )
        return {group.id: group for group in result.scalars()}

    async def live_by_identifier(self, environment_id: str, identifiers: Collection[str]) -> dict[str, Workflow]:
        """The environment's workflows (of any origin) among ``identifiers``, by trigger identifier."""
        if not identifiers:
            return {}
        rows = await self.session.execute(
            select(Workflow).where(
                Workflow.environment_id == environment_id,
                Workflow.trigger_identifier.in_(list(identifiers)),
                Workflow.deleted.is_(False),
            )
        )
        return {row.trigger_identifier: row for row in rows.scalars()}

    async def of_origin(self, environment_id: str, origin: str) -> Sequence[Workflow]:
        """The environment's workflows of one origin (``external``: the code-first ones), oldest first."""
        rows = await self.session.execute(
            select(Workflow)
            .where(Workflow.environment_id == environment_id, Workflow.origin == origin, Workflow.deleted.is_(False))
            .order_by(Workflow.created_at, Workflow.id)
        )
        return rows.scalars().all()
