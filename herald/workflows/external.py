"""Code-first workflows: stored as a bridge discovered them (``origin: external``), replaced at each sync.

A workflow written with Novu's framework lives in the team's code; Herald keeps
what the engine and the reads need of it (name, tags, preferences, payload
schema, and each step's id, type and schemas) and calls the bridge to render
each step at send time (herald/bridge). Each sync upserts the workflows by
``workflowId`` and removes the environment's other external workflows, which
the code no longer has. A ``workflowId`` taken by a workflow made in Herald is
refused: the code cannot take over a workflow someone edits elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.auth import Principal
from herald.kit.errors import BadRequestError
from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.models import Workflow
from herald.workflows import service
from herald.workflows.repository import WorkflowRepository
from herald.workflows.service import WorkflowView

EXTERNAL = "external"
CHANNELS = ("email", "sms", "in_app", "chat", "push")
_SEVERITIES = frozenset({"high", "medium", "low", "none"})


@dataclass(frozen=True)
class ExternalStep:
    step_id: str
    type: str
    controls_schema: dict[str, Any] | None = None
    outputs_schema: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExternalWorkflow:
    workflow_id: str
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()
    severity: str = "none"
    active: bool = True
    preferences: dict[str, Any] = field(default_factory=dict)
    payload_schema: dict[str, Any] | None = None
    steps: tuple[ExternalStep, ...] = ()


def bridge_steps(steps: Sequence[ExternalStep], existing: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The stored steps of a code-first workflow: a step keeps its ``_id`` across syncs (found by its stepId).

    ``bridge: true`` tells the engine to ask the bridge for the step's content
    instead of rendering a template; ``template`` keeps the schemas the
    framework declared (Novu's ``template.controls`` and ``template.output``).
    """
    ids = {step.get("stepId"): step for step in existing if isinstance(step, dict)}
    stored = []
    for step in steps:
        before = ids.get(step.step_id) or {}
        template: dict[str, Any] = {"type": step.type}
        if step.controls_schema is not None:
            template["controls"] = {"schema": step.controls_schema}
        if step.outputs_schema is not None:
            template["output"] = {"schema": step.outputs_schema}
        if step.options:
            template["options"] = step.options
        stored.append({
            "_id": before.get("_id") or new_id(),
            "uuid": step.step_id,
            "stepId": step.step_id,
            "name": step.step_id,
            "_templateId": before.get("_templateId") or new_id(),
            "active": True,
            "shouldStopOnFail": bool(step.options.get("failOnErrorEnabled")),
            "filters": [],
            "template": template,
            "bridge": True,
        })
        # The values saved for the step's controls (herald/bridge/controls.py) outlive a sync: they live in Herald.
        for kept in ("controlValues", "controlValuesRecord"):
            if kept in before:
                stored[-1][kept] = before[kept]
    return stored


def preference_settings(preferences: dict[str, Any]) -> tuple[dict[str, bool], bool]:
    """v1's preferenceSettings and critical from the framework's ``preferences`` (``all`` and ``channels``)."""
    everything = preferences.get("all") if isinstance(preferences.get("all"), dict) else {}
    channels = preferences.get("channels") if isinstance(preferences.get("channels"), dict) else {}
    default = everything.get("enabled", True) is not False
    settings = {}
    for channel in CHANNELS:
        entry = channels.get(channel)
        settings[channel] = entry.get("enabled", default) is not False if isinstance(entry, dict) else default
    return settings, everything.get("readOnly") is True


def definition(workflow: Workflow) -> dict[str, Any]:
    """The stored workflow as the bridge declared it, in the framework's discover shape (for the diff)."""
    return {
        "workflowId": workflow.trigger_identifier,
        "name": workflow.name,
        "description": workflow.description,
        "tags": list(workflow.tags or []),
        "severity": workflow.severity,
        "payload": {"schema": workflow.payload_schema},
        "steps": [
            {
                "stepId": step.get("stepId"),
                "type": (step.get("template") or {}).get("type"),
                "controls": (step.get("template") or {}).get("controls"),
                "outputs": (step.get("template") or {}).get("output"),
                "options": (step.get("template") or {}).get("options") or {},
            }
            for step in workflow.steps or []
        ],
    }


def _apply(workflow: Workflow, external: ExternalWorkflow) -> None:
    settings, critical = preference_settings(external.preferences)
    workflow.name = external.name
    workflow.description = external.description
    workflow.tags = list(external.tags)
    workflow.severity = external.severity if external.severity in _SEVERITIES else "none"
    workflow.active = external.active
    workflow.draft = not external.active
    workflow.preference_settings = settings
    workflow.critical = critical
    workflow.payload_schema = external.payload_schema
    # Not checked at trigger time, as in Novu: the bridge checks the payload on every execute.
    workflow.validate_payload = False
    workflow.steps = bridge_steps(external.steps, workflow.steps or [])
    workflow.variables = []
    workflow.subscriber_variables = []


async def store_external(
    session: AsyncSession, principal: Principal, workflows: Sequence[ExternalWorkflow]
) -> list[WorkflowView]:
    """Upsert the discovered workflows by ``workflowId``; remove the environment's other external ones."""
    repository = WorkflowRepository(session)
    existing = await repository.live_by_identifier(principal.environment_id, [w.workflow_id for w in workflows])
    for external in workflows:
        taken = existing.get(external.workflow_id)
        if taken is not None and taken.origin != EXTERNAL:
            raise BadRequestError(f"Workflow {external.workflow_id} was already created in Dashboard")
    group = await service.default_group(session, principal)
    now = utcnow()
    stored: list[Workflow] = []
    for external in workflows:
        workflow = existing.get(external.workflow_id)
        if workflow is None:
            workflow = Workflow(
                environment_id=principal.environment_id,
                organization_id=principal.organization_id,
                notification_group_id=group.id,
                creator_id=principal.api_key_id,
                trigger_identifier=external.workflow_id,
                origin=EXTERNAL,
                data=None,
                deleted=False,
                created_at=now,
            )
            repository.add(workflow)
        _apply(workflow, external)
        workflow.updated_at = now
        stored.append(workflow)
    kept = {external.workflow_id for external in workflows}
    for workflow in await repository.of_origin(principal.environment_id, EXTERNAL):
        if workflow.trigger_identifier not in kept:
            workflow.deleted = True
            workflow.deleted_at = now
            workflow.deleted_by = principal.api_key_id
            workflow.updated_at = now
    await session.flush()
    return [WorkflowView(workflow, group) for workflow in stored]
