from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import Subscriber


class SubscriberRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get_by_subscriber_id(self, environment_id: str, subscriber_id: str) -> Subscriber | None:
        """The subscriber the caller names by its own identifier (not Herald's ``_id``)."""
        result = await self.session.execute(
            select(Subscriber).where(
                Subscriber.environment_id == environment_id, Subscriber.subscriber_id == subscriber_id
            )
        )
        return result.scalar_one_or_none()
