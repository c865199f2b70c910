from __future__ import annotations

from fastapi import APIRouter, Request, Response

from herald.integrations import service
from herald.integrations.schemas import CreateIntegrationRequest, Integration, UpdateIntegrationRequest
from herald.kit.auth import PrincipalDep
from herald.kit.crypto import SecretBox
from herald.kit.db import SessionDep
from herald.kit.schemas import ERROR_RESPONSES, DataResponse

router = APIRouter(prefix="/v1/integrations", tags=["Integrations"], responses=ERROR_RESPONSES)


def _box(request: Request) -> SecretBox:
    return request.app.state.secret_box


@router.post("", status_code=201, response_model=DataResponse[Integration], summary="Create an integration")
async def create_integration(
    body: CreateIntegrationRequest, request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[Integration]:
    integration = await service.create_integration(session, principal, _box(request), body)
    return DataResponse(data=await service.present_one(session, integration, _box(request), principal))


@router.get("", response_model=DataResponse[list[Integration]], summary="List the organization's integrations")
async def list_integrations(request: Request, session: SessionDep, principal: PrincipalDep) -> DataResponse[list[Integration]]:
    rows = await service.list_integrations(session, principal, active_only=False)
    return DataResponse(data=await service.present(session, rows, _box(request), principal))


@router.get("/active", response_model=DataResponse[list[Integration]], summary="List active integrations")
async def list_active_integrations(
    request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[list[Integration]]:
    """The active, non-deleted integrations of every environment of the caller's organization."""
    rows = await service.list_integrations(session, principal, active_only=True)
    return DataResponse(data=await service.present(session, rows, _box(request), principal))


@router.put("/{integrationId}", response_model=DataResponse[Integration], summary="Update an integration")
async def update_integration(
    integrationId: str, body: UpdateIntegrationRequest, request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[Integration]:
    integration = await service.update_integration(session, principal, _box(request), integrationId, body)
    return DataResponse(data=await service.present_one(session, integration, _box(request), principal))


@router.delete("/{integrationId}", response_model=DataResponse[list[Integration]], summary="Delete an integration")
async def delete_integration(
    integrationId: str, request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[list[Integration]]:
    rows = await service.delete_integration(session, principal, integrationId)
    return DataResponse(data=await service.present(session, rows, _box(request), principal))


# Novu's server answers set-primary with 201 while the OpenAPI document its SDKs
# are generated from promises 200, and those SDKs refuse any other status. The
# generated SDKs announce themselves in User-Agent; they get the 200 they were
# built for, every other client gets Novu's 201.
GENERATED_SDK_AGENT = "speakeasy-sdk/"


@router.post(
    "/{integrationId}/set-primary",
    status_code=201,
    response_model=DataResponse[Integration],
    summary="Set an integration as primary",
    responses={200: {"model": DataResponse[Integration], "description": "The same answer, for Novu's generated SDKs"}},
)
async def set_integration_as_primary(
    integrationId: str, request: Request, response: Response, session: SessionDep, principal: PrincipalDep
) -> DataResponse[Integration]:
    """Make the integration the only primary of its channel in its environment (and active)."""
    integration = await service.set_primary(session, principal, integrationId)
    if request.headers.get("user-agent", "").startswith(GENERATED_SDK_AGENT):
        response.status_code = 200
    return DataResponse(data=await service.present_one(session, integration, _box(request), principal))
