"""Managing an environment's webhook endpoints."""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from urllib.parse import urlsplit

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.errors import NotFoundError, ValidationFailed
from herald.kit.time import isoformat
from herald.models import WebhookEndpoint
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
    await repository.delete(endpoint)
    LISTENING.forget(principal.environment_id)
