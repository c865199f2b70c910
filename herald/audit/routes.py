"""``GET /v1/audit-logs``: the audit log, read with an API key."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from herald.audit import service
from herald.audit.schemas import AuditLogList
from herald.kit.auth import PrincipalDep
from herald.kit.cursor import CursorDep
from herald.kit.db import SessionDep
from herald.kit.schemas import ERROR_RESPONSES

router = APIRouter(prefix="/v1/audit-logs", tags=["Audit log"], responses=ERROR_RESPONSES)


@router.get("", response_model=AuditLogList, summary="List the audit log")
async def list_audit_logs(cursor: CursorDep, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """The key's environment's entries and the organization-wide ones (members, invites), newest first.

    Every change made through the API or the console: who (a member's email,
    or an API key and its environment), what, which resource, when, and the
    change asked for with secrets masked. Cursor pagination as the v2 lists:
    ``after``/``before`` an entry's ``_id``.
    """
    page = await service.api_page(session, principal.organization_id, principal.environment_id, cursor)
    return page.answer([service.to_api(entry) for entry in page.items])
