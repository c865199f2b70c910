"""Subscriber preference use cases.

Everything here is about one subscriber's row (``Subscriber``), scoped to that
subscriber's environment: the API-key routes find the subscriber with
:func:`subscriber_for` (404 when another environment's), and the inbox routes
with :func:`subscriber_of_token` (the subscriber a token names), then call the
same functions with it.

Levels, as in Novu: the **global** preference (enabled, the channels the
subscriber turned on or off, a delivery schedule) and one per **workflow**
(enabled, channels). What is answered for a workflow is its channels merged as
the engine merges them (herald/engine/preferences.py): the workflow's
``preferenceSettings``, then the subscriber's own, with where each value came
from (``overrides``). Critical workflows are always delivered; their
preferences may be read and set, and change nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.preferences import CHANNELS, Preference, global_channels, workflow_channels
from herald.kit.auth import Principal, SubscriberPrincipal
from herald.kit.errors import BadRequestError, NotFoundError, ValidationFailed
from herald.kit.time import isoformat, utcnow
from herald.models import Subscriber, SubscriberPreference, Workflow
from herald.preferences.repository import PreferenceRepository
from herald.subscribers.repository import SubscriberRepository
from herald.subscribers.service import not_found_message, require_subscriber
from herald.webhooks.events import emit

# A schedule not given: the stored one is left as it is.
UNCHANGED: Any = object()


@dataclass(frozen=True)
class GlobalPreferenceView:
    enabled: bool
    # Every channel, on unless the subscriber turned it off.
    channels: dict[str, bool]
    schedule: dict[str, Any] | None
    updated_at: datetime | None


@dataclass(frozen=True)
class WorkflowPreferenceView:
    workflow: Workflow
    enabled: bool
    # Every channel, merged (workflow settings, then the subscriber's); ``sources`` says which level set each.
    channels: dict[str, bool]
    sources: dict[str, str]
    # The channels of the workflow's active steps.
    step_channels: tuple[str, ...]
    updated_at: datetime | None


@dataclass(frozen=True)
class SubscriberPreferencesView:
    global_: GlobalPreferenceView
    workflows: list[WorkflowPreferenceView]


async def subscriber_for(session: AsyncSession, principal: Principal, subscriber_id: str) -> Subscriber:
    """The subscriber of the caller's environment named by its subscriberId (404 otherwise)."""
    return await require_subscriber(session, principal, subscriber_id)


async def subscriber_of_token(session: AsyncSession, principal: SubscriberPrincipal) -> Subscriber:
    """The subscriber an inbox token names (404 when it has been deleted since the session began)."""
    found = await SubscriberRepository(session).get_by_ids(principal.environment_id, [principal.subscriber_id])
    if not found:
        raise NotFoundError(not_found_message(principal.external_subscriber_id))
    return found[0]


def step_channels(workflow: Workflow) -> tuple[str, ...]:
    """The channels the workflow's active steps deliver on, in Novu's channel order."""
    used = {
        (step.get("template") or {}).get("type") or step.get("type")
        for step in workflow.steps or []
        if step.get("active", True)
    }
    return tuple(channel for channel in CHANNELS if channel in used)


def workflow_summary(workflow: Workflow) -> dict[str, Any]:
    """The workflow as a preference names it (v2 and the Inbox): id, identifier, name, critical, tags, severity, data."""
    summary: dict[str, Any] = {
        "id": workflow.id,
        "identifier": workflow.trigger_identifier,
        "name": workflow.name,
        "critical": bool(workflow.critical),
        "tags": list(workflow.tags or []),
        "severity": workflow.severity or "none",
    }
    if workflow.data is not None:
        summary["data"] = workflow.data
    return summary


def _preference(row: SubscriberPreference | None) -> Preference | None:
    if row is None:
        return None
    return Preference(bool(row.enabled), {k: v for k, v in (row.channels or {}).items() if isinstance(v, bool)})


def _global_view(row: SubscriberPreference | None) -> GlobalPreferenceView:
    return GlobalPreferenceView(
        enabled=row.enabled if row is not None else True,
        channels=global_channels(_preference(row)),
        schedule=row.schedule if row is not None else None,
        updated_at=row.updated_at if row is not None else None,
    )


