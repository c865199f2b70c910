"""The Webhooks page: the environment's endpoints (the signing secret shown once), their deliveries, "Retry now"."""

from __future__ import annotations

from typing import get_args

from fastapi import APIRouter
from pydantic import ValidationError
from starlette.responses import Response

from herald.console.deps import Console, ConsoleDep
from herald.kit.errors import HeraldError
from herald.webhooks import service
from herald.webhooks.schemas import CreateWebhookEndpointRequest, EventType

router = APIRouter()

EVENT_TYPES: tuple[str, ...] = get_args(EventType)


async def _page(
    console: Console,
    *,
    status_code: int = 200,
    url: str = "",
    description: str = "",
    chosen: list[str] | None = None,
    created: tuple[str, str] | None = None,
) -> Response:
    console.authorize("webhooks.read")
    endpoints = await service.list_endpoints(console.db, console.principal)
    return console.render(
        "webhooks.html",
        title="Webhooks",
        status_code=status_code,
        endpoints=endpoints,
        event_types=EVENT_TYPES,
        url=url,
        description=description,
        chosen=chosen if chosen is not None else list(EVENT_TYPES),
        created_url=created[0] if created else None,
        created_secret=created[1] if created else None,
    )


@router.get("/webhooks")
async def webhooks_page(console: ConsoleDep) -> Response:
    return await _page(console)


@router.post("/webhooks")
async def create_endpoint(console: ConsoleDep) -> Response:
    """The answer shows the signing secret, this once (it is stored sealed and never shown again)."""
    console.authorize("webhooks.write")
    form = await console.form()
    url = console.field(form, "url", 2048)
    description = console.field(form, "description", 1000)
    chosen = [value for value in form.getlist("eventTypes") if isinstance(value, str) and value in EVENT_TYPES]
    try:
        request = CreateWebhookEndpointRequest(url=url, description=description, eventTypes=chosen)  # type: ignore[arg-type]
        created = await service.create_endpoint(console.db, console.principal, console.request.app.state.secret_box, request)
    except (ValidationError, HeraldError) as exc:
        console.form_refusal(exc, "url", {"eventTypes": "Choose at least one event", "url": "Enter an http or https URL"})
        return await _page(console, status_code=getattr(exc, "status_code", 422), url=url, description=description, chosen=chosen)
    console.record("webhook_endpoint.created", "webhook_endpoint", created.id, changes={"url": url, "eventTypes": chosen})
    return await _page(console, created=(created.url, created.secret))


@router.get("/webhooks/{endpoint_id}")
async def endpoint_page(endpoint_id: str, console: ConsoleDep) -> Response:
    console.authorize("webhooks.read")
    endpoint = await service.get_endpoint(console.db, console.principal, endpoint_id[:100])
    deliveries = await service.list_deliveries(console.db, console.principal, endpoint.id)
    return console.render(
        "webhook.html",
        title=f"Webhook endpoint {endpoint.url[:80]}",
        endpoint=endpoint,
        deliveries=deliveries,
        shown=service.DELIVERIES_SHOWN,
    )


@router.post("/webhooks/{endpoint_id}/deliveries/{delivery_id}/retry")
async def retry_delivery(endpoint_id: str, delivery_id: str, console: ConsoleDep) -> Response:
    console.authorize("webhooks.write")
    delivery = await service.retry_now(console.db, console.principal, endpoint_id[:100], delivery_id[:100])
    console.record("webhook_delivery.retried", "webhook_delivery", delivery.id, changes={"endpointId": endpoint_id[:100]})
    return console.redirect(f"/console/webhooks/{endpoint_id[:100]}", flash=f"Delivery {delivery.id} is sent again now")


@router.post("/webhooks/{endpoint_id}/delete")
async def delete_endpoint(endpoint_id: str, console: ConsoleDep) -> Response:
    console.authorize("webhooks.write")
    endpoint = await service.get_endpoint(console.db, console.principal, endpoint_id[:100])
    url = endpoint.url
    await service.delete_endpoint(console.db, console.principal, endpoint.id)
    console.record("webhook_endpoint.deleted", "webhook_endpoint", endpoint_id[:100], changes={"url": url})
    return console.redirect("/console/webhooks", flash=f"Endpoint {url} deleted")
