"""Managing an environment's webhook endpoints."""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine import queue
from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.errors import BadRequestError, NotFoundError, ValidationFailed
from herald.kit.time import isoformat, utcnow
from herald.models import Job, WebhookEndpoint
from herald.webhooks.events import LISTENING
from herald.webhooks.repository import WebhookEndpointRepository
from herald.webhooks.schemas import CreatedWebhookEndpoint, CreateWebhookEndpointRequest
from herald.webhooks.schemas import WebhookEndpoint as WebhookEndpointSchema

# An environment's endpoints: each event is sent to every one that takes it.
MAX_ENDPOINTS = 20


def new_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def to_schema(endpoint: WebhookEndpoint) -> WebhookEndpointSchema:
    return WebhookEndpointSchema.model_validate(
        {
            "_id": endpoint.id,
            "url": endpoint.url,
            "description": endpoint.description,
            "eventTypes": list(endpoint.event_types or []),
            "_environmentId": endpoint.environment_id,
            "failingSince": isoformat(endpoint.failing_since),
            "disabled": endpoint.disabled,
            "disabledAt": isoformat(endpoint.disabled_at),
            "disabledReason": endpoint.disabled_reason,
            "createdAt": isoformat(endpoint.created_at),
            "updatedAt": isoformat(endpoint.updated_at),
        }
    )


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationFailed.field("url", "url must be an http or https URL with a host", url)


async def create_endpoint(
    session: AsyncSession, principal: Principal, box: SecretBox, request: CreateWebhookEndpointRequest
) -> CreatedWebhookEndpoint:
    _check_url(request.url)
    repository = WebhookEndpointRepository(session, principal.environment_id)
    if len(await repository.all()) >= MAX_ENDPOINTS:
        raise ValidationFailed.field("url", f"an environment has at most {MAX_ENDPOINTS} webhook endpoints", request.url)
    secret = new_secret()
    endpoint = WebhookEndpoint(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        url=request.url,
        description=request.description,
        event_types=list(dict.fromkeys(request.eventTypes)),
        secret=box.seal(secret),
    )
    await repository.add(endpoint)
    LISTENING.forget(principal.environment_id)
    return CreatedWebhookEndpoint.model_validate({**to_schema(endpoint).model_dump(by_alias=True), "secret": secret})


async def list_endpoints(session: AsyncSession, principal: Principal) -> Sequence[WebhookEndpoint]:
    return await WebhookEndpointRepository(session, principal.environment_id).all()


async def delete_endpoint(session: AsyncSession, principal: Principal, endpoint_id: str) -> None:
    repository = WebhookEndpointRepository(session, principal.environment_id)
    endpoint = await repository.get(endpoint_id)
    if endpoint is None:
        raise NotFoundError(f"Webhook endpoint {endpoint_id} not found")
    # Its waiting deliveries go with it (each would be canceled when claimed; a backlog at once).
    await repository.cancel_deliveries(endpoint.id, "the endpoint was deleted")
    await repository.delete(endpoint)
    LISTENING.forget(principal.environment_id)


# How many of an endpoint's deliveries its page shows (the latest).
DELIVERIES_SHOWN = 50


@dataclass(frozen=True)
class Delivery:
    """One event sent (or to be sent) to an endpoint, as the console shows it."""

    id: str
    event_type: str
    status: str
    attempts: int
    # When it is tried next (waiting ones only).
    next_retry_at: datetime | None
    last_attempt_at: str | None
    last_error: str | None
    created_at: datetime

    @property
    def retryable(self) -> bool:
        return self.status in ("queued", "delayed", "failed")


def _delivery(job: Job) -> Delivery:
    data = job.data or {}
    waiting = job.status in ("queued", "delayed")
    return Delivery(
        id=job.id,
        event_type=job.step_type or "",
        status=job.status,
        attempts=job.attempts,
        next_retry_at=job.run_at if waiting else None,
        last_attempt_at=data.get("lastAttemptAt"),
        last_error=job.error_text,
        created_at=job.created_at,
    )


async def get_endpoint(session: AsyncSession, principal: Principal, endpoint_id: str) -> WebhookEndpoint:
    endpoint = await WebhookEndpointRepository(session, principal.environment_id).get(endpoint_id)
    if endpoint is None:
        raise NotFoundError(f"Webhook endpoint {endpoint_id} not found")
    return endpoint


async def list_deliveries(session: AsyncSession, principal: Principal, endpoint_id: str) -> list[Delivery]:
    """The endpoint's latest deliveries (:data:`DELIVERIES_SHOWN`), the most recently changed first."""
    repository = WebhookEndpointRepository(session, principal.environment_id)
    return [_delivery(job) for job in await repository.deliveries(endpoint_id, DELIVERIES_SHOWN)]


async def retry_now(session: AsyncSession, principal: Principal, endpoint_id: str, delivery_id: str) -> Delivery:
    """Send a waiting or failed delivery at once: it is due now, and its endpoint's pause ends.

    A disabled endpoint is sent nothing: it is made again (with a new secret) instead.
    """
    endpoint = await get_endpoint(session, principal, endpoint_id)
    if endpoint.disabled:
        raise BadRequestError(f"The endpoint is disabled ({endpoint.disabled_reason}): add it again to send to it")
    repository = WebhookEndpointRepository(session, principal.environment_id)
    if not await repository.retry_now(endpoint.id, delivery_id, utcnow()):
        found = await repository.delivery(endpoint.id, delivery_id)
        if found is None:
            raise NotFoundError(f"Delivery {delivery_id} not found")
        raise BadRequestError(f"The delivery is {found.status}: only a waiting or failed delivery is retried")
    await queue.wake_webhook_senders(session)
    job = await repository.delivery(endpoint.id, delivery_id)
    assert job is not None
    await session.refresh(job)
    return _delivery(job)
