"""Workflow use cases (Novu v1 "notification templates").

Steps are stored as the wire objects of the spec's NotificationStep, each with
its ``_id``, ``uuid`` and ``_templateId``, so the engine and every response
read the same thing. The trigger's variables are worked out from the step
templates when the steps are written.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.steps import http_request as http_request_step
from herald.engine.templates import check_template
from herald.kit.auth import Principal
from herald.kit.errors import BadRequestError, ConflictError, NotFoundError, ValidationFailed, validation_errors
from herald.kit.ids import new_id
from herald.kit.pagination import PageParams
from herald.kit.schemas import compact
from herald.kit.text import slugify
from herald.kit.time import isoformat, utcnow
from herald.models import NotificationGroup, Workflow
from herald.organizations.repository import OrganizationRepository
from herald.webhooks.events import emit
from herald.workflows.repository import WorkflowRepository
from herald.workflows.schemas import (
    ACTION_STEP_TYPES,
    CHANNEL_STEP_TYPES,
    CreateWorkflowRequest,
    DelayRegularMetadata,
    DelayScheduledMetadata,
    DigestRegularMetadata,
    DigestTimedMetadata,
    MessageTemplate,
    PreferenceSettings,
    StepRequest,
    StepVariantRequest,
    ThrottleDynamicMetadata,
    ThrottleFixedMetadata,
    UpdateWorkflowRequest,
)
from herald.workflows.schemas import (
    NotificationGroup as NotificationGroupSchema,
)
from herald.workflows.schemas import (
    Workflow as WorkflowSchema,
)

DEFAULT_GROUP_NAME = "General"
MAX_TRIGGER_IDENTIFIER_LENGTH = 300

# ---------------------------------------------------------------------------
# Template variables
# ---------------------------------------------------------------------------

# Namespaces the renderer fills itself; anything else written bare is payload.
SYSTEM_NAMESPACES = frozenset({"subscriber", "actor", "step", "branding", "tenant", "payload", "env"})
# Block helpers that keep the surrounding context; every other block (each,
# with, and helpers such as groupBy) renders its body against something else,
# so bare names inside it are not payload keys.
_CONTEXT_KEEPING_BLOCKS = frozenset({"if", "unless"})
# An output ({{ ... }}, Handlebars or Liquid) or a Liquid tag ({% ... %}).
_MUSTACHE_OR_TAG = re.compile(r"\{\{\{?(.*?)\}?\}\}|\{%-?(.*?)-?%\}", re.DOTALL)
# {% for item in payload.items limit: 3 %}: the loop variable and the collection.
_LIQUID_LOOP = re.compile(r"^(?:for|tablerow)\s+([A-Za-z_][\w-]*)\s+in\s+(.*?)(?:\s+(?:limit|offset|cols)\s*:.*|\s+reversed\b.*)?$", re.DOTALL)
_LIQUID_ASSIGN = re.compile(r"^assign\s+([A-Za-z_][\w-]*)\s*=\s*(.*)$", re.DOTALL)
_LIQUID_WORDS = frozenset({"and", "or", "contains", "blank", "empty", "nil"})
_TOKEN = re.compile(r'"[^"]*"|\'[^\']*\'|[()]|[^\s()]+')
_PATH = re.compile(r"^[A-Za-z_$][\w$-]*(?:\.[\w$-]+)*$")
_LITERALS = frozenset({"true", "false", "null", "undefined", "this"})


@dataclass(frozen=True)
class TemplateVariables:
    """The trigger's variables: payload keys and subscriber fields, in order of first use."""

    payload: list[str]
    subscriber: list[str]


def _argument_paths(tokens: list[str]) -> list[str]:
    """The data paths among a helper's arguments (not literals, helper names or block params)."""
    paths: list[str] = []
    after_paren = False
    for token in tokens:
        if token == "as":  # block params: {{#each payload.items as |item|}}
            break
        if token in ("(", ")"):
            after_paren = token == "("
            continue
        if after_paren:  # a sub-expression's helper name: (uppercase payload.name)
            after_paren = False
            continue
        if "=" in token:  # hash argument: key=value
            token = token.split("=", 1)[1]
        if token in _LITERALS or token.startswith("this.") or not _PATH.match(token):
            continue
        paths.append(token)
    return paths


