"""Environment use cases: Novu's v1 environment management and v2 change management (diff, publish).

Development and Production are the pair every organization is made with
(herald/organizations): Production's parent is Development, and neither can
be deleted or renamed (Herald's own commands find them by name). Other
environments are Development's children, of type ``dev``, as Novu makes custom
environments; an organization has at most ``HERALD_MAX_ENVIRONMENTS``.

A protected environment (Production, from the start) is changed only by its
own keys: updating, deleting and publishing into it ask
herald/environments/protection.py. Diffs and dry runs only read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.environments import promotion, protection
from herald.environments.repository import EnvironmentRepository
from herald.environments.schemas import (
    ApiKey,
    CreateEnvironmentRequest,
    DiffEnvironmentRequest,
    DiffEnvironmentResponse,
    DiffSummary,
    EnvironmentDiffSummary,
    EnvironmentResponse,
    EnvironmentTag,
    FailedResource,
    PublishEnvironmentRequest,
    PublishEnvironmentResponse,
    PublishSummary,
    ResourceChanges,
    ResourceDiff,
    ResourceDiffResult,
    ResourceInfo,
    SkippedResource,
    SyncedResource,
    SyncResult,
    UpdateEnvironmentRequest,
)
from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.errors import BadRequestError, ConflictError, NotFoundError
from herald.kit.text import slugify
from herald.kit.time import isoformat
from herald.members.policy import MemberActor
from herald.models import Environment
from herald.organizations.service import ENVIRONMENT_NAMES, create_environment

DEVELOPMENT, PRODUCTION = ENVIRONMENT_NAMES


def _development(environments: Sequence[Environment]) -> Environment | None:
    return next((env for env in environments if env.name == DEVELOPMENT), None)


def to_schema(
    environment: Environment, environments: Sequence[Environment], api_key: str | None = None
) -> EnvironmentResponse:
    development = _development(environments)
    parent = None if development is None or development.id == environment.id else development.id
    return EnvironmentResponse.model_validate(
        {
            "_id": environment.id,
            "name": environment.name,
            "_organizationId": environment.organization_id,
            "identifier": environment.identifier,
            "type": "prod" if environment.name == PRODUCTION else "dev",
            "protected": environment.protected,
            "apiKeys": [ApiKey(key=api_key, _userId=environment.organization_id)] if api_key else None,
            "_parentId": parent,
            "slug": slugify(environment.name) or environment.id,
        }
    )


async def require_environment(session: AsyncSession, principal: Principal, environment_id: str) -> Environment:
    environment = await EnvironmentRepository(session).get(principal.organization_id, environment_id)
    if environment is None:
        raise NotFoundError(f"Environment with id {environment_id} not found")
    return environment


async def list_environments(session: AsyncSession, principal: Principal) -> list[EnvironmentResponse]:
    environments = await EnvironmentRepository(session).list(principal.organization_id)
    return [to_schema(env, environments) for env in environments]


async def create(
    session: AsyncSession,
    principal: Principal,
    request: CreateEnvironmentRequest,
    box: SecretBox,
    *,
    max_environments: int,
) -> EnvironmentResponse:
    """A new environment, unless the organization has ``max_environments`` already.

    Past the cap the answer is 400, as Novu answers its own counted limits
    (``Workflow limit exceeded``): the request is well formed and the caller may
    create environments; the organization is full.
    """
    repository = EnvironmentRepository(session)
    name = request.name.strip()
    if not name:
        raise BadRequestError("Environment name must not be blank")
    if request.parentId is not None:
        await require_environment(session, principal, request.parentId)
    # Concurrent creations count one after the other, so together they cannot pass the cap.
    await repository.lock_creation(principal.organization_id)
    if await repository.count(principal.organization_id) >= max_environments:
        raise BadRequestError(
            f"Environment limit reached: an organization may have at most {max_environments} environments "
            "(HERALD_MAX_ENVIRONMENTS)"
        )
    if await repository.name_taken(principal.organization_id, name):
        raise ConflictError(f"Environment with name {name} already exists")
    try:
        async with session.begin_nested():
            made = await create_environment(session, principal.organization_id, name, box)
    except IntegrityError as exc:  # a concurrent request made it first
        raise ConflictError(f"Environment with name {name} already exists") from exc
    return to_schema(made.environment, await repository.list(principal.organization_id), made.api_key)


async def update(
    session: AsyncSession, principal: Principal, environment_id: str, request: UpdateEnvironmentRequest
) -> EnvironmentResponse:
    repository = EnvironmentRepository(session)
    environment = await require_environment(session, principal, environment_id)
    protection.require_change(principal, environment)
    if request.protected is not None and request.protected != environment.protected:
        protection.require_protection_change(principal, environment)
        environment.protected = request.protected
    if request.parentId is not None:
        await require_environment(session, principal, request.parentId)
    name = request.name.strip() if request.name is not None else None
    if name is not None and name != environment.name:
        if environment.name in ENVIRONMENT_NAMES:
            raise BadRequestError(f"The {environment.name} environment cannot be renamed")
        if not name:
            raise BadRequestError("Environment name must not be blank")
        if await repository.name_taken(principal.organization_id, name, excluding_id=environment.id):
            raise ConflictError(f"Environment with name {name} already exists")
        environment.name = name
    if request.identifier is not None and request.identifier != environment.identifier:
        if await repository.identifier_taken(request.identifier, excluding_id=environment.id):
            raise ConflictError(f"Environment with identifier {request.identifier} already exists")
        environment.identifier = request.identifier
    try:
        await session.flush()
    except IntegrityError as exc:  # a concurrent request took the name or identifier first
        raise ConflictError("Environment name or identifier already exists") from exc
    return to_schema(environment, await repository.list(principal.organization_id))


async def delete(session: AsyncSession, principal: Principal, environment_id: str) -> None:
    """Everything of the environment goes with it; its keys stop working (in other API
    processes once their cache of keys, ``HERALD_API_KEY_CACHE_SECONDS``, has passed)."""
    environment = await require_environment(session, principal, environment_id)
    if environment.name in ENVIRONMENT_NAMES:
        raise BadRequestError(f"The {environment.name} environment cannot be deleted")
    protection.require_change(principal, environment)
    await EnvironmentRepository(session).delete(environment)


async def tags(session: AsyncSession, principal: Principal, environment_id: str) -> list[EnvironmentTag]:
    environment = await require_environment(session, principal, environment_id)
    return [EnvironmentTag(name=tag) for tag in await EnvironmentRepository(session).workflow_tags(environment.id)]


async def _pair(
    session: AsyncSession, principal: Principal, target_id: str, source_id: str | None
) -> tuple[Environment, Environment]:
    target = await require_environment(session, principal, target_id)
    source = await require_environment(session, principal, source_id or principal.environment_id)
    if source.id == target.id:
        raise BadRequestError("Source and target environments must differ")
    return source, target


def _info(item: promotion.PromotableItem | None) -> ResourceInfo | None:
    if item is None:
        return None
    return ResourceInfo(id=item.id, name=item.name, updatedAt=isoformat(item.updated_at))


def _part_diff(kind: promotion.PromotableKind, part: promotion.PartChange) -> ResourceDiff:
    return ResourceDiff(
        resourceType=kind.resource_type,
        action=part.action,
        sourceResource=ResourceInfo(id=part.source_id, name=part.source_name) if part.source_id else None,
        targetResource=ResourceInfo(id=part.target_id, name=part.target_name) if part.target_id else None,
        diffs=ResourceChanges(previous=part.previous, new=part.new) if part.action != "unchanged" else None,
        stepType=part.part_type,
        previousIndex=part.previous_index,
        newIndex=part.new_index,
    )


async def diff(
    session: AsyncSession, principal: Principal, target_id: str, request: DiffEnvironmentRequest
) -> DiffEnvironmentResponse:
    source, target = await _pair(session, principal, target_id, request.sourceEnvironmentId)
    changes = await promotion.compare(session, source, target)
    resources = []
    for change in changes:
        detail = None
        if change.action != "unchanged":
            detail = ResourceChanges(
                previous=change.target.content if change.target else None,
                new=change.source.content if change.source else None,
            )
        entries = [
            ResourceDiff(
                resourceType=change.kind.resource_type,
                action=change.action,
                sourceResource=_info(change.source),
                targetResource=_info(change.target),
                diffs=detail,
            )
        ]
        part_changes = getattr(change.kind, "part_changes", None)
        if part_changes is not None:
            entries += [_part_diff(change.kind, part) for part in part_changes(change.source, change.target)]
        counts = {"added": 0, "modified": 0, "deleted": 0, "unchanged": 0}
        for entry in entries:
            # A step that only moved counts as modified: its workflow changed.
            counts["modified" if entry.action == "moved" else entry.action] += 1
        resources.append(
            ResourceDiffResult(
                resourceType=change.kind.resource_type,
                sourceResource=_info(change.source),
                targetResource=_info(change.target),
                changes=entries,
                summary=DiffSummary(**counts),
            )
        )
    total_changes = sum(change.action != "unchanged" for change in changes)
    return DiffEnvironmentResponse(
        sourceEnvironmentId=source.id,
        targetEnvironmentId=target.id,
        resources=resources,
        summary=EnvironmentDiffSummary(
            totalEntities=len(changes), totalChanges=total_changes, hasChanges=total_changes > 0
        ),
    )


@dataclass(frozen=True)
class PendingChange:
    """One item publishing would change in the target, with the changes to its parts (a workflow's steps)."""

    change: promotion.Change
    parts: list[promotion.PartChange]


async def pending_changes(
    session: AsyncSession, principal: Principal, target_id: str, source_id: str | None
) -> tuple[Environment, Environment, list[PendingChange]]:
    """The source, the target, and what differs between them, item by item (what ``diff`` answers, by kind)."""
    source, target = await _pair(session, principal, target_id, source_id)
    pending = []
    for change in await promotion.compare(session, source, target):
        if change.action == "unchanged":
            continue
        part_changes = getattr(change.kind, "part_changes", None)
        parts = part_changes(change.source, change.target) if part_changes is not None else []
        pending.append(PendingChange(change, [part for part in parts if part.action != "unchanged"]))
    return source, target, pending


def _sync_fields(outcome: promotion.Outcome) -> dict[str, str]:
    item = outcome.change.item
    return {"resourceType": outcome.change.kind.resource_type, "resourceId": item.id, "resourceName": item.name}


async def publish(
    session: AsyncSession, principal: Principal, target_id: str, request: PublishEnvironmentRequest
) -> PublishEnvironmentResponse:
    """Copy the source's changes into the target: all of them, or the ``resources`` named.

    A resource is named by its kind (``resourceType``: a kind's name, or the
    answered ``REGULAR`` that names every kind, as novu-py can only send that)
    and its id in either environment or its key (a workflow's trigger
    identifier, a layout's identifier, ``workflowId:locale``). A name that
    matches nothing is refused, so a typo never publishes silently nothing.
    A protected target takes a publish only from its own keys (pulling from
    ``sourceEnvironmentId``); a dry run writes nothing and is open to all.
    """
    source, target = await _pair(session, principal, target_id, request.sourceEnvironmentId)
    if not request.dryRun:
        protection.require_change(principal, target)
    changes = await promotion.compare(session, source, target)
    if request.resources is not None:
        chosen = []
        for wanted in request.resources:
            named = promotion.kinds_named(wanted.resourceType)
            if not named:
                raise BadRequestError(f"Unknown resourceType {wanted.resourceType}")
            found = [c for c in changes if c.kind in named and c.named_by(wanted.resourceId)]
            if not found:
                raise NotFoundError(f"Resource {wanted.resourceId} of type {wanted.resourceType} not found")
            chosen += [c for c in found if c not in chosen]
        changes = chosen
    outcomes = await promotion.publish(session, changes, target, dry_run=request.dryRun)
    results = []
    for kind in promotion.kinds():
        mine = [o for o in outcomes if o.change.kind is kind]
        # Workflows are always answered (as Novu does); another kind only when it had something to publish.
        if not mine and (request.resources is not None or kind.name != "workflow"):
            continue

        results.append(
            SyncResult(
                resourceType=kind.resource_type,
                successful=[
                    SyncedResource(**_sync_fields(o), action=o.detail) for o in mine if o.status == "successful"
                ],
                failed=[FailedResource(**_sync_fields(o), error=o.detail) for o in mine if o.status == "failed"],
                skipped=[SkippedResource(**_sync_fields(o), reason=o.detail) for o in mine if o.status == "skipped"],
                totalProcessed=len(mine),
            )
        )
    return PublishEnvironmentResponse(
        results=results,
        summary=PublishSummary(
            resources=len(outcomes),
            successful=sum(o.status == "successful" for o in outcomes),
            failed=sum(o.status == "failed" for o in outcomes),
            skipped=sum(o.status == "skipped" for o in outcomes),
        ),
    )


async def set_protected(session: AsyncSession, actor: MemberActor, environment_id: str, protected: bool) -> Environment:
    """A console member protects an environment or lifts its protection (the API's keys use :func:`update`)."""
    environment = await EnvironmentRepository(session).get(actor.organization_id, environment_id)
    if environment is None:
        raise NotFoundError(f"Environment with id {environment_id} not found")
    protection.require_member_protection_change(actor, environment)
    environment.protected = protected
    await session.flush()
    return environment
