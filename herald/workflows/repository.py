from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import Workflow


class WorkflowRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get_by_trigger_identifier(self, environment_id: str, identifier: str) -> Workflow | None:
        result = await self.session.execute(
            select(Workflow).where(
                Workflow.environment_id == environment_id,
                Workflow.trigger_identifier == identifier,
                Workflow.deleted.is_(False),
            )
        )
        return result.scalar_one_or_none()
