from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import Topic


class TopicRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def keys_that_exist(self, environment_id: str, keys: Sequence[str]) -> set[str]:
        if not keys:
            return set()
        result = await self.session.execute(
            select(Topic.key).where(Topic.environment_id == environment_id, Topic.key.in_(list(keys)))
        )
        return set(result.scalars())
