from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.schemas import ERROR_RESPONSES, DataResponse
from herald.webhooks import service
from herald.webhooks.schemas import CreatedWebhookEndpoint, CreateWebhookEndpointRequest, WebhookEndpoint

router = APIRouter(prefix="/v1/webhooks/endpoints", tags=["Webhooks"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, response_model=DataResponse[CreatedWebhookEndpoint], summary="Add a webhook endpoint")
async def create_endpoint(
    body: CreateWebhookEndpointRequest, request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[CreatedWebhookEndpoint]:
    """The answer holds the signing secret (``whsec_...``): it is shown this once."""
    return DataResponse(data=await service.create_endpoint(session, principal, request.app.state.secret_box, body))


@router.get("", response_model=DataResponse[list[WebhookEndpoint]], summary="List webhook endpoints")
async def list_endpoints(session: SessionDep, principal: PrincipalDep) -> DataResponse[list[WebhookEndpoint]]:
    """The environment's endpoints, each with whether its deliveries are failing or were given up on."""
    return DataResponse(data=[service.to_schema(row) for row in await service.list_endpoints(session, principal)])


@router.delete("/{endpoint_id}", status_code=204, response_class=Response, summary="Delete a webhook endpoint")
async def delete_endpoint(
    endpoint_id: Annotated[str, Path(description="The endpoint's _id")], session: SessionDep, principal: PrincipalDep
) -> Response:
    await service.delete_endpoint(session, principal, endpoint_id)
    return Response(status_code=204)
