"""Webhook endpoints, always within one environment."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.time import utcnow
from herald.models import Job, WebhookEndpoint
from herald.webhooks.queue import WEBHOOK_DUE


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
        """The endpoint answered: it is no longer failing, nor paused."""
        await self.session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.environment_id == self.environment_id, WebhookEndpoint.id == endpoint_id)
            .where(WebhookEndpoint.failing_since.is_not(None))
            .values(failing_since=None, paused_until=None)
        )

    async def record_failure(self, endpoint_id: str, at: datetime, paused_until: datetime) -> None:
        """A delivery failed at ``at``: the endpoint is failing since then (unless it already was) and paused."""
        await self.session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.environment_id == self.environment_id, WebhookEndpoint.id == endpoint_id)
            .values(failing_since=func.coalesce(WebhookEndpoint.failing_since, at), paused_until=paused_until)
        )

    async def cancel_deliveries(self, endpoint_id: str, reason: str) -> int:
        """Cancel the endpoint's waiting deliveries, with why: a range of ix_jobs_webhook_due."""
        result = await self.session.execute(
            update(Job)
            .where(
                text(WEBHOOK_DUE),
                Job.endpoint_id == endpoint_id,
                Job.environment_id == self.environment_id,
            )
            .values(status="canceled", error_text=reason, updated_at=utcnow()),
            execution_options={"synchronize_session": False},
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def disable(self, endpoint_id: str, at: datetime, reason: str) -> None:
        await self.session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.environment_id == self.environment_id, WebhookEndpoint.id == endpoint_id)
            .values(disabled=True, disabled_at=at, disabled_reason=reason)
        )

    async def deliveries(self, endpoint_id: str, limit: int) -> Sequence[Job]:
        """The endpoint's latest deliveries, the most recently changed first (ix_jobs_webhook_updated)."""
        result = await self.session.execute(
            select(Job)
            .where(
                Job.kind == "webhook",
                Job.environment_id == self.environment_id,
                Job.endpoint_id == endpoint_id,
            )
            .order_by(Job.updated_at.desc(), Job.id.desc())
            .limit(limit)
        )
        return result.scalars().all()

    async def delivery(self, endpoint_id: str, delivery_id: str) -> Job | None:
        return await self.session.scalar(
            select(Job).where(
                Job.kind == "webhook",
                Job.environment_id == self.environment_id,
                Job.endpoint_id == endpoint_id,
                Job.id == delivery_id,
            )
        )

    async def retry_now(self, endpoint_id: str, delivery_id: str, at: datetime) -> bool:
        """Make a waiting or failed delivery due at ``at`` and end its endpoint's pause; whether it was one to retry."""
        result = await self.session.execute(
            update(Job)
            .where(
                Job.kind == "webhook",
                Job.environment_id == self.environment_id,
                Job.endpoint_id == endpoint_id,
                Job.id == delivery_id,
                Job.status.in_(("queued", "delayed", "failed")),
            )
            .values(status="queued", run_at=at, updated_at=at),
            execution_options={"synchronize_session": False},
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            return False
        await self.session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.environment_id == self.environment_id, WebhookEndpoint.id == endpoint_id)
            .values(paused_until=None)
        )
        return True
