"""Every query about subscriber preferences, scoped to the subscriber's environment."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.ids import new_id
from herald.models import Subscriber, SubscriberPreference, Workflow

_ROWS_OF = select(SubscriberPreference).where(
    SubscriberPreference.environment_id == bindparam("environment_id"),
    SubscriberPreference.subscriber_id == bindparam("subscriber_id"),
)


class PreferenceRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def rows_of(self, subscriber: Subscriber) -> list[SubscriberPreference]:
        """The subscriber's preference rows: the global one (``workflow_id`` None) and one per workflow they set."""
        result = await self.session.execute(
            _ROWS_OF, {"environment_id": subscriber.environment_id, "subscriber_id": subscriber.id}
        )
        return list(result.scalars())

    async def row_to_change(self, subscriber: Subscriber, workflow_id: str | None, now: datetime) -> SubscriberPreference:
        """The subscriber's row for the workflow (None: the global one), made when missing, locked for the change.

        Made with ``ON CONFLICT DO NOTHING``: two requests making the same row
        at once end up changing the one row, one after the other.
        """
        row: dict[str, Any] = {
            "id": new_id(),
            "environment_id": subscriber.environment_id,
            "organization_id": subscriber.organization_id,
            "subscriber_id": subscriber.id,
            "workflow_id": workflow_id,
            "enabled": True,
            "channels": {},
            "created_at": now,
            "updated_at": now,
        }
        insert = pg_insert if self.session.get_bind().dialect.name == "postgresql" else sqlite_insert
        await self.session.execute(insert(SubscriberPreference).values(row).on_conflict_do_nothing())
        level = (
            SubscriberPreference.workflow_id.is_(None)
            if workflow_id is None
            else SubscriberPreference.workflow_id == workflow_id
        )
        result = await self.session.execute(
            select(SubscriberPreference)
            .where(
                SubscriberPreference.environment_id == subscriber.environment_id,
                SubscriberPreference.subscriber_id == subscriber.id,
                level,
            )
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return result.scalar_one()

    async def active_workflows(self, environment_id: str) -> Sequence[Workflow]:
        """The environment's active workflows, oldest first (the workflows a subscriber has preferences about)."""
        result = await self.session.execute(
            select(Workflow)
            .where(Workflow.environment_id == environment_id, Workflow.active.is_(True), Workflow.deleted.is_(False))
            .order_by(Workflow.created_at, Workflow.id)
        )
        return result.scalars().all()

    async def find_workflows(self, environment_id: str, references: Collection[str]) -> dict[str, Workflow]:
        """The environment's live workflows named by ``_id`` or trigger identifier, by the name given."""
        if not references:
            return {}
        result = await self.session.execute(
            select(Workflow).where(
                Workflow.environment_id == environment_id,
                Workflow.deleted.is_(False),
                or_(Workflow.id.in_(list(references)), Workflow.trigger_identifier.in_(list(references))),
            )
        )
        found: dict[str, Workflow] = {}
        for workflow in result.scalars():
            # An _id wins over another workflow's identical trigger identifier.
            if workflow.id in references:
                found[workflow.id] = workflow
            if workflow.trigger_identifier in references:
                found.setdefault(workflow.trigger_identifier, workflow)
        return found
