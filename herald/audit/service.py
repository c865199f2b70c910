"""The audit log: who changed what, when, written once for the API and the console.

:func:`record` adds an entry in the caller's transaction, so an entry exists
exactly when its change does (the console's handlers call it beside the
service call; herald.audit.middleware calls it for the API right after the
request's change commits). Entries are never changed or deleted
(herald/models/audit.py).

``changes`` is what the caller asked for, with every secret masked
(:func:`mask`): the integrations' secret credential fields
(herald.kit.crypto), anything whose key names a secret (``password``,
``token``, ``secret``, ``signingKey``, ...), and the value of an environment
variable marked secret. It is bounded: a body larger than
``MAX_CHANGES_BYTES`` keeps only its top-level keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from herald.audit.repository import AuditFilter, AuditRepository
from herald.kit.crypto import MASK, SECRET_CREDENTIAL_FIELDS
from herald.kit.cursor import CursorPage, CursorParams
from herald.kit.time import isoformat, utcnow
from herald.members.policy import Actor, ApiKeyActor, CliActor, MemberActor
from herald.models import AuditEntry

MAX_CHANGES_BYTES = 16 * 1024
MAX_DEPTH = 8
PAGE_SIZE = 50
# Key names that hold a secret whatever the resource (compared lower-cased, without - and _).
_SECRET_NAME = re.compile(r"(password|secret|token|apikey|privatekey|signingkey|authorization|hmac|cookie)")


def actor_type(actor: Actor) -> str:
    if isinstance(actor, MemberActor):
        return "member"
    if isinstance(actor, ApiKeyActor):
        return "api_key"
    if isinstance(actor, CliActor):
        return "cli"
    return "system"


def _secret_key(key: str) -> bool:
    return key in SECRET_CREDENTIAL_FIELDS or _SECRET_NAME.search(key.lower().replace("-", "").replace("_", "")) is not None


def mask(value: Any, depth: int = 0) -> Any:
    """``value`` with every secret replaced by ``****`` (see the module's docstring)."""
    if depth > MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        secret_variable = value.get("isSecret") is True or value.get("secret") is True
        masked: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            if _secret_key(name) and item not in (None, "", True, False):
                masked[name] = MASK
            elif secret_variable and name in ("value", "values") and item not in (None, ""):
                masked[name] = MASK
            else:
                masked[name] = mask(item, depth + 1)
        return masked
    if isinstance(value, list):
        return [mask(item, depth + 1) for item in value[:100]]
    if isinstance(value, str) and len(value) > 2000:
        return value[:2000] + "…"
    return value


def bounded(changes: Any) -> dict[str, Any]:
    """The masked changes as a dict, at most MAX_CHANGES_BYTES of JSON."""
    masked = mask(changes)
    if not isinstance(masked, dict):
        masked = {"value": masked}
    if len(orjson.dumps(masked, default=str)) <= MAX_CHANGES_BYTES:
        return masked
    return {"truncated": True, "keys": [str(key)[:100] for key in list(masked)[:50]]}


def record(
    session: AsyncSession,
    actor: Actor,
    action: str,
    resource_type: str,
    resource_id: str | None = None,
    *,
    environment_id: str | None = None,
    changes: Any = None,
    organization_id: str | None = None,
) -> AuditEntry:
    """Add one entry to the session's transaction (it is written when that commits, or never)."""
    entry = AuditEntry(
        organization_id=organization_id or actor.organization_id,
        environment_id=environment_id,
        action=action[:100],
        actor_type=actor_type(actor),
        actor_email=actor.email if isinstance(actor, MemberActor) else None,
        actor_id=(
            actor.member_id
            if isinstance(actor, MemberActor)
            else actor.api_key_id
            if isinstance(actor, ApiKeyActor)
            else None
        ),
        actor_environment_id=actor.environment_id if isinstance(actor, ApiKeyActor) else None,
        resource_type=resource_type[:64],
        resource_id=resource_id[:200] if resource_id else None,
        changes=bounded(changes) if changes is not None else {},
        created_at=utcnow(),
    )
    AuditRepository(session).add(entry)
    return entry


@dataclass
class AuditPage:
    entries: list[AuditEntry]
    # The id of the last entry, to pass back for the next page; None at the end.
    next: str | None


async def list_entries(
    session: AsyncSession,
    organization_id: str,
    *,
    after: str | None = None,
    limit: int = PAGE_SIZE,
    filters: AuditFilter = AuditFilter(),
    environment_or_organization: str | None = None,
) -> AuditPage:
    """A page of the log, newest first; ``after`` is the id of the last entry of the page before."""
    repository = AuditRepository(session)
    before: tuple[datetime, str] | None = None
    if after:
        anchor = await repository.entry(organization_id, after)
        if anchor is None:
            return AuditPage([], None)
        before = (anchor.created_at, anchor.id)
    rows = list(
        await repository.page(
            organization_id,
            limit=limit + 1,
            before=before,
            filters=filters,
            environment_or_organization=environment_or_organization,
        )
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return AuditPage(rows, rows[-1].id if more and rows else None)


async def api_page(session: AsyncSession, organization_id: str, environment_id: str, params: CursorParams) -> CursorPage:
    """What ``GET /v1/audit-logs`` answers an API key: its environment's entries and the organization's."""
    return await AuditRepository(session).cursor_page(organization_id, environment_id, params)


def to_api(entry: AuditEntry) -> dict[str, Any]:
    """An entry as ``GET /v1/audit-logs`` answers it."""
    return {
        "_id": entry.id,
        "action": entry.action,
        "actor": {
            "type": entry.actor_type,
            "email": entry.actor_email,
            "id": entry.actor_id,
            "environmentId": entry.actor_environment_id,
        },
        "resource": {"type": entry.resource_type, "id": entry.resource_id},
        "environmentId": entry.environment_id,
        "createdAt": isoformat(entry.created_at),
        "changes": entry.changes,
    }
