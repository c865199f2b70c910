"""The queries of delivery events and execution details, every one scoped to an environment."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.time import utcnow
from herald.models import DeliveryEventKey, ExecutionDetail, Integration, Message, SpentSignatureToken

# Keys inserted per statement (four bound values each: well within SQLite's limit).
KEYS_PER_INSERT = 500


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

    async def claim_event_keys(self, environment_id: str, integration_id: str, keys: Sequence[str]) -> set[str]:
        """Insert the events' keys of the integration; answer those that were new, to be recorded.

        ``INSERT ... ON CONFLICT DO NOTHING RETURNING``: on PostgreSQL a copy of
        the request arriving at the same moment waits on the other's
        uncommitted key, then inserts nothing once it commits (and claims the
        key if it rolls back), so an event is recorded by one request only.
        Sorted, so two requests sharing keys take them in the same order.
        """
        if not keys:
            return set()
        insert = pg_insert if self.session.get_bind().dialect.name == "postgresql" else sqlite_insert
        table = DeliveryEventKey.__table__
        now = utcnow()
        ordered = sorted(set(keys))
        claimed: set[str] = set()
        for start in range(0, len(ordered), KEYS_PER_INSERT):
            rows = [
                {"environment_id": environment_id, "integration_id": integration_id, "event_key": key, "created_at": now}
                for key in ordered[start : start + KEYS_PER_INSERT]
            ]
            result = await self.session.execute(
                insert(table).values(rows).on_conflict_do_nothing().returning(table.c.event_key)
            )
            claimed.update(result.scalars())
        return claimed

    async def spend_signature_token(
        self, environment_id: str, integration_id: str, token: str, expires_at: datetime
    ) -> bool:
        """Insert a signature's token (``SpentSignatureToken``); False when it was spent already.

        As :meth:`claim_event_keys`: a request carrying the same token at the
        same moment waits on this one's uncommitted row (PostgreSQL), then
        finds it spent once this commits, or spends it if this rolls back.
        """
        insert = pg_insert if self.session.get_bind().dialect.name == "postgresql" else sqlite_insert
        table = SpentSignatureToken.__table__
        result = await self.session.execute(
            insert(table)
            .values(token=token, environment_id=environment_id, integration_id=integration_id, expires_at=expires_at)
            .on_conflict_do_nothing()
            .returning(table.c.token)
        )
        return result.scalar_one_or_none() is not None

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