def _workflow_view(workflow: Workflow, row: SubscriberPreference | None) -> WorkflowPreferenceView:
    merged = workflow_channels(workflow.preference_settings, _preference(row))
    return WorkflowPreferenceView(
        workflow=workflow,
        enabled=merged.enabled,
        channels=merged.channels,
        sources=merged.sources,
        step_channels=step_channels(workflow),
        updated_at=row.updated_at if row is not None else None,
    )


def _listed(
    workflow: Workflow, critical: bool | None, tags: Collection[str] | None, severities: Collection[str] | None
) -> bool:
    if critical is not None and bool(workflow.critical) != critical:
        return False
    if tags and not set(tags) & set(workflow.tags or []):
        return False
    return not severities or (workflow.severity or "none") in severities


async def read_preferences(
    session: AsyncSession,
    subscriber: Subscriber,
    *,
    critical: bool | None = None,
    tags: Collection[str] | None = None,
    severities: Collection[str] | None = None,
    channels_in_use: bool = False,
) -> SubscriberPreferencesView:
    """The subscriber's global preference and one per active workflow of the environment.

    ``critical``: only critical workflows (True), only the others (False), or all (None).
    ``tags``: only workflows with one of these tags; ``severities``: only workflows of one of these severities
    (the Inbox's filters, as Novu's: any tag matches). ``channels_in_use``: the global preference answers only
    the channels some active workflow delivers on (see :func:`in_use`).
    """
    repository = PreferenceRepository(session)
    rows = await repository.rows_of(subscriber)
    by_workflow = {row.workflow_id: row for row in rows}
    active = await repository.active_workflows(subscriber.environment_id)
    found = _global_view(by_workflow.get(None))
    return SubscriberPreferencesView(
        _in_use(found, active) if channels_in_use else found,
        [_workflow_view(w, by_workflow.get(w.id)) for w in active if _listed(w, critical, tags, severities)],
    )


def _in_use(view: GlobalPreferenceView, workflows: Iterable[Workflow]) -> GlobalPreferenceView:
    used = {channel for workflow in workflows for channel in step_channels(workflow)}
    return replace(view, channels={channel: value for channel, value in view.channels.items() if channel in used})


async def in_use(session: AsyncSession, subscriber: Subscriber, view: GlobalPreferenceView) -> GlobalPreferenceView:
    """The global preference with only the channels an active step of an active workflow delivers on: what Novu's
    Inbox answers (its preferences panel shows no switch for a channel nothing sends on). What is stored is unchanged."""
    return _in_use(view, await PreferenceRepository(session).active_workflows(subscriber.environment_id))


async def read_global(session: AsyncSession, subscriber: Subscriber) -> GlobalPreferenceView:
    rows = await PreferenceRepository(session).rows_of(subscriber)
    return _global_view(next((row for row in rows if row.workflow_id is None), None))


async def require_workflows(session: AsyncSession, subscriber: Subscriber, references: Sequence[str]) -> dict[str, Workflow]:
    """The workflows named (by ``_id`` or trigger identifier) in the subscriber's environment; 404 for the first unknown."""
    found = await PreferenceRepository(session).find_workflows(subscriber.environment_id, set(references))
    for reference in references:
        if reference not in found:
            raise NotFoundError(f"Workflow with id {reference} not found")
    return found


async def require_changeable_workflow(session: AsyncSession, subscriber: Subscriber, reference: str) -> Workflow:
    """The workflow named, refused when critical (the Inbox's rule, as Novu's: its preferences cannot be changed there)."""
    workflow = (await require_workflows(session, subscriber, [reference]))[reference]
    if workflow.critical:
        raise BadRequestError(f"Critical workflow with id: {reference} can not be updated")
    return workflow


def _set_channels(row: SubscriberPreference, channels: Mapping[str, bool]) -> bool:
    current = dict(row.channels or {})
    wanted = {**current, **{channel: value for channel, value in channels.items() if channel in CHANNELS}}
    if wanted == current:
        return False
    row.channels = wanted
    return True


