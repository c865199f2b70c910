"""Webhook endpoints, always within one environment."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import WebhookEndpoint


class WebhookEndpointRepository:
    def __init__(self, session: AsyncSession, environment_id: str) -> None:
        self.session = session
        self.environment_id = environment_id

    async def add(self, endpoint: WebhookEndpoint) -> None:
        self.session.add(endpoint)
        await self.session.flush()

    async def get(self, endpoint_id: str) -> WebhookEndpoint | None:
        return await self.session.scalar(
            select(WebhookEndpoint).where(WebhookEndpoint.environment_id == self.environment_id, WebhookEndpoint.id == endpoint_id)
        )

    async def all(self) -> Sequence[WebhookEndpoint]:
        result = await self.session.execute(
            select(WebhookEndpoint)
            .where(WebhookEndpoint.environment_id == self.environment_id)
            .order_by(WebhookEndpoint.created_at, WebhookEndpoint.id)
        )
        return result.scalars().all()

    async def listening(self) -> list[tuple[str, list[str]]]:
        """The enabled endpoints' ids and event types."""
        result = await self.session.execute(
            select(WebhookEndpoint.id, WebhookEndpoint.event_types).where(
                WebhookEndpoint.environment_id == self.environment_id, WebhookEndpoint.disabled.is_(False)
            )
        )
        return [(endpoint_id, list(types or [])) for endpoint_id, types in result.all()]

    async def delete(self, endpoint: WebhookEndpoint) -> None:
        await self.session.delete(endpoint)

    async def record_success(self, endpoint_id: str) -> None:
        await self.session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.environment_id == self.environment_id, WebhookEndpoint.id == endpoint_id)
            .where(WebhookEndpoint.failing_since.is_not(None))
            .values(failing_since=None)
        )

    async def record_failure(self, endpoint_id: str, at: datetime) -> None:
        await self.session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.environment_id == self.environment_id, WebhookEndpoint.id == endpoint_id)
            .where(WebhookEndpoint.failing_since.is_(None))
            .values(failing_since=at)
        )

    async def disable(self, endpoint_id: str, at: datetime, reason: str) -> None:
        await self.session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.environment_id == self.environment_id, WebhookEndpoint.id == endpoint_id)
            .values(disabled=True, disabled_at=at, disabled_reason=reason)
        )
