"""The queries of delivery events and execution details, every one scoped to an environment."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import ExecutionDetail, Integration, Message


class DeliveryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def messages_named(self, environment_id: str, references: Sequence[str]) -> list[Message]:
        """The environment's messages whose ``_id`` or provider message id is one of ``references``, locked.

        Locked (on PostgreSQL) so two events about one message, recorded at
        once, each see the other's change of its state.
        """
        if not references:
            return []
        values = list(references)
        result = await self.session.execute(
            select(Message)
            .where(
                Message.environment_id == environment_id,
                or_(Message.id.in_(values), Message.provider_message_id.in_(values)),
            )
            .order_by(Message.created_at, Message.id)
            .with_for_update()
        )
        return list(result.scalars())

    async def integration_of(
        self, organization_id: str, environment_id: str, channel: str, integration_id: str
    ) -> Integration | None:
        """The live integration a provider's webhook names, if it is of that organization, environment and channel."""
        result = await self.session.execute(
            select(Integration).where(
                Integration.id == integration_id,
                Integration.organization_id == organization_id,
                Integration.environment_id == environment_id,
                Integration.channel == channel,
                Integration.deleted.is_(False),
            )
        )
        return result.scalar_one_or_none()

    def add_detail(self, detail: ExecutionDetail) -> None:
        self.session.add(detail)

    async def messages_of_jobs(self, environment_id: str, job_ids: Sequence[str]) -> list[Message]:
        """The messages the jobs made: what an execution detail of a job is about."""
        if not job_ids:
            return []
        result = await self.session.execute(
            select(Message)
            .where(Message.environment_id == environment_id, Message.job_id.in_(list(job_ids)))
            .order_by(Message.created_at, Message.id)
        )
        return list(result.scalars())
