from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.pagination import PageDep, paginated
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, PaginatedResponse
from herald.tenants import service
from herald.tenants.schemas import CreateTenantRequest, Tenant, UpdateTenantRequest

IdentifierPath = Annotated[str, Path(description="The tenant's identifier")]

router = APIRouter(prefix="/v1/tenants", tags=["Tenants"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, response_model=DataResponse[Tenant], summary="Create a tenant")
async def create_tenant(body: CreateTenantRequest, session: SessionDep, principal: PrincipalDep) -> DataResponse[Tenant]:
    tenant = await service.create_tenant(session, principal, body)
    return DataResponse(data=service.to_schema(tenant))


@router.get("", response_model=PaginatedResponse[Tenant], summary="List tenants")
async def list_tenants(page: PageDep, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """The environment's tenants, newest first."""
    rows, total = await service.list_tenants(session, principal, offset=page.offset, limit=page.limit)
    return paginated([service.to_schema(row) for row in rows], page, total)


@router.get("/{identifier}", response_model=DataResponse[Tenant], summary="Get a tenant")
async def get_tenant(identifier: IdentifierPath, session: SessionDep, principal: PrincipalDep) -> DataResponse[Tenant]:
    tenant = await service.require_tenant(session, principal, identifier)
    return DataResponse(data=service.to_schema(tenant))


@router.patch("/{identifier}", response_model=DataResponse[Tenant], summary="Update a tenant")
async def update_tenant(
    identifier: IdentifierPath, body: UpdateTenantRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[Tenant]:
    tenant = await service.update_tenant(session, principal, identifier, body)
    return DataResponse(data=service.to_schema(tenant))


@router.delete("/{identifier}", status_code=204, response_class=Response, summary="Delete a tenant")
async def delete_tenant(identifier: IdentifierPath, session: SessionDep, principal: PrincipalDep) -> Response:
    await service.delete_tenant(session, principal, identifier)
    return Response(status_code=204)