def _parse_mustache(expression: str) -> tuple[str, str | None, list[str]]:
    """Split one mustache expression into (kind, block name, data paths).

    kind is "open" for ``{{#block ...}}``, "close" for ``{{/block}}``, "skip"
    for comments and partials, and "value" otherwise (``{{else if x}}``
    included: it stays in its block).
    """
    text = expression.strip().strip("~").strip()
    if not text or text[0] in "!>":
        return "skip", None, []
    # Liquid filters ({{ payload.name | upcase }}) and block params (as |item|) end the expression.
    text = text.split("|", 1)[0].strip()
    if text.startswith("/"):
        return "close", text[1:].strip(), []
    kind = "value"
    if text[0] in "#^":
        kind = "open"
        text = text[1:].strip()
    elif text[0] == "&":
        text = text[1:].strip()
    tokens = _TOKEN.findall(text)
    if tokens and tokens[0] == "else":
        tokens = tokens[1:]
        if not tokens:
            return "skip", None, []
        # {{else if payload.x}}: a condition of the enclosing block.
        return "value", None, _argument_paths(tokens[1:])
    if not tokens:
        return "skip", None, []
    if kind == "open" and len(tokens) == 1:
        # A Mustache section: {{#payload.items}}...{{/payload.items}}.
        return kind, tokens[0], _argument_paths(tokens)
    if kind == "open" or len(tokens) > 1:
        # A block or a helper call: {{#each payload.items}}, {{uppercase payload.name}}.
        return kind, tokens[0], _argument_paths(tokens[1:])
    return kind, None, _argument_paths(tokens)


def _liquid_tag(tag: str) -> tuple[str, str | None, list[str]]:
    """Split one Liquid tag into (name, the variable it defines, the data paths it reads)."""
    text = tag.strip()
    name = text.split(None, 1)[0] if text else ""
    loop = _LIQUID_LOOP.match(text)
    if loop:
        return name, loop.group(1), _liquid_paths(loop.group(2))
    assign = _LIQUID_ASSIGN.match(text)
    if assign:
        return name, assign.group(1), _liquid_paths(assign.group(2).split("|", 1)[0])
    if name in ("capture", "increment", "decrement"):
        defined = text.split(None, 1)[1].strip() if len(text.split(None, 1)) > 1 else None
        return name, defined, []
    if name in ("if", "elsif", "unless", "case", "when"):
        return name, None, _liquid_paths(text[len(name) :])
    return name, None, []


def _liquid_paths(expression: str) -> list[str]:
    tokens = [token.rstrip(",") for token in re.split(r"[\s()]+|\.\.", expression) if token]
    return [token for token in _argument_paths(tokens) if token not in _LIQUID_WORDS]


