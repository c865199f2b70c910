"""Novu's v2 workflow use cases, over the same workflows as v1.

A v2 workflow is a v1 workflow: its steps are built by the v1 rules
(``service.build_steps``) from the template and metadata its controls map to
(``controls.to_v1``), so the engine runs it as it runs any other; the step
also keeps its ``stepId`` and the controls v1 has no field for. A workflow is
addressed by its ``_id``, its trigger identifier (``workflowId``) or its slug.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import uuid
from collections.abc import Sequence
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import validator_for
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.maily import MailyError
from herald.engine.steps import http_request as http_request_step
from herald.engine.templates import TemplateError
from herald.environments import protection
from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.errors import BadRequestError, NotFoundError, ValidationFailed, validation_errors
from herald.kit.ids import new_id
from herald.kit.time import isoformat, utcnow
from herald.models import Workflow
from herald.previews import service as previews
from herald.workflows import controls as control_map
from herald.workflows import service
from herald.workflows.repository import WorkflowRepository
from herald.workflows.schemas import CHANNEL_STEP_TYPES, StepRequest
from herald.workflows.schemas_v2 import (
    CreateWorkflowV2Request,
    GeneratePreviewRequest,
    PatchWorkflowV2Request,
    PreferencesRequest,
    StepUpsert,
    UpdateWorkflowV2Request,
)

CHANNELS = ("email", "sms", "in_app", "chat", "push")
_OBJECT_ID = re.compile(r"^[0-9a-f]{24}$")
_SLUG_ID = re.compile(r"_wf_([0-9a-f]{24})$")
_STEP_SLUG_ID = re.compile(r"_st_([0-9a-f]{24})$")

# ---------------------------------------------------------------------------
# Preferences
# ---------------------------------------------------------------------------


def preferences_to_v1(preferences: PreferencesRequest) -> tuple[dict[str, bool], bool] | None:
    """v1's preferenceSettings and critical from Novu's v2 preferences; None when none were sent.

    A channel not named takes ``all.enabled``; ``all.readOnly`` is v1's critical
    (the subscriber cannot turn the workflow off).
    """
    level = preferences.user or preferences.workflow
    if level is None:
        return None
    settings = {
        channel: level.channels[channel].enabled if channel in level.channels else level.all.enabled
        for channel in CHANNELS
    }
    return settings, level.all.readOnly


def preferences_from_v1(workflow: Workflow) -> dict[str, Any]:
    settings = {channel: True for channel in CHANNELS} | dict(workflow.preference_settings or {})
    level = {
        "all": {"enabled": any(settings.get(channel, True) for channel in CHANNELS), "readOnly": workflow.critical},
        "channels": {channel: {"enabled": bool(settings.get(channel, True))} for channel in CHANNELS},
    }
    return {"default": level, "user": None}


# ---------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------


def _existing_step(existing: Sequence[dict[str, Any]], request: StepUpsert) -> dict[str, Any] | None:
    for step in existing:
        if request.id is not None and step.get("_id") == request.id:
            return step
        if request.stepId is not None and control_map.step_key(step) == request.stepId:
            return step
    return None


def build_v2_steps(requests: Sequence[StepUpsert], existing: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The stored steps for v2 steps: v1's steps plus ``stepId`` and the kept controls.

    A step sent with the ``_id`` or ``stepId`` of a stored step keeps its ids.
    Errors name the v2 fields (``steps.0.controlValues.amount``).
    """
    errors: list[dict[str, Any]] = []
    v1_requests: list[StepRequest] = []
    extras: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for index, request in enumerate(requests):
        controls = dict(request.controlValues or {})
        if request.type == "http_request":
            for name, why, value in http_request_step.check_controls(controls):
                errors.append(_error(("steps", index, "controlValues", *name.split(".")), why, value))
        try:
            template, metadata = control_map.to_v1(request.type, controls)
        except MailyError as exc:
            # The block editor's document (herald/engine/maily.py) cannot be made into a template.
            errors.append(_error(("steps", index, "controlValues", "body"), str(exc), None))
            template, metadata = control_map.to_v1(request.type, {**controls, "body": ""})
        previous = _existing_step(existing, request)
        key = (
            request.stepId
            or (control_map.step_key(previous) if previous else None)
            or control_map.step_key({"name": request.name, "_id": str(index)})
        )
        if key in seen:
            errors.append(_error(("steps", index, "stepId"), "must be unique among the workflow's steps", key))
        seen.add(key)
        body: dict[str, Any] = {"name": request.name, "template": template}
        if previous is not None:
            body["_id"] = previous["_id"]
        if metadata is not None or request.type in ("delay", "digest", "throttle"):
            body["metadata"] = metadata or {}
        try:
            v1_requests.append(StepRequest.model_validate(body))
        except ValidationError as exc:
            for error in exc.errors():
                errors.append({**error, "loc": ("steps", index, "controlValues", *error["loc"][1:])})
            continue
        extras.append((key, control_map.kept_controls(request.type, controls)))
    if errors:
        raise ValidationFailed(validation_errors(errors))
    try:
        steps = service.build_steps(v1_requests, existing, check_templates=False)
    except ValidationFailed as exc:
        raise ValidationFailed(_v2_names(exc.extra.get("errors") or {})) from exc
    for step, request, (key, kept) in zip(steps, requests, extras, strict=True):
        step["stepId"] = key
        step.pop("controlValues", None)
        if kept:
            step["controlValues"] = kept
        # Saved all the same, as Novu does; the engine fails the step with them (runner._evaluate).
        issues = control_map.step_issues(request.type, dict(request.controlValues or {}))
        if issues:
            step["issues"] = issues
    return steps


