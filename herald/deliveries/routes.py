"""Delivery providers' reports (``/v2/inbound-webhooks/delivery-providers``) and ``/v1/execution-details``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from herald.deliveries import inbound, service
from herald.deliveries.schemas import ExecutionDetails, WebhookResult
from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.outbound import OutboundPolicy
from herald.kit.schemas import ERROR_RESPONSES, DataResponse
from herald.providers.inbound import InboundRequest

inbound_router = APIRouter(prefix="/v2/inbound-webhooks", tags=["Activity"], responses=ERROR_RESPONSES)
details_router = APIRouter(prefix="/v1/execution-details", tags=["Execution Details"], responses=ERROR_RESPONSES)
provider_webhooks_router = APIRouter(prefix="/webhooks", tags=["Activity"], responses=ERROR_RESPONSES)


# The body is read raw (a provider's own format may be a form or an SNS envelope in text/plain); this is what
# the API describes: novu-py and @novu/api send a JSON object.
TRACK_BODY = {
    "requestBody": {
        "required": True,
        "description": "The delivery provider's event(s): the generic form or the provider's own webhook body",
        "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
    }
}


@inbound_router.post(
    "/delivery-providers/{environmentId}/{integrationId}",
    response_model=DataResponse[list[WebhookResult]],
    summary="Track provider activity and engagement events",
    openapi_extra=TRACK_BODY,
)
async def track_delivery_events(
    environmentId: str,
    integrationId: str,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
) -> DataResponse[list[WebhookResult]]:
    """Record what a delivery provider reports about messages Herald sent through the integration.

    Each event becomes an execution detail (source ``Webhook``) of the job that
    sent the message, and changes the message's state where it says so
    (bounced, rejected, failed...: ``status: error``; opened or clicked: seen).
    A body in the generic form names the message (``messageId``/``id``/
    ``externalId``: Herald's ``_id`` or the provider's id), the ``status`` (one
    of novu-py's EventBody statuses) and the ``date``; ``{"events": [...]}``
    carries several. Any other body is the provider's own webhook (SendGrid,
    Mailgun, Twilio, SES through SNS...: the readers of ``/webhooks/...``), its
    signature checked as docs/delivery.md says.
    """
    arrived = InboundRequest(
        url=signed_url(request),
        headers={name.lower(): value for name, value in request.headers.items()},
        body=await request.body(),
        fetch=provider_fetch(request),
    )
    results = await inbound.track(
        session, request.app.state.secret_box, principal, environmentId, integrationId, arrived
    )
    return DataResponse(data=results)


@details_router.get(
    "", response_model=DataResponse[list[ExecutionDetails]], summary="Execution details of a notification"
)
async def get_execution_details(
    notificationId: Annotated[str, Query(description="The notification's _id")],
    subscriberId: Annotated[str, Query(description="The subscriber's subscriberId")],
    session: SessionDep,
    principal: PrincipalDep,
) -> DataResponse[list[ExecutionDetails]]:
    """What happened to each step of the notification for the subscriber, oldest first (Novu's v1 route)."""
    return DataResponse(data=await service.execution_details(session, principal, notificationId, subscriberId))


def signed_url(request: Request) -> str:
    """The address the provider called, as it saw it: ``HERALD_PUBLIC_URL`` + path when set (behind a proxy)."""
    public_url = request.app.state.settings.public_url
    if not public_url:
        return str(request.url)
    query = request.url.query
    return f"{public_url.rstrip('/')}{request.url.path}" + (f"?{query}" if query else "")


def provider_fetch(request: Request) -> inbound.ProviderFetch:
    """The process's way to reach back to a provider (made on first use), under the outbound policy."""
    state = request.app.state
    fetch = getattr(state, "provider_fetch", None)
    if fetch is None:
        fetch = state.provider_fetch = inbound.ProviderFetch(OutboundPolicy.allowing(state.settings.outbound_allow))
    return fetch  # type: ignore[no-any-return]


@provider_webhooks_router.post(
    "/organizations/{organizationId}/environments/{environmentId}/{channel}/{integrationId}",
    response_model=DataResponse[list[WebhookResult]],
    summary="A delivery provider's own webhook (no API key: the provider's signature)",
)
async def receive_provider_webhook(
    organizationId: str,
    environmentId: str,
    channel: str,
    integrationId: str,
    request: Request,
    session: SessionDep,
) -> DataResponse[list[WebhookResult]]:
    """What a provider reports of the messages Herald sent through the integration, in the provider's format.

    ``channel`` is ``email`` or ``sms``. The integration must have
    ``configurations.inboundWebhookEnabled``; the provider's signature is
    checked as docs/delivery.md says, and a request that fails it changes nothing.
    """
    arrived = InboundRequest(
        url=signed_url(request),
        headers={name.lower(): value for name, value in request.headers.items()},
        body=await request.body(),
        fetch=provider_fetch(request),
    )
    results = await inbound.receive(
        session, request.app.state.secret_box, organizationId, environmentId, channel, integrationId, arrived
    )
    return DataResponse(data=results)