def variables_in_text(text: str) -> TemplateVariables:
    """The payload and subscriber variables a Handlebars or Liquid text uses.

    ``{{payload.order.id}}`` and a bare ``{{name}}`` (Novu v1's form) are
    payload variables ``order.id`` and ``name``; ``{{subscriber.firstName}}``
    is the subscriber variable ``firstName``; other system namespaces (actor,
    step, branding, tenant) are filled by the renderer and left out. Names a
    Liquid template defines itself (``{% for e in step.events %}``'s ``e``,
    ``assign``, ``capture``) are not variables either.
    """
    payload: dict[str, None] = {}
    subscriber: dict[str, None] = {}
    scopes: list[tuple[str, bool]] = []  # Handlebars blocks: (block name, keeps context)
    loops: list[set[str]] = []  # Liquid loops: the names each defines
    assigned: set[str] = set()  # Liquid assign/capture: defined for the rest of the text
    skipping_until: str | None = None  # inside {% comment %} or {% raw %}
    for match in _MUSTACHE_OR_TAG.finditer(text):
        if match.group(2) is not None:
            name, defined, paths = _liquid_tag(match.group(2))
            if skipping_until is not None:
                if name == skipping_until:
                    skipping_until = None
                continue
            if name in ("comment", "raw"):
                skipping_until = "end" + name
                continue
            if name in ("endfor", "endtablerow"):
                if loops:
                    loops.pop()
                continue
            kind = "value"
        else:
            if skipping_until is not None:
                continue
            kind, name, paths = _parse_mustache(match.group(1))
            defined = None
            if kind == "close":
                for index in range(len(scopes) - 1, -1, -1):
                    if scopes[index][0] == name:
                        del scopes[index:]
                        break
                continue
            if kind == "skip":
                continue
        local = assigned.union(*loops)
        in_other_context = any(not keeps for _, keeps in scopes)
        for path in paths:
            head, _, rest = path.partition(".")
            if head in local:
                continue
            if head == "payload":
                if rest:
                    payload.setdefault(rest)
            elif head == "subscriber":
                if rest:
                    subscriber.setdefault(rest)
            elif head in SYSTEM_NAMESPACES or in_other_context:
                continue
            else:
                payload.setdefault(path)
        if match.group(2) is not None:
            if name in ("for", "tablerow") and defined:
                loops.append({defined, "forloop", "tablerowloop"})
            elif defined:
                assigned.add(defined)
        elif kind == "open" and name is not None:
            scopes.append((name, name in _CONTEXT_KEEPING_BLOCKS))
    return TemplateVariables(list(payload), list(subscriber))


def template_fields(template: dict[str, Any]) -> Iterator[tuple[Loc, str]]:
    """Each text of a step's template that is rendered, with where it is in the template (``("content", 0, "url")``)."""
    for key in ("subject", "content", "title", "preheader", "senderName"):
        value = template.get(key)
        if isinstance(value, str):
            yield (key,), value
        elif key == "content" and isinstance(value, list):
            for index, block in enumerate(value):
                if isinstance(block, dict):
                    for field in ("content", "url"):
                        if isinstance(block.get(field), str):
                            yield (key, index, field), block[field]
    cta = template.get("cta")
    if isinstance(cta, dict):
        data = cta.get("data")
        if isinstance(data, dict) and isinstance(data.get("url"), str):
            yield ("cta", "data", "url"), data["url"]
        action = cta.get("action")
        buttons = action.get("buttons") if isinstance(action, dict) else None
        for index, button in enumerate(buttons if isinstance(buttons, list) else []):
            if isinstance(button, dict):
                for field in ("content", "resultContent"):
                    if isinstance(button.get(field), str):
                        yield ("cta", "action", "buttons", index, field), button[field]


def _template_texts(template: dict[str, Any]) -> Iterator[str]:
    for _, text in template_fields(template):
        yield text


def _other_rendered_fields(template: dict[str, Any]) -> Iterator[tuple[Loc, str]]:
    """An in-app step's avatar and data strings: rendered too, though the trigger's variables leave them out."""
    if isinstance(template.get("avatar"), str):
        yield ("avatar",), template["avatar"]
    pending: list[tuple[Loc, Any]] = [(("data",), template.get("data"))]
    while pending:
        loc, value = pending.pop()
        if isinstance(value, str):
            yield loc, value
        elif isinstance(value, dict) and len(loc) < 10:
            pending += [((*loc, str(key)), item) for key, item in value.items()]
        elif isinstance(value, list) and len(loc) < 10:
            pending += [((*loc, index), item) for index, item in enumerate(value)]


def template_problems(template: dict[str, Any], loc: Loc) -> list[dict[str, Any]]:
    """Validation errors for the texts of ``template`` (at ``loc``) that do not parse or name unknown filters."""
    errors: list[dict[str, Any]] = []
    for field, text in (*template_fields(template), *_other_rendered_fields(template)):
        for problem in check_template(text):
            errors.append(_error((*loc, *field), f"template cannot be used: {problem}", text[:200]))
    return errors


def _payload_key(name: str) -> str:
    return name[len("payload.") :] if name.startswith("payload.") else name


