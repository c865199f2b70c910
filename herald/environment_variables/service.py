"""Environment variable use cases (Novu's /v1/environment-variables).

A variable is a key of the organization with a value for each environment
that has one; a step renders ``{{env.KEY}}`` as the value for the environment
of its run (herald/engine). A secret variable's values are sealed at rest
(herald.kit.crypto.SecretBox) and answered masked as integration secrets are:
the caller's own environment's value as ``abc****wxyz`` when long enough,
another environment's as ``****``. An update that sends a mask back keeps the
stored value. Turning a secret into a plain variable drops its stored values
unless new ones are sent, so no secret is ever answered in clear.

The variable is the organization's, but each value belongs to its
environment: a change that sets, replaces or drops a protected environment's
value, or that renames the variable, changes its type or its secrecy while a
protected environment has a value, needs that environment's own key
(herald/environments/protection.py).
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
from herald.environments import protection
from herald.kit.auth import Principal
from herald.kit.crypto import MASK, SecretBox, SecretKeyMismatch
from herald.kit.errors import BadRequestError, ConflictError, NotFoundError
from herald.kit.time import isoformat, utcnow
from herald.models import Environment, EnvironmentVariable


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


def _stored_values(
    principal: Principal,
    values: Sequence[EnvironmentVariableValue],
    *,
    environments: dict[str, Environment],
    secret: bool,
    box: SecretBox,
    kept: dict[str, str] | None = None,
) -> dict[str, str]:
    """The values as stored: each environment the organization's, secrets sealed, masks sent back kept."""
    stored: dict[str, str] = {}
    for entry in values:
        if entry.environment_id not in environments:
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


def _require_change(
    principal: Principal,
    environments: dict[str, Environment],
    before: dict[str, str],
    after: dict[str, str],
    *,
    reshaped: bool,
) -> None:
    """Refuse unless the caller may change every environment whose value the change touches.

    A value is touched when it is set, replaced or dropped; every value is
    when the variable itself changes (its key, type or secrecy), since each
    environment's templates then read something else.
    """
    touched = before.keys() | after.keys()
    if not reshaped:
        touched = {environment_id for environment_id in touched if before.get(environment_id) != after.get(environment_id)}
    protection.require_change(principal, [environments[e] for e in sorted(touched) if e in environments])


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
    environments = await repository.environments(principal.organization_id)
    values = _stored_values(
        principal, request.values or [], environments=environments, secret=request.isSecret, box=box
    )
    _require_change(principal, environments, {}, values, reshaped=False)
    now = utcnow()
    variable = EnvironmentVariable(
        organization_id=principal.organization_id,
        key=request.key,
        type=request.type,
        is_secret=request.isSecret,
        values=values,
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
    new_key = variable.key
    if request.key is not None and request.key != variable.key:
        if await repository.get_by_key(principal.organization_id, request.key) is not None:
            raise _exists(request.key)
        new_key = request.key
    new_type = variable.type if request.type is None else request.type
    was_secret = variable.is_secret
    secret = was_secret if request.isSecret is None else request.isSecret
    environments = await repository.environments(principal.organization_id)
    stored = dict(variable.values or {})
    values = stored
    if request.values is not None:
        kept = stored if was_secret else None
        values = _stored_values(
            principal, request.values, environments=environments, secret=secret, box=box, kept=kept
        )
    elif secret and not was_secret:
        values = {env_id: box.seal(value) for env_id, value in stored.items()}
    elif was_secret and not secret:
        values = {}
    reshaped = (new_key, new_type, secret) != (variable.key, variable.type, was_secret)
    _require_change(principal, environments, stored, values, reshaped=reshaped)
    variable.key = new_key
    variable.type = new_type
    variable.values = values
    variable.is_secret = secret
    variable.updated_at = utcnow()
    await _flush(session, variable.key)
    return variable


async def delete(session: AsyncSession, principal: Principal, key: str) -> None:
    variable = await require_variable(session, principal, key)
    repository = EnvironmentVariableRepository(session)
    environments = await repository.environments(principal.organization_id)
    _require_change(principal, environments, dict(variable.values or {}), {}, reshaped=False)
    await repository.delete(variable)


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


def _using(workflows: Sequence[Any], key: str) -> list[EnvironmentVariableWorkflow]:
    pattern = reference_pattern(key)
    return [
        EnvironmentVariableWorkflow(name=workflow.name, workflowId=workflow.trigger_identifier)
        for workflow in workflows
        if any(pattern.search(text) for text in _texts(workflow.steps or []))
    ]


async def usage(session: AsyncSession, principal: Principal, key: str) -> EnvironmentVariableUsage:
    """The caller's environment's workflows whose steps (or their variants) read the variable."""
    variable = await require_variable(session, principal, key)
    workflows = await EnvironmentVariableRepository(session).workflows(principal.environment_id)
    return EnvironmentVariableUsage(workflows=_using(workflows, variable.key))


async def usage_of_each(
    session: AsyncSession, principal: Principal, variables: Sequence[EnvironmentVariable]
) -> dict[str, list[EnvironmentVariableWorkflow]]:
    """For each variable's key, the caller's environment's workflows that read it (the workflows read once)."""
    workflows = await EnvironmentVariableRepository(session).workflows(principal.environment_id)
    return {variable.key: _using(workflows, variable.key) for variable in variables}
