"""Context use cases, and the resolution of a trigger's or a subscription's ``context``.

A ``context`` names one context per type: ``{"tenant": "acme"}`` or
``{"tenant": {"id": "acme", "data": {...}}}``. Naming one makes it exist (a
context not stored yet is created, with the data given or none); the object
form with ``data`` also replaces the stored data. What is kept on a message or
a subscription is the list of keys, ``type:id``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.contexts.repository import ContextRepository
from herald.contexts.schemas import (
    CONTEXT_ID_PATTERN,
    CONTEXT_TYPE_PATTERN,
    MAX_CONTEXT_PART,
    ContextEntity,
    CreateContextRequest,
)
from herald.kit.auth import Principal
from herald.kit.cursor import CursorPage, CursorParams
from herald.kit.errors import ConflictError, NotFoundError, ValidationFailed
from herald.kit.time import isoformat, utcnow
from herald.models import Context

MAX_CONTEXTS = 5
_TYPE = re.compile(CONTEXT_TYPE_PATTERN)
_ID = re.compile(CONTEXT_ID_PATTERN)


def to_schema(context: Context) -> ContextEntity:
    return ContextEntity(
        type=context.type,
        id=context.key,
        data=context.data or {},
        createdAt=isoformat(context.created_at) or "",
        updatedAt=isoformat(context.updated_at) or "",
    )


def _not_found(type_: str, key: str) -> NotFoundError:
    return NotFoundError(f"Context with type '{type_}' and id '{key}' not found")


async def require_context(session: AsyncSession, principal: Principal, type_: str, key: str) -> Context:
    context = await ContextRepository(session).get(principal.environment_id, type_, key)
    if context is None:
        raise _not_found(type_, key)
    return context


async def create_context(session: AsyncSession, principal: Principal, request: CreateContextRequest) -> Context:
    repository = ContextRepository(session)
    exists = ConflictError(f"Context with type '{request.type}' and id '{request.id}' already exists")
    if await repository.get(principal.environment_id, request.type, request.id) is not None:
        raise exists
    now = utcnow()
    context = Context(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        type=request.type,
        key=request.id,
        data=request.data,
        created_at=now,
        updated_at=now,
    )
    if not await repository.insert(context):
        raise exists
    return context


async def list_contexts(
    session: AsyncSession, principal: Principal, params: CursorParams, *, key: str | None, search: str | None
) -> CursorPage:
    return await ContextRepository(session).page(principal.environment_id, params, key=key, search=search)


async def update_context(
    session: AsyncSession, principal: Principal, type_: str, key: str, data: dict[str, Any]
) -> Context:
    """Replaces the context's data (Novu's PATCH sets ``data`` whole)."""
    context = await require_context(session, principal, type_, key)
    context.data = data
    context.updated_at = utcnow()
    await session.flush()
    return context


async def delete_context(session: AsyncSession, principal: Principal, type_: str, key: str) -> None:
    repository = ContextRepository(session)
    await repository.delete(await require_context(session, principal, type_, key))


def parse_context(raw: Mapping[str, Any], field: str = "context") -> list[tuple[str, str, dict[str, Any] | None]]:
    """(type, id, data or None) for each entry of a ``context``; a malformed one is a 422 naming it."""
    if len(raw) > MAX_CONTEXTS:
        raise ValidationFailed.field(field, f"{field} may have at most {MAX_CONTEXTS} keys", len(raw))
    entries: list[tuple[str, str, dict[str, Any] | None]] = []
    for type_, value in raw.items():
        data: dict[str, Any] | None = None
        if isinstance(value, str):
            key = value
        elif isinstance(value, Mapping) and isinstance(value.get("id"), str):
            key = value["id"]
            given = value.get("data")
            if given is not None and not isinstance(given, Mapping):
                raise ValidationFailed.field(f"{field}.{type_}.data", f"{field}.{type_}.data must be an object", given)
            data = dict(given) if given is not None else None
        elif hasattr(value, "id") and isinstance(value.id, str):  # a parsed ContextReference
            key = value.id
            data = value.data
        else:
            raise ValidationFailed.field(
                f"{field}.{type_}", f"{field}.{type_} must be an id or an object {{id, data}}", value
            )
        if not (len(type_) <= MAX_CONTEXT_PART and _TYPE.match(type_)):
            raise ValidationFailed.field(
                field, f"{field} type '{type_}' must be letters, digits, hyphens or underscores", type_
            )
        if not (len(key) <= MAX_CONTEXT_PART and _ID.match(key)):
            raise ValidationFailed.field(
                f"{field}.{type_}", f"{field}.{type_} id must be letters, digits, -, _, ., : or @", key
            )
        entries.append((type_, key, data))
    return entries


def context_keys(entries: list[tuple[str, str, dict[str, Any] | None]]) -> list[str]:
    """The keys in the order of their types: PostgreSQL's JSONB keeps no order of an object's keys,
    so a trigger's context, stored as one, is listed this way on every store."""
    return sorted(f"{type_}:{key}" for type_, key, _ in entries)


async def resolve(
    session: AsyncSession,
    environment_id: str,
    organization_id: str,
    entries: list[tuple[str, str, dict[str, Any] | None]],
) -> None:
    """Make the named contexts exist in the environment, with the data given where given."""
    if entries:
        await ContextRepository(session).upsert_many(environment_id, organization_id, entries)
