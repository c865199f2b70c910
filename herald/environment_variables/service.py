"""Environment variable use cases (Novu's /v1/environment-variables).

A variable is a key of the organization with a value for each environment
that has one; a step renders ``{{env.KEY}}`` as the value for the environment
of its run (herald/engine). A secret variable's values are sealed at rest
(herald.kit.crypto.SecretBox) and answered masked as integration secrets are:
the caller's own environment's value as ``abc****wxyz`` when long enough,
another environment's as ``****``. An update that sends a mask back keeps the
stored value. Turning a secret into a plain variable drops its stored values
unless new ones are sent, so no secret is ever answered in clear.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.environment_variables.repository import EnvironmentVariableRepository
from herald.environment_variables.schemas import (
    CreateEnvironmentVariableRequest,
    EnvironmentVariableResponse,
    EnvironmentVariableUsage,
    EnvironmentVariableValue,
    EnvironmentVariableWorkflow,
    UpdateEnvironmentVariableRequest,
)
from herald.kit.auth import Principal
from herald.kit.crypto import MASK, SecretBox, SecretKeyMismatch
from herald.kit.errors import BadRequestError, ConflictError, NotFoundError
from herald.kit.time import isoformat, utcnow
from herald.models import EnvironmentVariable


def _masked(box: SecretBox, principal: Principal, environment_id: str, stored: str) -> str:
    try:
        return box.mask(stored, reveal_edges=environment_id == principal.environment_id)
    except SecretKeyMismatch:
        return MASK


def to_schema(variable: EnvironmentVariable, principal: Principal, box: SecretBox) -> EnvironmentVariableResponse:
    values = [
        {
            "_environmentId": environment_id,
            "value": _masked(box, principal, environment_id, value) if variable.is_secret else value,
        }
        for environment_id, value in (variable.values or {}).items()
    ]
    return EnvironmentVariableResponse.model_validate(
        {
            "_id": variable.id,
            "_organizationId": variable.organization_id,
            "key": variable.key,
            "type": variable.type,
            "isSecret": variable.is_secret,
            "values": values,
            "createdAt": isoformat(variable.created_at),
            "updatedAt": isoformat(variable.updated_at),
        }
    )


async def require_variable(session: AsyncSession, principal: Principal, key: str) -> EnvironmentVariable:
    variable = await EnvironmentVariableRepository(session).get_by_key(principal.organization_id, key)
    if variable is None:
        raise NotFoundError(f"Environment variable with key {key} not found")
    return variable


async def _stored_values(
    session: AsyncSession,
    principal: Principal,
    values: Sequence[EnvironmentVariableValue],
    *,
    secret: bool,
    box: SecretBox,
    kept: dict[str, str] | None = None,
) -> dict[str, str]:
    """The values as stored: each environment the organization's, secrets sealed, masks sent back kept."""
    known = await EnvironmentVariableRepository(session).environment_ids(principal.organization_id)
    stored: dict[str, str] = {}
    for entry in values:
        if entry.environment_id not in known:
            raise BadRequestError(f"Environment with id {entry.environment_id} not found")
        if entry.environment_id in stored:
            raise BadRequestError(f"Environment {entry.environment_id} is given more than one value")
        previous = (kept or {}).get(entry.environment_id)
        if secret and previous is not None and MASK in entry.value:
            if entry.value == _masked(box, principal, entry.environment_id, previous):
                stored[entry.environment_id] = previous
                continue
        stored[entry.environment_id] = box.seal(entry.value) if secret else entry.value
    return stored


def _exists(key: str) -> ConflictError:
    return ConflictError(f"Environment variable with key {key} already exists")


async def _flush(session: AsyncSession, key: str) -> None:
    """Write now; a concurrent request that took the key first fails on the unique index."""
    try:
        await session.flush()
    except IntegrityError as exc:
        raise _exists(key) from exc


async def create(
    session: AsyncSession, principal: Principal, request: CreateEnvironmentVariableRequest, box: SecretBox
) -> EnvironmentVariable:
    repository = EnvironmentVariableRepository(session)
    if await repository.get_by_key(principal.organization_id, request.key) is not None:
        raise _exists(request.key)
    now = utcnow()
    variable = EnvironmentVariable(
        organization_id=principal.organization_id,
        key=request.key,
        type=request.type,
        is_secret=request.isSecret,
        values=await _stored_values(session, principal, request.values or [], secret=request.isSecret, box=box),
        created_at=now,
        updated_at=now,
    )
    repository.add(variable)
    await _flush(session, request.key)
    return variable


async def list_variables(
    session: AsyncSession, principal: Principal, search: str | None
) -> Sequence[EnvironmentVariable]:
    return await EnvironmentVariableRepository(session).list(principal.organization_id, search)


async def update(
    session: AsyncSession, principal: Principal, key: str, request: UpdateEnvironmentVariableRequest, box: SecretBox
) -> EnvironmentVariable:
    repository = EnvironmentVariableRepository(session)
    variable = await require_variable(session, principal, key)
    if request.key is not None and request.key != variable.key:
        if await repository.get_by_key(principal.organization_id, request.key) is not None:
            raise _exists(request.key)
        variable.key = request.key
    if request.type is not None:
        variable.type = request.type
    was_secret = variable.is_secret
    secret = was_secret if request.isSecret is None else request.isSecret
    stored = dict(variable.values or {})
    if request.values is not None:
        kept = stored if was_secret else None
        variable.values = await _stored_values(session, principal, request.values, secret=secret, box=box, kept=kept)
    elif secret and not was_secret:
        variable.values = {env_id: box.seal(value) for env_id, value in stored.items()}
    elif was_secret and not secret:
        variable.values = {}
    variable.is_secret = secret
    variable.updated_at = utcnow()
    await _flush(session, variable.key)
    return variable


async def delete(session: AsyncSession, principal: Principal, key: str) -> None:
    variable = await require_variable(session, principal, key)
    await EnvironmentVariableRepository(session).delete(variable)


def reference_pattern(key: str) -> re.Pattern[str]:
    """``env.KEY`` (or ``env['KEY']``) inside a Liquid output or tag: what a template reads a variable by."""
    name = re.escape(key)
    return re.compile(r"\{[{%][^}%]*\benv(?:\." + name + r"\b|\[\s*['\"]" + name + r"['\"]\s*\])")


def _texts(value: Any) -> Iterator[str]:
    """Every string inside a step (its template, variants, metadata): wherever a template may be."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


async def usage(session: AsyncSession, principal: Principal, key: str) -> EnvironmentVariableUsage:
    """The caller's environment's workflows whose steps (or their variants) read the variable."""
    variable = await require_variable(session, principal, key)
    pattern = reference_pattern(variable.key)
    workflows = await EnvironmentVariableRepository(session).workflows(principal.environment_id)
    return EnvironmentVariableUsage(
        workflows=[
            EnvironmentVariableWorkflow(name=workflow.name, workflowId=workflow.trigger_identifier)
            for workflow in workflows
            if any(pattern.search(text) for text in _texts(workflow.steps or []))
        ]
    )
