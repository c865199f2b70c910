"""The store's side of a bridge: the environment's bridge URL and the key its requests are signed with."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import ApiKey, Environment


class BridgeRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def environment(self, environment_id: str) -> Environment | None:
        return await self.session.get(Environment, environment_id)

    async def bridge_url(self, environment_id: str) -> str | None:
        return await self.session.scalar(select(Environment.bridge_url).where(Environment.id == environment_id))

    async def sealed_signing_key(self, environment_id: str) -> str | None:
        """The environment's oldest API key still in use, sealed: the key its bridge checks signatures with.

        Novu signs with the environment's first API key (its "secret key"); a
        key revoked since no longer signs, the next oldest does.
        """
        return await self.session.scalar(
            select(ApiKey.sealed_key)
            .where(ApiKey.environment_id == environment_id, ApiKey.revoked_at.is_(None), ApiKey.sealed_key.is_not(None))
            .order_by(ApiKey.created_at, ApiKey.id)
            .limit(1)
        )

    async def record_bridge_url(self, environment_id: str, bridge_url: str) -> None:
        environment = await self.session.get(Environment, environment_id)
        if environment is not None:
            environment.bridge_url = bridge_url
