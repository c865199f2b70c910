"""Delivery providers' reports (``/v2/inbound-webhooks/delivery-providers``) and ``/v1/execution-details``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query

from herald.deliveries import service
from herald.deliveries.schemas import ExecutionDetails, WebhookResult
from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.schemas import ERROR_RESPONSES, DataResponse

inbound_router = APIRouter(prefix="/v2/inbound-webhooks", tags=["Activity"], responses=ERROR_RESPONSES)
details_router = APIRouter(prefix="/v1/execution-details", tags=["Execution Details"], responses=ERROR_RESPONSES)


@inbound_router.post(
    "/delivery-providers/{environmentId}/{integrationId}",
    response_model=DataResponse[list[WebhookResult]],
    summary="Track provider activity and engagement events",
)
async def track_delivery_events(
    environmentId: str,
    integrationId: str,
    body: Annotated[dict[str, Any], Body(description="The delivery provider's event(s)")],
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
    carries several.
    """
    return DataResponse(data=await service.track(session, principal, environmentId, integrationId, body))


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