def _v2_names(errors: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """v1's error fields (``steps.0.metadata.amount``) as the v2 caller sent them (``steps.0.controlValues.amount``)."""
    renamed: dict[str, dict[str, Any]] = {}
    for field, entry in errors.items():
        name = re.sub(r"^(steps\.\d+)\.(metadata|template)\b", r"\1.controlValues", field)
        target = renamed.setdefault(name, {"messages": [], "value": entry.get("value")})
        target["messages"].extend(message.replace(field, name) for message in entry.get("messages", []))
    return renamed


def _error(loc: tuple[str | int, ...], message: str, value: Any = None) -> dict[str, Any]:
    return {"type": "value_error", "loc": loc, "msg": message, "input": value}


def check_payload_schema(schema: dict[str, Any] | None) -> None:
    """Refuse a payloadSchema that is not a JSON schema: it would refuse or pass every trigger wrongly."""
    if schema is None:
        return
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise ValidationFailed.field(
            "payloadSchema", f"payloadSchema is not a valid JSON schema: {exc.message}", schema
        ) from exc


def _step_type(step: dict[str, Any]) -> str:
    return str((step.get("template") or {}).get("type") or "")


def _variables_schema(workflow: Workflow) -> dict[str, Any]:
    """The variables a step's controls can use, as a JSON schema (Novu's step ``variables``)."""
    payload = (
        workflow.payload_schema
        if isinstance(workflow.payload_schema, dict)
        else {
            "type": "object",
            "properties": {item["name"]: {"type": "string"} for item in workflow.variables or [] if "name" in item},
        }
    )
    return {
        "type": "object",
        "properties": {
            "subscriber": {
                "type": "object",
                "properties": {
                    name: {"type": "string"}
                    for name in ("subscriberId", "firstName", "lastName", "email", "phone", "avatar", "locale")
                },
            },
            "payload": payload,
        },
    }


def step_to_v2(workflow: Workflow, step: dict[str, Any]) -> dict[str, Any]:
    if step.get("bridge"):
        return _bridge_step_to_v2(workflow, step)
    values = control_map.from_v1(step)
    answer = {
        "_id": step["_id"],
        "stepId": control_map.step_key(step),
        "name": step.get("name") or _step_type(step),
        "slug": control_map.step_slug(step),
        "type": _step_type(step),
        "origin": workflow.origin,
        "workflowId": workflow.trigger_identifier,
        "workflowDatabaseId": workflow.id,
        "controls": {"values": values},
        "controlValues": values,
        "variables": _variables_schema(workflow),
    }
    # Worked out from the step as it is, so a step saved before templates were checked shows its issues too.
    issues = control_map.step_issues(_step_type(step), values)
    if issues:
        answer["issues"] = issues
    return answer


def _bridge_step_to_v2(workflow: Workflow, step: dict[str, Any]) -> dict[str, Any]:
    """A code-first step: its content is the bridge's, so its controls are the schema the code declared,
    with the values saved for it (herald/bridge/controls.py)."""
    template = step.get("template") or {}
    saved = step.get("controlValues") if isinstance(step.get("controlValues"), dict) else {}
    controls: dict[str, Any] = {"values": dict(saved)}
    schema = (template.get("controls") or {}).get("schema")
    if isinstance(schema, dict):
        controls["dataSchema"] = schema
    return {
        "_id": step["_id"],
        "stepId": control_map.step_key(step),
        "name": step.get("name") or _step_type(step),
        "slug": control_map.step_slug(step),
        "type": _step_type(step),
        "origin": workflow.origin,
        "workflowId": workflow.trigger_identifier,
        "workflowDatabaseId": workflow.id,
        "controls": controls,
        "controlValues": dict(saved),
        "variables": _variables_schema(workflow),
    }


def workflow_status(workflow: Workflow) -> str:
    """Novu's status: ERROR when a step has issues, else ACTIVE or INACTIVE."""
    for step in workflow.steps or []:
        if step.get("bridge"):
            continue
        if control_map.step_issues(_step_type(step), control_map.from_v1(step)):
            return "ERROR"
    return "ACTIVE" if workflow.active else "INACTIVE"


def to_v2(workflow: Workflow) -> dict[str, Any]:
    """Novu's WorkflowResponseDto for a stored workflow (made by v1 or v2)."""
    return {
        "_id": workflow.id,
        "workflowId": workflow.trigger_identifier,
        "slug": control_map.workflow_slug(workflow.name, workflow.id),
        "name": workflow.name,
        "description": workflow.description or "",
        "tags": list(workflow.tags or []),
        "active": workflow.active,
        "validatePayload": workflow.validate_payload,
        "payloadSchema": workflow.payload_schema,
        "isTranslationEnabled": workflow.is_translation_enabled,
        "severity": workflow.severity or "none",
        "preferences": preferences_from_v1(workflow),
        "status": workflow_status(workflow),
        "origin": workflow.origin,
        "steps": [step_to_v2(workflow, step) for step in workflow.steps or []],
        "issues": {},
        "createdAt": isoformat(workflow.created_at),
        "updatedAt": isoformat(workflow.updated_at),
    }


def to_list_item(workflow: Workflow) -> dict[str, Any]:
    steps = workflow.steps or []
    return {
        "_id": workflow.id,
        "workflowId": workflow.trigger_identifier,
        "slug": control_map.workflow_slug(workflow.name, workflow.id),
        "name": workflow.name,
        "tags": list(workflow.tags or []),
        "status": workflow_status(workflow),
        "origin": workflow.origin,
        "stepTypeOverviews": [_step_type(step) for step in steps],
        "steps": [{"slug": control_map.step_slug(step), "type": _step_type(step)} for step in steps],
        "isTranslationEnabled": workflow.is_translation_enabled,
        "createdAt": isoformat(workflow.created_at),
        "updatedAt": isoformat(workflow.updated_at),
    }


# ---------------------------------------------------------------------------
# Use cases
# ---------------------------------------------------------------------------


async def find(repository: WorkflowRepository, environment_id: str, key: str) -> Workflow:
    """The workflow ``key`` names in the environment: its ``_id``, its slug or its trigger identifier."""
    workflow = None
    if _OBJECT_ID.match(key):
        workflow = await repository.get(environment_id, key)
    if workflow is None and (slug := _SLUG_ID.search(key)):
        workflow = await repository.get(environment_id, slug.group(1))
    if workflow is None:
        workflow = await repository.get_by_identifier(environment_id, key)
    if workflow is None:
        raise NotFoundError("Workflow cannot be found", ctx={"workflowId": key})
    return workflow


def _apply_fields(
    workflow: Workflow, request: CreateWorkflowV2Request | UpdateWorkflowV2Request | PatchWorkflowV2Request
) -> None:
    given = request.model_fields_set
    if request.name is not None:
        workflow.name = request.name
    if "description" in given:
        workflow.description = request.description or ""
    if request.tags is not None:
        workflow.tags = list(request.tags)
    if request.active is not None:
        workflow.active = request.active
        workflow.draft = not request.active
    if "payloadSchema" in given:
        check_payload_schema(request.payloadSchema)
        workflow.payload_schema = request.payloadSchema
    if request.validatePayload is not None:
        workflow.validate_payload = request.validatePayload
    if request.isTranslationEnabled is not None:
        workflow.is_translation_enabled = request.isTranslationEnabled
    if not isinstance(request, PatchWorkflowV2Request):
        if request.severity is not None:
            workflow.severity = request.severity
        mapped = preferences_to_v1(request.preferences) if request.preferences is not None else None
        if mapped is not None:
            workflow.preference_settings, workflow.critical = mapped


async def create_workflow(session: AsyncSession, principal: Principal, request: CreateWorkflowV2Request) -> Workflow:
    repository = WorkflowRepository(session)
    steps = build_v2_steps(request.steps)
    group = await service._resolve_group(session, principal, None)
    await service._claim_identifier(repository, principal, request.workflowId)
    now = utcnow()
    workflow = Workflow(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        notification_group_id=group.id,
        creator_id=principal.api_key_id,
        name=request.name,
        description="",
        trigger_identifier=request.workflowId,
        active=False,
        draft=True,
        critical=False,
        severity="none",
        tags=[],
        preference_settings={channel: True for channel in CHANNELS},
        validate_payload=False,
        payload_schema=None,
        is_translation_enabled=False,
        deleted=False,
        created_at=now,
        updated_at=now,
    )
    _apply_fields(workflow, request)
    service._apply_steps(workflow, steps)
    repository.add(workflow)
    await service._flush(session, request.workflowId)
    return workflow


async def search_workflows(
    session: AsyncSession,
    principal: Principal,
    *,
    offset: int,
    limit: int,
    query: str | None,
    tags: Sequence[str],
    statuses: Sequence[str],
    order_by: str,
    descending: bool,
) -> tuple[list[Workflow], int]:
    """One page of the environment's workflows that match, and how many match.

    Tags and statuses are matched here, not in SQL: the tags are a JSON list, whose
    containment SQLite and PostgreSQL test differently, a status is worked out from
    the steps, and an environment has few workflows.
    """
    wanted = set(statuses)
    rows = await WorkflowRepository(session).search(
        principal.environment_id, search=query, active=None, order_by=order_by, descending=descending
    )
    if wanted:
        # The status is worked out from the steps (ERROR when one has issues), not stored.
        rows = [row for row in rows if workflow_status(row) in wanted]
    if tags:
        rows = [row for row in rows if set(tags) & set(row.tags or [])]
    return list(rows[offset : offset + limit]), len(rows)


async def get_workflow(session: AsyncSession, principal: Principal, key: str) -> Workflow:
    return await find(WorkflowRepository(session), principal.environment_id, key)


async def update_workflow(
    session: AsyncSession, principal: Principal, key: str, request: UpdateWorkflowV2Request
) -> Workflow:
    repository = WorkflowRepository(session)
    workflow = await find(repository, principal.environment_id, key)
    service.refuse_code_first_steps(workflow)
    steps = build_v2_steps(request.steps, workflow.steps or [])
    if request.workflowId is not None and request.workflowId != workflow.trigger_identifier:
        await service._claim_identifier(repository, principal, request.workflowId, excluding_id=workflow.id)
        workflow.trigger_identifier = request.workflowId
    _apply_fields(workflow, request)
    service._apply_steps(workflow, steps)
    workflow.updated_at = utcnow()
    await service._flush(session, workflow.trigger_identifier)
    return workflow


async def patch_workflow(
    session: AsyncSession, principal: Principal, key: str, request: PatchWorkflowV2Request
) -> Workflow:
    workflow = await find(WorkflowRepository(session), principal.environment_id, key)
    _apply_fields(workflow, request)
    workflow.updated_at = utcnow()
    await session.flush()
    return workflow


async def delete_workflow(session: AsyncSession, principal: Principal, key: str) -> None:
    workflow = await find(WorkflowRepository(session), principal.environment_id, key)
    await service.delete_workflow(session, principal, workflow.id)


def _copied_steps(steps: Sequence[dict[str, Any]], existing: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps for another environment: as they are, with ids of that environment's workflow.

    A step whose ``stepId`` the target's workflow already has keeps the target's ids.
    """
    known = {control_map.step_key(step): step for step in existing}
    copied: list[dict[str, Any]] = []
    parent_id: str | None = None
    for source in steps:
        step = copy.deepcopy(source)
        target = known.get(control_map.step_key(source))
        step["stepId"] = control_map.step_key(source)
        step["_id"] = target["_id"] if target else new_id()
        step["_templateId"] = target.get("_templateId", new_id()) if target else new_id()
        step["uuid"] = target.get("uuid", str(uuid.uuid4())) if target else str(uuid.uuid4())
        for variant in step.get("variants") or []:
            variant["_id"], variant["_templateId"], variant["uuid"] = new_id(), new_id(), str(uuid.uuid4())
        step.pop("_parentId", None)
        if parent_id is not None:
            step["_parentId"] = parent_id
        parent_id = step["_id"]
        copied.append(step)
    return copied


async def sync_workflow(session: AsyncSession, principal: Principal, key: str, target_environment_id: str) -> Workflow:
    """Copy the workflow into another environment of the organization, or bring the copy there up to date.

    A protected target refuses: the source is always the caller's environment,
    and a protected environment is changed by its own keys alone (its key
    publishes from this one instead, herald/environments).
    """
    if target_environment_id == principal.environment_id:
        raise BadRequestError("Cannot sync workflow to the same environment")
    repository = WorkflowRepository(session)
    source = await find(repository, principal.environment_id, key)
    environment = await repository.environment_of_organization(principal.organization_id, target_environment_id)
    if environment is None:
        raise NotFoundError(f"Environment {target_environment_id} not found")
    protection.require_change(principal, environment)
    target_principal = dataclasses.replace(principal, environment_id=environment.id)
    target = await repository.get_by_identifier(environment.id, source.trigger_identifier)
    now = utcnow()
    if target is None:
        group = await service._resolve_group(session, target_principal, None)
        target = Workflow(
            environment_id=environment.id,
            organization_id=principal.organization_id,
            notification_group_id=group.id,
            creator_id=principal.api_key_id,
            trigger_identifier=source.trigger_identifier,
            deleted=False,
            created_at=now,
        )
        repository.add(target)
    for field in (
        "name",
        "description",
        "active",
        "draft",
        "critical",
        "severity",
        "tags",
        "preference_settings",
        "data",
        "validate_payload",
        "payload_schema",
        "is_translation_enabled",
    ):
        setattr(target, field, copy.deepcopy(getattr(source, field)))
    service._apply_steps(target, _copied_steps(source.steps or [], target.steps or []))
    target.updated_at = now
    await service._flush(session, target.trigger_identifier)
    return target


async def get_step(session: AsyncSession, principal: Principal, key: str, step_key: str) -> dict[str, Any]:
    workflow = await find(WorkflowRepository(session), principal.environment_id, key)
    return step_to_v2(workflow, _find_step(workflow, step_key))


def _find_step(workflow: Workflow, key: str) -> dict[str, Any]:
    slug = _STEP_SLUG_ID.search(key)
    for step in workflow.steps or []:
        if key in (step.get("_id"), control_map.step_key(step)) or (slug and step.get("_id") == slug.group(1)):
            return step
    raise NotFoundError("Step cannot be found", ctx={"workflowId": workflow.trigger_identifier, "stepId": key})


async def generate_preview(
    session: AsyncSession,
    principal: Principal,
    key: str,
    step_key: str,
    request: GeneratePreviewRequest,
    bridge: BridgeAccess | None = None,
) -> dict[str, Any]:
    """The step's controls (the stored ones, or those sent) rendered for the payload and subscriber sent.

    A template that cannot be rendered is an answer, not a failure: the result
    carries Novu's ``error`` (title, message, hint) for the editor to show.
    """
    workflow = await find(WorkflowRepository(session), principal.environment_id, key)
    step = _find_step(workflow, step_key)
    step_type = _step_type(step)
    if step.get("bridge"):
        return await _bridge_preview(session, principal, workflow, step, request, bridge)
    controls = request.controlValues if request.controlValues is not None else control_map.from_v1(step)
    given = request.previewPayload.model_dump(exclude_none=True) if request.previewPayload is not None else {}
    example = {"payload": {}, "subscriber": {}, **given}
    context = {
        "subscriber": example["subscriber"],
        "payload": example["payload"],
        "actor": example.get("actor") or {},
        "step": {"digest": False, "events": [], "total_count": 0, **(example.get("steps") or {})},
        "tenant": {},
    }
    result: dict[str, Any] = {"type": step_type}
    schema = workflow.payload_schema  # read before the preview closes the session
    try:
        result["preview"] = await previews.preview_step(session, principal.environment_id, step_type, controls, context)
    except TemplateError as exc:
        if step_type not in CHANNEL_STEP_TYPES:
            raise
        result["error"] = {"title": "Preview failed", "message": str(exc), "hint": "Check the step's template syntax"}
    return {"previewPayloadExample": example, "result": result, "schema": schema}


@dataclasses.dataclass(frozen=True)
class BridgeAccess:
    """What previewing a code-first step needs besides the store: the client to its bridge, the key box."""

    http: Any
    box: SecretBox


async def _bridge_preview(
    session: AsyncSession,
    principal: Principal,
    workflow: Workflow,
    step: dict[str, Any],
    request: GeneratePreviewRequest,
    bridge: BridgeAccess | None,
) -> dict[str, Any]:
    """A code-first step's preview comes from its bridge: its content lives in code."""
    given = request.previewPayload.model_dump(exclude_none=True) if request.previewPayload is not None else {}
    example = {"payload": {}, "subscriber": {}, **given}
    schema, workflow_id = workflow.payload_schema, workflow.trigger_identifier
    result: dict[str, Any] = {"type": _step_type(step)}
    if bridge is None:
        result["error"] = {"title": "Preview failed", "message": "The step is written in code", "hint": "Preview it from its bridge"}
    else:
        result.update(
            await previews.preview_bridge_step(
                session, principal.environment_id, workflow_id, step, example, http=bridge.http, box=bridge.box
            )
        )
    return {"previewPayloadExample": example, "result": result, "schema": schema}
