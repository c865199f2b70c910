from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert as sa_insert
from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.queue import wake_workers
from herald.kit.time import utcnow
from herald.models import Event, Job


class EventRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def record_many(self, events: Sequence[dict[str, Any]], jobs: Sequence[dict[str, Any]]) -> set[str]:
        """Write events and the jobs that will expand them; returns the ids of the events written.

        An event whose transactionId is already used in its environment (or
        earlier in ``events``) is skipped by the unique index, not by a read, so
        two racing requests cannot both get through; its job is not written.
        """
        if not events:
            return set()
        insert = pg_insert if self.session.bind.dialect.name == "postgresql" else sqlite_insert
        # Table-level statements: the rows are plain dicts, no ORM bookkeeping needed.
        events_table, jobs_table = Event.__table__, Job.__table__
        statement = (
            insert(events_table)
            .on_conflict_do_nothing(index_elements=["environment_id", "transaction_id"])
            .returning(events_table.c.id)
        )
        written = set((await self.session.execute(statement, list(events))).scalars())
        jobs = [job for job in jobs if job["event_id"] in written]
        if jobs:
            await self.session.execute(sa_insert(jobs_table), jobs)
            await wake_workers(self.session)
        return written

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