def workflow_variables(steps: Iterable[dict[str, Any]]) -> TemplateVariables:
    """The variables of a workflow's stored steps and their variants.

    Besides what the texts use, declared ``template.variables`` and the
    payload keys the steps read (a digest's ``digestKey``, a scheduled
    delay's ``delayPath``) are payload variables too: a trigger needs them.
    """
    payload: dict[str, None] = {}
    subscriber: dict[str, None] = {}
    for step in steps:
        for version in (step, *(step.get("variants") or [])):
            template = version.get("template") or {}
            for text in _template_texts(template):
                found = variables_in_text(text)
                payload.update(dict.fromkeys(found.payload))
                subscriber.update(dict.fromkeys(found.subscriber))
            for declared in template.get("variables") or []:
                if isinstance(declared, dict) and isinstance(declared.get("name"), str):
                    payload.setdefault(_payload_key(declared["name"]))
            metadata = version.get("metadata") or {}
            for key in ("digestKey", "delayPath", "throttleKey", "dynamicKey"):
                if isinstance(metadata.get(key), str) and metadata[key]:
                    payload.setdefault(_payload_key(metadata[key]))
    return TemplateVariables(list(payload), list(subscriber))


# ---------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------

_METADATA_MODELS: dict[str, dict[str, type[BaseModel]]] = {
    "digest": {"regular": DigestRegularMetadata, "backoff": DigestRegularMetadata, "timed": DigestTimedMetadata},
    "delay": {"regular": DelayRegularMetadata, "scheduled": DelayScheduledMetadata},
    "throttle": {"fixed": ThrottleFixedMetadata, "dynamic": ThrottleDynamicMetadata},
}

Loc = tuple[str | int, ...]


def metadata_keys(step_type: str, kind: str) -> frozenset[str] | None:
    """The metadata keys a step of this type and kind takes (``digest``, ``timed``); None for an unknown kind."""
    model = _METADATA_MODELS.get(step_type, {}).get(kind)
    return frozenset(model.model_fields) if model is not None else None


def _error(loc: Loc, message: str, value: Any = None, *, missing: bool = False) -> dict[str, Any]:
    return {"type": "missing" if missing else "value_error", "loc": loc, "msg": message, "input": value}


