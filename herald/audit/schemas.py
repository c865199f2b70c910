"""The audit log as ``GET /v1/audit-logs`` answers it (Herald's own route: Novu's is Enterprise-only)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from herald.kit.schemas import Schema


class AuditActor(Schema):
    # member, api_key, cli or system
    type: str
    # The member's email (members only).
    email: str | None
    # The member's id, or the API key's.
    id: str | None
    # The environment of the API key that acted (API keys only).
    environmentId: str | None


class AuditResource(Schema):
    type: str
    id: str | None


class AuditLogEntry(Schema):
    id: str = Field(alias="_id")
    action: str
    actor: AuditActor
    resource: AuditResource
    environmentId: str | None
    createdAt: str
    changes: dict[str, Any]


class AuditLogList(Schema):
    data: list[AuditLogEntry]
    next: str | None
    previous: str | None
    totalCount: int
    totalCountCapped: bool
