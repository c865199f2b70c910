"""Tenant models, named as Novu's tenant DTOs."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from herald.kit.schemas import RequestSchema, Schema


class Tenant(Schema):
    id: str = Field(alias="_id")
    identifier: str
    name: str | None = None
    data: dict[str, Any] | None = None
    environment_id: str = Field(alias="_environmentId")
    organization_id: str = Field(alias="_organizationId")
    createdAt: str
    updatedAt: str


class CreateTenantRequest(RequestSchema):
    identifier: str = Field(min_length=1, max_length=255)
    name: str = Field(min_length=1, max_length=255)
    data: dict[str, Any] | None = None


class UpdateTenantRequest(RequestSchema):
    """Only the fields sent change; ``identifier`` renames the tenant."""

    identifier: str | None = Field(default=None, min_length=1, max_length=255)
    name: str | None = Field(default=None, min_length=1, max_length=255)
    data: dict[str, Any] | None = None
