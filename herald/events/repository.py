from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.queue import wake_workers
from herald.kit.time import utcnow
from herald.models import Event, Job


class EventRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def record(self, event: Event, job: Job) -> bool:
        """Write the event and the job that will expand it, or nothing.

        Returns False when the transactionId is already used in the
        environment: the unique index decides, so two racing requests cannot
        both get through.
        """
        try:
            async with self.session.begin_nested():
                self.session.add_all([event, job])
                await self.session.flush()
        except IntegrityError:
            if await self.transaction_exists(event.environment_id, event.transaction_id):
                return False
            raise
        await wake_workers(self.session)
        return True

    async def transaction_exists(self, environment_id: str, transaction_id: str) -> bool:
        result = await self.session.execute(
            select(Event.id).where(Event.environment_id == environment_id, Event.transaction_id == transaction_id)
        )
        return result.first() is not None

    async def cancel_pending(self, environment_id: str, transaction_id: str) -> int:
        """Cancel the transaction's jobs that wait on a delay or a digest."""
        result = await self.session.execute(
            update(Job)
            .where(
                Job.environment_id == environment_id,
                Job.transaction_id == transaction_id,
                Job.status.in_(("delayed", "merged", "pending")),
            )
            .values(status="canceled", updated_at=utcnow())
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