def _check_metadata(step_type: str, metadata: dict[str, Any] | None, loc: Loc) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The metadata to store for a step of this type, or the errors that prevent it."""
    if step_type not in ACTION_STEP_TYPES:
        if metadata:
            return None, [_error(loc, "metadata applies to digest, delay and throttle steps only", metadata)]
        return None, []
    if metadata is None:
        return None, [_error(loc, "is required", missing=True)]
    kinds = _METADATA_MODELS[step_type]
    kind = metadata.get("type")
    if kind is None:
        return None, [_error((*loc, "type"), "is required", missing=True)]
    if kind not in kinds:
        allowed = ", ".join(kinds)
        return None, [_error((*loc, "type"), f"must be one of {allowed} for {step_type} steps", kind)]
    try:
        parsed = kinds[kind].model_validate(metadata)
    except ValidationError as exc:
        return None, [{**error, "loc": (*loc, *error["loc"])} for error in exc.errors()]
    errors: list[dict[str, Any]] = []
    if isinstance(parsed, DigestRegularMetadata) and (parsed.type == "backoff" or parsed.backoff):
        for field in ("backoffAmount", "backoffUnit"):
            if getattr(parsed, field) is None:
                errors.append(_error((*loc, field), "is required", missing=True))
    # Calendar months are counted whole (the engine cannot add 1.5 months).
    for amount_field, unit_field in (("amount", "unit"), ("backoffAmount", "backoffUnit")):
        amount, unit = getattr(parsed, amount_field, None), getattr(parsed, unit_field, None)
        if unit == "months" and isinstance(amount, float) and not amount.is_integer():
            errors.append(_error((*loc, amount_field), "must be a whole number when the unit is months", amount))
    if isinstance(parsed, DigestTimedMetadata) and parsed.timed is not None and parsed.timed.monthlyType == "on":
        for field in ("ordinal", "ordinalValue"):
            if getattr(parsed.timed, field) is None:
                errors.append(_error((*loc, "timed", field), "is required", missing=True))
    return parsed.model_dump(by_alias=True, exclude_none=True), errors


def _check_content(template: MessageTemplate, loc: Loc) -> list[dict[str, Any]]:
    if template.type in CHANNEL_STEP_TYPES - {"email"} and isinstance(template.content, list):
        blocks = [block.model_dump(by_alias=True, exclude_none=True) for block in template.content]
        return [_error((*loc, "content"), f"must be a string for {template.type} steps", blocks)]
    return []


def _stored_template(template: MessageTemplate) -> dict[str, Any]:
    """The template as stored: absent fields left out, except an email's ``layoutId: null``, which
    is kept (it opts the step out of the environment's default layout; absent, the default applies)."""
    stored = template.model_dump(by_alias=True, exclude_none=True)
    if template.type == "email" and "layoutId" in template.model_fields_set and template.layoutId is None:
        stored["layoutId"] = None
    return stored


def _versions_by_id(steps: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A workflow's stored steps and variants by ``_id``: an update that sends one back keeps its identity."""
    found: dict[str, dict[str, Any]] = {}
    for step in steps:
        for version in (step, *(step.get("variants") or [])):
            if isinstance(version.get("_id"), str):
                found[version["_id"]] = version
    return found


def _build_version(
    request: StepVariantRequest,
    known: dict[str, dict[str, Any]],
    loc: Loc,
    errors: list[dict[str, Any]],
    *,
    check_templates: bool,
) -> dict[str, Any]:
    template = request.template
    metadata, metadata_errors = _check_metadata(template.type, request.metadata, (*loc, "metadata"))
    errors.extend(metadata_errors)
    errors.extend(_check_content(template, (*loc, "template")))
    if check_templates:
        errors.extend(template_problems(_stored_template(template), (*loc, "template")))
    previous = known.get(request.id or "", {})
    version = compact({
        "_id": request.id or new_id(),
        "uuid": request.uuid or previous.get("uuid") or str(uuid.uuid4()),
        "name": request.name or template.name or template.type,
        "_templateId": request.template_id or previous.get("_templateId") or new_id(),
        "active": True if request.active is None else request.active,
        "shouldStopOnFail": bool(request.shouldStopOnFail),
        "template": _stored_template(template),
        "filters": [item.model_dump(by_alias=True) for item in request.filters or []],
        "metadata": metadata,
        "replyCallback": request.replyCallback.model_dump(by_alias=True, exclude_none=True)
        if request.replyCallback is not None
        else None,
    })
    # A v2 step sent back with its _id keeps what only v2 reads (workflows/controls.py).
    for key in ("stepId", "controlValues"):
        if key in previous:
            version[key] = previous[key]
    return version


def build_steps(
    requests: Sequence[StepRequest], existing: Iterable[dict[str, Any]] = (), *, check_templates: bool = True
) -> list[dict[str, Any]]:
    """The stored form of the requested steps; raises ValidationFailed for rules pydantic cannot check.

    Each step is chained to the one before it by ``_parentId``, as Novu does. With
    ``check_templates`` (v1's rule), a text that does not parse or names an unknown
    filter is refused too; v2 saves it and reports it as the step's issues instead.
    """
    known = _versions_by_id(existing)
    errors: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    seen_uuids: set[str] = set()
    parent_id: str | None = None
    for index, request in enumerate(requests):
        loc: Loc = ("steps", index)
        step = _build_version(request, known, loc, errors, check_templates=check_templates)
        variants = []
        for variant_index, variant_request in enumerate(request.variants or []):
            variant_loc: Loc = (*loc, "variants", variant_index)
            if variant_request.template.type != request.template.type:
                errors.append(
                    _error(
                        (*variant_loc, "template", "type"),
                        f"must be {request.template.type}, the type of its step",
                        variant_request.template.type,
                    )
                )
            variants.append(_build_version(variant_request, known, variant_loc, errors, check_templates=check_templates))
        step["variants"] = variants
        for version, version_loc in ((step, loc), *((v, (*loc, "variants", i)) for i, v in enumerate(variants))):
            if version["_id"] in seen_ids:
                errors.append(_error((*version_loc, "_id"), "must be unique among the workflow's steps", version["_id"]))
            if version["uuid"] in seen_uuids:
                errors.append(_error((*version_loc, "uuid"), "must be unique among the workflow's steps", version["uuid"]))
            seen_ids.add(version["_id"])
            seen_uuids.add(version["uuid"])
        if parent_id is not None:
            step["_parentId"] = parent_id
        parent_id = step["_id"]
        steps.append(step)
    if errors:
        raise ValidationFailed(validation_errors(errors))
    return steps


def _apply_steps(workflow: Workflow, steps: list[dict[str, Any]]) -> None:
    workflow.steps = steps
    variables = workflow_variables(steps)
    workflow.variables = [{"name": name} for name in variables.payload]
    workflow.subscriber_variables = [{"name": name} for name in variables.subscriber]


# ---------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------


def group_to_schema(group: NotificationGroup) -> NotificationGroupSchema:
    return NotificationGroupSchema.model_validate({
        "_id": group.id,
        "name": group.name,
        "_environmentId": group.environment_id,
        "_organizationId": group.organization_id,
    })


def to_schema(workflow: Workflow, group: NotificationGroup | None = None) -> WorkflowSchema:
    """The spec's Workflow object; ``notificationGroup`` is included when the group is given."""
    return WorkflowSchema.model_validate(
        compact({
            "_id": workflow.id,
            "name": workflow.name,
            "description": workflow.description or "",
            "active": workflow.active,
            "draft": not workflow.active,
            "preferenceSettings": {**PreferenceSettings().model_dump(), **(workflow.preference_settings or {})},
            "critical": workflow.critical,
            "severity": workflow.severity or "none",
            "tags": list(workflow.tags or []),
            "steps": workflow.steps or [],
            "_organizationId": workflow.organization_id,
            "_creatorId": workflow.creator_id,
            "_environmentId": workflow.environment_id,
            "_notificationGroupId": workflow.notification_group_id,
            "triggers": [
                {
                    "type": "event",
                    "identifier": workflow.trigger_identifier,
                    "variables": workflow.variables or [],
                    "subscriberVariables": workflow.subscriber_variables or [],
                }
            ],
            "deleted": workflow.deleted,
            "deletedAt": isoformat(workflow.deleted_at) or "",
            "deletedBy": workflow.deleted_by or "",
            "notificationGroup": group_to_schema(group) if group is not None else None,
            "data": workflow.data,
            "createdAt": isoformat(workflow.created_at),
            "updatedAt": isoformat(workflow.updated_at),
        })
    )


@dataclass(frozen=True)
class WorkflowView:
    """A workflow with its notification group, ready to be shaped as a response."""

    workflow: Workflow
    group: NotificationGroup | None

    def to_schema(self) -> WorkflowSchema:
        return to_schema(self.workflow, self.group)


# ---------------------------------------------------------------------------
# Use cases
# ---------------------------------------------------------------------------


async def _require(repository: WorkflowRepository, principal: Principal, workflow_id: str) -> Workflow:
    workflow = await repository.get(principal.environment_id, workflow_id)
    if workflow is None:
        raise NotFoundError(f"Workflow with id {workflow_id} not found")
    return workflow


async def _resolve_group(session: AsyncSession, principal: Principal, group_id: str | None) -> NotificationGroup:
    organizations = OrganizationRepository(session)
    if group_id is not None:
        group = await organizations.get_group(principal.environment_id, group_id)
        if group is None:
            raise NotFoundError(f"Notification group with id {group_id} not found")
        return group
    group = await organizations.get_default_group(principal.environment_id)
    if group is None:
        # Bootstrap gives every environment one; an environment made another way gets it now.
        group = NotificationGroup(
            environment_id=principal.environment_id,
            organization_id=principal.organization_id,
            name=DEFAULT_GROUP_NAME,
        )
        WorkflowRepository(session).add(group)
        await session.flush()
    return group


def refuse_code_first_steps(workflow: Workflow) -> None:
    """A workflow synced from a bridge has its steps in code: they change there (and with ``novu sync``), not here."""
    if workflow.origin == "external":
        raise BadRequestError(
            f"Workflow {workflow.trigger_identifier} is written in code and synced from its bridge: "
            "change its steps in the code and run novu sync"
        )


async def default_group(session: AsyncSession, principal: Principal) -> NotificationGroup:
    """The environment's default notification group (made now when it has none)."""
    return await _resolve_group(session, principal, None)


def _conflict(identifier: str) -> ConflictError:
    return ConflictError(f"Workflow with trigger identifier {identifier} already exists in this environment")


async def _claim_identifier(
    repository: WorkflowRepository, principal: Principal, identifier: str, *, excluding_id: str | None = None
) -> None:
    if await repository.identifier_taken(principal.environment_id, identifier, excluding_id=excluding_id):
        raise _conflict(identifier)


async def _flush(session: AsyncSession, identifier: str) -> None:
    """Write now; a concurrent request that took the identifier first fails on the unique index."""
    try:
        await session.flush()
    except IntegrityError as exc:
        raise _conflict(identifier) from exc


def derive_trigger_identifier(name: str) -> str:
    """Novu's rule: the slugified name. A name with nothing to slugify needs an explicit identifier."""
    identifier = slugify(name)[:MAX_TRIGGER_IDENTIFIER_LENGTH].strip("-")
    if not identifier:
        message = f"must be sent when the name ({name!r}) has no letters or digits to make one from"
        raise ValidationFailed(validation_errors([_error(("triggerIdentifier",), message)]))
    return identifier


async def create_workflow(session: AsyncSession, principal: Principal, request: CreateWorkflowRequest) -> WorkflowView:
    repository = WorkflowRepository(session)
    identifier = request.triggerIdentifier or derive_trigger_identifier(request.name)
    steps = build_steps(request.steps)
    group = await _resolve_group(session, principal, request.notificationGroupId)
    await _claim_identifier(repository, principal, identifier)
    now = utcnow()
    workflow = Workflow(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        notification_group_id=group.id,
        creator_id=principal.api_key_id,
        name=request.name,
        description=request.description or "",
        trigger_identifier=identifier,
        active=request.active,
        draft=not request.active,
        critical=bool(request.critical),
        severity=request.severity or "none",
        tags=list(request.tags or []),
        preference_settings=(request.preferenceSettings or PreferenceSettings()).model_dump(),
        data=request.data,
        deleted=False,
        created_at=now,
        updated_at=now,
    )
    _apply_steps(workflow, steps)
    repository.add(workflow)
    await _flush(session, identifier)
    return WorkflowView(workflow, group)


async def list_workflows(
    session: AsyncSession, principal: Principal, page: PageParams, search: str | None = None, *, search_tags: bool = False
) -> tuple[list[WorkflowView], int]:
    """One page of the environment's workflows; ``search`` finds by name or identifier (and tag, with ``search_tags``)."""
    repository = WorkflowRepository(session)
    rows, total = await repository.list_page(
        principal.environment_id, offset=page.offset, limit=page.limit, search=search, search_tags=search_tags
    )
    groups = await repository.groups_by_id(principal.environment_id, {row.notification_group_id for row in rows})
    return [WorkflowView(row, groups.get(row.notification_group_id)) for row in rows], total


async def _view(session: AsyncSession, principal: Principal, workflow: Workflow) -> WorkflowView:
    group = await OrganizationRepository(session).get_group(principal.environment_id, workflow.notification_group_id)
    return WorkflowView(workflow, group)


async def find_workflow(session: AsyncSession, principal: Principal, workflow_id: str) -> Workflow:
    """The workflow alone, without its group: what the console's editor and its previews read it for."""
    return await _require(WorkflowRepository(session), principal, workflow_id)


async def get_workflow(session: AsyncSession, principal: Principal, workflow_id: str) -> WorkflowView:
    workflow = await _require(WorkflowRepository(session), principal, workflow_id)
    return await _view(session, principal, workflow)


async def update_workflow(
    session: AsyncSession,
    principal: Principal,
    workflow_id: str,
    request: UpdateWorkflowRequest,
    *,
    step_controls: Sequence[dict[str, Any] | None] | None = None,
) -> WorkflowView:
    """Update a workflow as the v1 body says.

    ``step_controls`` (the console's editor) sets, by step position, the
    ``controlValues`` of the steps whose settings are controls only (an
    ``http_request`` or ``custom`` step), which the v1 body has no field for;
    None at a position keeps what the step holds.
    """
    repository = WorkflowRepository(session)
    workflow = await _require(repository, principal, workflow_id)
    given = request.model_fields_set
    if request.steps is not None:
        refuse_code_first_steps(workflow)
        steps = build_steps(request.steps, existing=workflow.steps or [])
        if step_controls is not None:
            steps = _with_controls(steps, step_controls)
        _apply_steps(workflow, steps)
    if request.notificationGroupId is not None:
        workflow.notification_group_id = (await _resolve_group(session, principal, request.notificationGroupId)).id
    if request.triggerIdentifier is not None and request.triggerIdentifier != workflow.trigger_identifier:
        await _claim_identifier(repository, principal, request.triggerIdentifier, excluding_id=workflow.id)
        workflow.trigger_identifier = request.triggerIdentifier
    if request.name is not None:
        workflow.name = request.name
    if "description" in given:
        workflow.description = request.description or ""
    if request.tags is not None:
        workflow.tags = list(request.tags)
    if request.critical is not None:
        workflow.critical = request.critical
    if request.severity is not None:
        workflow.severity = request.severity
    if request.preferenceSettings is not None:
        workflow.preference_settings = request.preferenceSettings.model_dump()
    if "data" in given:
        workflow.data = request.data
    if request.active is not None:
        workflow.active = request.active
        workflow.draft = not request.active
    workflow.updated_at = utcnow()
    await _flush(session, workflow.trigger_identifier)
    await _workflow_updated(session, workflow)
    return await _view(session, principal, workflow)


def _with_controls(steps: list[dict[str, Any]], step_controls: Sequence[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The steps with the given ``controlValues``, an ``http_request`` step's checked as the v2 routes check them."""
    errors: list[dict[str, Any]] = []
    for index, (step, controls) in enumerate(zip(steps, step_controls, strict=False)):
        if controls is None:
            continue
        if (step.get("template") or {}).get("type") == "http_request":
            for name, why, value in http_request_step.check_controls(controls):
                errors.append(_error(("steps", index, "controlValues", *name.split(".")), why, value))
        step["controlValues"] = dict(controls)
    if errors:
        raise ValidationFailed(validation_errors(errors))
    return steps


async def set_workflow_status(session: AsyncSession, principal: Principal, workflow_id: str, active: bool) -> WorkflowView:
    workflow = await _require(WorkflowRepository(session), principal, workflow_id)
    workflow.active = active
    workflow.draft = not active
    workflow.updated_at = utcnow()
    await session.flush()
    await _workflow_updated(session, workflow)
    return await _view(session, principal, workflow)


async def _workflow_updated(session: AsyncSession, workflow: Workflow) -> None:
    """``workflow.updated`` to the environment's webhook endpoints (herald/webhooks)."""
    data = {
        "_id": workflow.id,
        "workflowId": workflow.trigger_identifier,
        "name": workflow.name,
        "active": workflow.active,
        "critical": workflow.critical,
        "updatedAt": isoformat(workflow.updated_at),
    }
    await emit(session, workflow.environment_id, workflow.organization_id, "workflow.updated", [data])


async def delete_workflow(session: AsyncSession, principal: Principal, workflow_id: str) -> None:
    """Soft-delete: the workflow leaves every read and its trigger identifier is free again."""
    workflow = await _require(WorkflowRepository(session), principal, workflow_id)
    now = utcnow()
    workflow.deleted = True
    workflow.deleted_at = now
    workflow.deleted_by = principal.api_key_id
    workflow.updated_at = now
    await session.flush()


async def list_notification_groups(session: AsyncSession, principal: Principal) -> Sequence[NotificationGroup]:
    return await WorkflowRepository(session).list_groups(principal.environment_id)