async def update_global(
    session: AsyncSession,
    subscriber: Subscriber,
    *,
    enabled: bool | None = None,
    channels: Mapping[str, bool] | None = None,
    schedule: dict[str, Any] | None = UNCHANGED,
) -> GlobalPreferenceView:
    """Set what is given of the global preference; channels not named keep their value."""
    now = utcnow()
    row = await PreferenceRepository(session).row_to_change(subscriber, None, now)
    changed = _set_channels(row, channels or {})
    if enabled is not None and row.enabled != enabled:
        row.enabled = enabled
        changed = True
    if schedule is not UNCHANGED and row.schedule != schedule:
        row.schedule = schedule
        changed = True
    if changed:
        row.updated_at = now
    await session.flush()
    if changed:
        await _preference_updated(session, subscriber, row, None)
    return _global_view(row)


async def update_workflow(
    session: AsyncSession,
    subscriber: Subscriber,
    workflow: Workflow,
    *,
    enabled: bool | None = None,
    channels: Mapping[str, bool] | None = None,
) -> WorkflowPreferenceView:
    """Set what is given of the subscriber's preference for the workflow; channels not named keep their value."""
    now = utcnow()
    row = await PreferenceRepository(session).row_to_change(subscriber, workflow.id, now)
    changed = _set_channels(row, channels or {})
    if enabled is not None and row.enabled != enabled:
        row.enabled = enabled
        changed = True
    if changed:
        row.updated_at = now
    await session.flush()
    if changed:
        await _preference_updated(session, subscriber, row, workflow)
    return _workflow_view(workflow, row)


async def _preference_updated(
    session: AsyncSession, subscriber: Subscriber, row: SubscriberPreference, workflow: Workflow | None
) -> None:
    """``preference.updated`` to the environment's webhook endpoints (herald/webhooks)."""
    data = {
        "subscriberId": subscriber.subscriber_id,
        "_subscriberId": subscriber.id,
        "level": "global" if workflow is None else "template",
        "workflowId": None if workflow is None else workflow.trigger_identifier,
        "enabled": row.enabled,
        "channels": dict(row.channels or {}),
        "updatedAt": isoformat(row.updated_at),
    }
    await emit(session, subscriber.environment_id, subscriber.organization_id, "preference.updated", [data])


async def update_global_or_workflow(
    session: AsyncSession,
    subscriber: Subscriber,
    workflow_reference: str | None,
    *,
    channels: Mapping[str, bool] | None = None,
    schedule: dict[str, Any] | None = UNCHANGED,
) -> None:
    """v2's one update: the global preference (channels, schedule) or, named, one workflow's (channels)."""
    if workflow_reference is None:
        await update_global(session, subscriber, channels=channels, schedule=schedule)
        return
    if schedule is not UNCHANGED:
        raise ValidationFailed.field("schedule", "a schedule belongs to the global preference: leave workflowId out")
    workflow = (await require_workflows(session, subscriber, [workflow_reference]))[workflow_reference]
    await update_workflow(session, subscriber, workflow, channels=channels)


async def update_workflows(
    session: AsyncSession,
    subscriber: Subscriber,
    changes: Sequence[tuple[str, Mapping[str, bool]]],
    *,
    refuse_critical: bool = False,
) -> list[WorkflowPreferenceView]:
    """Set the channels of several workflows (named by ``_id`` or identifier) at once; nothing changes when one is unknown
    (or, with ``refuse_critical``, the Inbox's rule, critical)."""
    if not changes:
        raise BadRequestError("No preferences provided for bulk update")
    if len({reference for reference, _ in changes}) < len(changes):
        raise ValidationFailed.field("preferences", "each workflow may be named once", [ref for ref, _ in changes])
    workflows = await require_workflows(session, subscriber, [reference for reference, _ in changes])
    if refuse_critical:
        critical = list(dict.fromkeys(workflow.id for workflow in workflows.values() if workflow.critical))
        if critical:
            raise BadRequestError(f"Critical workflows with ids: {', '.join(critical)} cannot be updated")
    return [
        await update_workflow(session, subscriber, workflows[reference], channels=channels)
        for reference, channels in changes
    ]
