"""Publishing: what differs between a source environment (Development) and a target (Production), item by
item, and the chosen items published through the same promotion service as the API's diff and publish routes."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from herald.console.deps import Console, ConsoleDep
from herald.environments import service
from herald.environments.schemas import PublishEnvironmentRequest, ResourceToPublish
from herald.kit.auth import Principal
from herald.kit.errors import BadRequestError
from herald.models import Environment

router = APIRouter()

MAX_CHOSEN = 500
KIND_LABELS = {"workflow": "Workflow", "layout": "Layout", "translation": "Translation"}
ACTION_LABELS = {"added": "New", "modified": "Changed", "deleted": "Removed in the source"}
_IGNORED_FIELDS = frozenset({"_id", "id", "updatedAt", "createdAt"})


def _default_pair(environments: list[Environment]) -> tuple[Environment | None, Environment | None]:
    """Development to Production when both exist; else the first two environments."""
    by_name = {environment.name.lower(): environment for environment in environments}
    source = by_name.get("development") or (environments[0] if environments else None)
    target = by_name.get("production") or next((env for env in environments if env is not source), None)
    return source, target


def _chosen_pair(console: Console, source_id: str, target_id: str) -> tuple[Environment | None, Environment | None]:
    default_source, default_target = _default_pair(console.environments)
    by_id = {environment.id: environment for environment in console.environments}
    return by_id.get(source_id, default_source), by_id.get(target_id, default_target)


def _as_target(console: Console, target: Environment) -> Principal:
    """The member acting in the target, pulling from the source (a protected target takes changes so only)."""
    return dataclasses.replace(console.principal, environment_id=target.id)


def _changed_fields(pending: service.PendingChange) -> list[str]:
    source = pending.change.source.content if pending.change.source else {}
    target = pending.change.target.content if pending.change.target else {}
    return sorted(key for key in source.keys() | target.keys() if key not in _IGNORED_FIELDS and source.get(key) != target.get(key))


def _row(pending: service.PendingChange) -> dict[str, Any]:
    change = pending.change
    steps = [
        f"{part.part_type or 'step'} step “{part.source_name or part.target_name}” "
        + {"added": "added", "deleted": "removed", "modified": "changed", "moved": "moved"}.get(part.action, part.action)
        for part in pending.parts
    ]
    what = steps if change.action == "modified" else []
    if change.action == "modified":
        others = [field for field in _changed_fields(pending) if field != "steps"]
        if others:
            what.append("changed: " + ", ".join(others))
    return {
        "value": f"{change.kind.name}:{change.item.id}",
        "kind": KIND_LABELS.get(change.kind.name, change.kind.name),
        "name": change.item.name,
        "key": change.item.key,
        "action": ACTION_LABELS.get(change.action, change.action),
        "what": what,
    }


async def _page(console: Console, source: Environment | None, target: Environment | None, *, status_code: int = 200) -> Response:
    rows: list[dict[str, Any]] = []
    if source is not None and target is not None and source.id != target.id:
        _, _, pending = await service.pending_changes(console.db, _as_target(console, target), target.id, source.id)
        rows = [_row(item) for item in pending]
    return console.render(
        "publish.html",
        title="Publish",
        status_code=status_code,
        source=source,
        target=target,
        rows=rows,
        may_publish=target is not None and console.allows("environments.publish", target),
    )


@router.get("/environments/publish")
async def publish_page(console: ConsoleDep, source: str = "", target: str = "") -> Response:
    console.authorize("environments.read")
    chosen_source, chosen_target = _chosen_pair(console, source[:64], target[:64])
    if chosen_source is not None and chosen_target is not None and chosen_source.id == chosen_target.id:
        console.fail("target", "Choose a target other than the source")
    return await _page(console, chosen_source, chosen_target)


@router.post("/environments/publish")
async def publish(console: ConsoleDep) -> Response:
    form = await console.form()
    source, target = _chosen_pair(console, console.field(form, "source", 64), console.field(form, "target", 64))
    if source is None or target is None:
        raise BadRequestError("There is no environment to publish to")
    console.authorize("environments.publish", target)
    chosen = [value for value in form.getlist("resource") if isinstance(value, str)][:MAX_CHOSEN]
    if not chosen:
        console.fail("resource", "Choose at least one change to publish")
        return await _page(console, source, target, status_code=422)
    resources = []
    for value in chosen:
        kind, _, resource_id = value.partition(":")
        resources.append(ResourceToPublish(resourceType=kind[:32], resourceId=resource_id[:200]))
    request = PublishEnvironmentRequest(sourceEnvironmentId=source.id, resources=resources)
    answer = await service.publish(console.db, _as_target(console, target), target.id, request)
    published = [
        {"type": synced.resourceType, "id": synced.resourceId, "name": synced.resourceName, "action": synced.action}
        for result in answer.results
        for synced in result.successful
    ]
    failed = [f"{item.resourceName}: {item.error}" for result in answer.results for item in result.failed]
    console.record(
        "environment.published",
        "environment",
        target.id,
        changes={"source": source.name, "target": target.name, "chosen": chosen, "published": published, "failed": failed},
    )
    summary = f"Published {answer.summary.successful} of {answer.summary.resources} to {target.name}"
    if failed:
        summary += ". Not published: " + "; ".join(failed)
    return console.redirect(f"/console/environments/publish?source={source.id}&target={target.id}", flash=summary)
