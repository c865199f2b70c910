"""Tenant use cases (Novu's v1 tenants)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.auth import Principal
from herald.kit.errors import ConflictError, NotFoundError
from herald.kit.time import isoformat, utcnow
from herald.models import Tenant
from herald.tenants.repository import TenantRepository
from herald.tenants.schemas import CreateTenantRequest, UpdateTenantRequest
from herald.tenants.schemas import Tenant as TenantSchema


def to_schema(tenant: Tenant) -> TenantSchema:
    return TenantSchema.model_validate(
        {
            "_id": tenant.id,
            "identifier": tenant.identifier,
            "name": tenant.name,
            "data": tenant.data,
            "_environmentId": tenant.environment_id,
            "_organizationId": tenant.organization_id,
            "createdAt": isoformat(tenant.created_at),
            "updatedAt": isoformat(tenant.updated_at),
        }
    )


def _exists(principal: Principal, identifier: str) -> ConflictError:
    return ConflictError(
        f"Tenant with identifier: {identifier} already exists under environment {principal.environment_id}"
    )


async def require_tenant(session: AsyncSession, principal: Principal, identifier: str) -> Tenant:
    tenant = await TenantRepository(session).get_by_identifier(principal.environment_id, identifier)
    if tenant is None:
        raise NotFoundError(
            f"Tenant with identifier: {identifier} does not exist under environment {principal.environment_id}"
        )
    return tenant


async def create_tenant(session: AsyncSession, principal: Principal, request: CreateTenantRequest) -> Tenant:
    repository = TenantRepository(session)
    if await repository.get_by_identifier(principal.environment_id, request.identifier) is not None:
        raise _exists(principal, request.identifier)
    now = utcnow()
    tenant = Tenant(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        identifier=request.identifier,
        name=request.name,
        data=dict(request.data) if request.data is not None else None,
        created_at=now,
        updated_at=now,
    )
    if not await repository.insert(tenant):
        raise _exists(principal, request.identifier)
    return tenant


async def list_tenants(
    session: AsyncSession, principal: Principal, *, offset: int, limit: int
) -> tuple[Sequence[Tenant], int]:
    repository = TenantRepository(session)
    rows = await repository.list_page(principal.environment_id, offset=offset, limit=limit)
    return rows, await repository.count(principal.environment_id)


async def update_tenant(
    session: AsyncSession, principal: Principal, identifier: str, request: UpdateTenantRequest
) -> Tenant:
    """Change the fields sent; ``data`` is replaced as a whole (null clears it)."""
    repository = TenantRepository(session)
    tenant = await require_tenant(session, principal, identifier)
    given = request.model_fields_set
    changed = False
    new_identifier = request.identifier
    if new_identifier is not None and new_identifier != tenant.identifier:
        if await repository.get_by_identifier(principal.environment_id, new_identifier) is not None:
            raise _exists(principal, new_identifier)
        tenant.identifier = new_identifier
        changed = True
    if request.name is not None and request.name != tenant.name:
        tenant.name = request.name
        changed = True
    if "data" in given and request.data != tenant.data:
        tenant.data = dict(request.data) if request.data is not None else None
        changed = True
    if changed:
        tenant.updated_at = utcnow()
        if not await repository.save():
            raise _exists(principal, tenant.identifier)
    return tenant


async def delete_tenant(session: AsyncSession, principal: Principal, identifier: str) -> None:
    tenant = await require_tenant(session, principal, identifier)
    await TenantRepository(session).delete(tenant)
