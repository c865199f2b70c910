"""The workflow editor: a workflow's settings and steps, a live preview of each step, and test sends.

One form holds the whole workflow. Its buttons say what to do with it
(``action``): ``save`` writes it through the workflow service (the payload
schema and validatePayload through the v2 service, whose fields they are);
``add:<type>``, ``up:<n>``, ``down:<n>``, ``remove:<n>``, for rows
``condition:<n>[.<group>]``, ``group:<n>``, ``uncondition:<n>.<group>.<row>``,
``block:<n>`` and ``unblock:<n>.<block>``, and ``bodyas:<n>.html`` or
``bodyas:<n>.blocks`` (an email's body written the other way) change what is
shown and answer the editor again,
unsaved (the page works without script; with it, rows are added and removed
in the page); ``preview:<n>`` renders step n; ``test`` triggers the saved
workflow for a subscriber.

The form carries only what the editor shows. Each step is read back over its
stored self (by ``_id``), and each condition group, condition, button and
email block over its stored self too, so what the editor does not show
(``isNegated``, ``resultContent``, a block's styles, variants, controls,
data) is kept on every save. An HTTP request or custom step is edited by its
``controlValues`` (their names are the API's), the others left as stored.
"""

from __future__ import annotations

import copy
import html
import json
import re
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.responses import HTMLResponse, Response

from herald.bridge.client import process_client
from herald.console import security
from herald.console.deps import Console, ConsoleDep
from herald.console.routes.activity import STATUS_LABELS
from herald.engine.steps import http_request as http_request_step
from herald.engine.templates import TemplateError, blocks_as_html, html_to_text
from herald.events import service as events
from herald.events.schemas import TriggerEventRequest
from herald.kit.errors import ConflictError, HeraldError, TooManyRequestsError, ValidationFailed
from herald.layouts import service as layouts
from herald.notifications import service as notifications
from herald.notifications.repository import ActivityFilter
from herald.previews import service as previews
from herald.workflows import service as workflows
from herald.workflows import service_v2 as workflows_v2
from herald.workflows.schemas import CreateWorkflowRequest, PreferenceSettings, StepRequest, UpdateWorkflowRequest
from herald.workflows.schemas_v2 import PatchWorkflowV2Request

router = APIRouter()

STEP_KINDS = (
    ("in_app", "In-app"),
    ("email", "Email"),
    ("sms", "SMS"),
    ("push", "Push"),
    ("chat", "Chat"),
    ("digest", "Digest"),
    ("delay", "Delay"),
    ("throttle", "Throttle"),
    ("custom", "Custom"),
    ("http_request", "HTTP request"),
)
STEP_LABELS = dict(STEP_KINDS)
SEVERITIES = (("none", "None"), ("low", "Low"), ("medium", "Medium"), ("high", "High"))
TIME_UNITS = ("seconds", "minutes", "hours", "days", "weeks", "months")
MAX_STEPS = 50
"""Steps the editor takes in one form (the form's fields are bounded too)."""
MAX_FORM_FIELDS = 1000
"""Fields of the editor's form: a step with its conditions, actions or blocks is some 20 to 40."""
MAX_TEXT = 100_000
"""Characters of one template field (the renderer refuses longer templates anyway)."""
MAX_PAYLOAD_CHARS = 100_000
# Template fields of each step type, as the API names them: (name, label, multi-line).
TEMPLATE_FIELDS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "in_app": (("subject", "Subject", False), ("content", "Content", True), ("avatar", "Avatar URL", False)),
    "email": (
        ("subject", "Subject", False),
        ("preheader", "Preheader", False),
        ("content", "Body (HTML)", True),
        ("layoutId", "Layout identifier", False),
        ("senderName", "Sender name", False),
    ),
    "sms": (("content", "Text", True),),
    "chat": (("content", "Text", True),),
    "push": (("title", "Title", False), ("content", "Body", True)),
}
# Metadata of each action step type, as the API names it: (name, label, choices or None).
METADATA_FIELDS: dict[str, tuple[tuple[str, str, tuple[str, ...] | None], ...]] = {
    "digest": (
        ("type", "Digest type", ("regular", "backoff", "timed")),
        ("amount", "Amount", None),
        ("unit", "Unit", TIME_UNITS),
        ("digestKey", "Digest key", None),
        ("backoffAmount", "Back-off amount", None),
        ("backoffUnit", "Back-off unit", ("", *TIME_UNITS)),
        ("atTime", "Timed: time of day (HH:MM)", None),
        ("weekDays", "Timed: week days (separated by commas)", None),
    ),
    "delay": (
        ("type", "Delay type", ("regular", "scheduled")),
        ("amount", "Amount", None),
        ("unit", "Unit", TIME_UNITS),
        ("delayPath", "Payload key of the time to wait for", None),
    ),
    "throttle": (
        ("type", "Throttle type", ("fixed", "dynamic")),
        ("amount", "Window amount", None),
        ("unit", "Window unit", TIME_UNITS),
        ("threshold", "Threshold", None),
        ("throttleKey", "Throttle key", None),
        ("dynamicKey", "Payload key of the window", None),
    ),
}
CONTROL_STEP_TYPES = frozenset({"http_request", "custom"})
"""Steps whose settings are their ``controlValues`` (the v2 field), edited by the controls' own names."""
HTTP_METHODS = http_request_step.METHODS
MAX_CONTROLS_CHARS = 50_000
"""Characters of a custom step's controls or an HTTP request's response schema, as JSON."""
NEW_STEP_CONTROLS: dict[str, dict[str, Any]] = {"http_request": {"method": "POST", "url": ""}, "custom": {}}
NUMBERS = frozenset({"amount", "backoffAmount", "threshold"})
TIMED_FIELDS = frozenset({"atTime", "weekDays"})
"""A timed digest's fields the editor shows, kept under its metadata's ``timed``."""
# A step's conditions (its ``filters``): what each is compared on, and the 14 operators, in plain words.
CONDITION_SOURCES = (("payload", "Payload"), ("subscriber", "Subscriber"), ("tenant", "Tenant"))
CONDITION_OPERATORS = (
    ("EQUAL", "is equal to"),
    ("NOT_EQUAL", "is not equal to"),
    ("LARGER", "is larger than"),
    ("LARGER_EQUAL", "is larger than or equal to"),
    ("SMALLER", "is smaller than"),
    ("SMALLER_EQUAL", "is smaller than or equal to"),
    ("IN", "is one of"),
    ("NOT_IN", "is not one of"),
    ("ANY_IN", "holds any of"),
    ("ALL_IN", "holds all of"),
    ("BETWEEN", "is between"),
    ("NOT_BETWEEN", "is not between"),
    ("LIKE", "contains"),
    ("NOT_LIKE", "does not contain"),
)
MAX_CONDITIONS = 50
"""Conditions the editor reads for one step (the form's fields are bounded too)."""
_BLOCK_FIELD = re.compile(r"^steps-(\d{1,2})-blocks-(\d{1,3})-content$")
BLOCK_KINDS = (("text", "Text"), ("button", "Button"))
MAX_BLOCKS = 100
"""Blocks the editor reads for one email."""
_CONDITION_FIELD = re.compile(r"^steps-(\d{1,2})-filters-(\d{1,2})-(\d{1,3})-field$")
CHANNELS = (("in_app", "In-app"), ("email", "Email"), ("sms", "SMS"), ("chat", "Chat"), ("push", "Push"))
ACTIONS = (("primary", "Primary action"), ("secondary", "Secondary action"))
MAX_SCHEMA_CHARS = 50_000
MAX_LAYOUTS_OFFERED = 200
"""Layouts an email step's layout choice lists (by name)."""
NEW_STEP_METADATA: dict[str, dict[str, Any]] = {
    "digest": {"type": "regular", "amount": 5, "unit": "minutes"},
    "delay": {"type": "regular", "amount": 5, "unit": "minutes"},
    "throttle": {"type": "fixed", "amount": 1, "unit": "hours", "threshold": 1},
}


def form_name(metadata_field: str) -> str:
    """The form's name of a metadata field: its ``type`` is ``kind`` (``steps-<n>-type`` is the step's own type)."""
    return "kind" if metadata_field == "type" else metadata_field


def _number(text: str) -> int | float | str:
    try:
        value = float(text)
    except ValueError:
        return text  # the service names the field that is not a number
    return int(value) if value.is_integer() else value


def _blocks_from_form(console: Console, form: FormData, index: int, stored: list[Any]) -> list[dict[str, Any]]:
    """An email's blocks (the v1 API's ``content`` as a list) from their rows, each over its stored self.

    Rows are named ``steps-<step>-blocks-<block>-<part>`` and, like conditions,
    may have gaps; what a row does not show of a stored block (``styles``) is kept.
    """
    numbers = sorted(
        int(found.group(2))
        for name in form.keys()
        if (found := _BLOCK_FIELD.match(name)) and int(found.group(1)) == index
    )
    blocks: list[dict[str, Any]] = []
    for number in numbers[:MAX_BLOCKS]:
        prefix = f"steps-{index}-blocks-{number}-"
        before = stored[number] if number < len(stored) and isinstance(stored[number], dict) else {}
        # A select is left out of the form when disabled (a viewer's page): the stored kind then.
        chosen = console.field(form, prefix + "type", 8) or str(before.get("type") or "text")
        kind = "button" if chosen == "button" else "text"
        block = {**before, "type": kind, "content": console.field(form, prefix + "content", MAX_TEXT)}
        url = console.field(form, prefix + "url", 2000)
        if kind == "button" and url:
            block["url"] = url
        else:
            block.pop("url", None)
        blocks.append(block)
    return blocks


def _conditions_from_form(console: Console, form: FormData, index: int, stored: list[Any]) -> list[dict[str, Any]]:
    """Step ``index``'s conditions from their rows, each group and row over its stored self.

    Rows are named ``steps-<step>-filters-<group>-<row>-<part>``; the script
    removes rows and adds them with a higher number, so gaps are expected.
    A row with no field is left out (a row added and not filled in), and so
    is a group left without rows. What a row does not show of a stored
    group (``type``, ``isNegated``) or condition is kept.
    """
    rows: dict[int, list[int]] = {}
    for name in form.keys():
        found = _CONDITION_FIELD.match(name)
        if found and int(found.group(1)) == index:
            rows.setdefault(int(found.group(2)), []).append(int(found.group(3)))
    filters: list[dict[str, Any]] = []
    taken = 0
    for group_index in sorted(rows):
        prefix = f"steps-{index}-filters-{group_index}-"
        old = stored[group_index] if group_index < len(stored) and isinstance(stored[group_index], dict) else {}
        old_children = old.get("children") if isinstance(old.get("children"), list) else []
        children = []
        for row in sorted(rows[group_index]):
            field = console.field(form, f"{prefix}{row}-field", 300)
            if not field or taken >= MAX_CONDITIONS:
                continue
            taken += 1
            before = old_children[row] if row < len(old_children) and isinstance(old_children[row], dict) else {}
            children.append(
                {
                    **before,
                    "on": console.field(form, f"{prefix}{row}-on", 16) or before.get("on") or "payload",
                    "field": field,
                    "operator": console.field(form, f"{prefix}{row}-operator", 16) or before.get("operator") or "EQUAL",
                    "value": console.field(form, f"{prefix}{row}-value", 2000),
                }
            )
        if children:
            group = {"isNegated": False, "type": "GROUP", **old}
            match = console.field(form, prefix + "match", 4) or old.get("value")
            group["value"] = "OR" if match == "OR" else "AND"
            group["children"] = children
            filters.append(group)
    return filters


def _actions_from_form(console: Console, form: FormData, prefix: str, cta: dict[str, Any]) -> dict[str, Any]:
    """An in-app step's ``cta`` with its primary and secondary action (``cta.action.buttons``) from the form.

    A button is its label (``content``) and where it leads (``url``); what
    else a stored button holds (``resultContent``) is kept, and so are
    buttons of any other type.
    """
    action = cta.get("action") if isinstance(cta.get("action"), dict) else {}
    stored = [button for button in action.get("buttons") or [] if isinstance(button, dict)]
    buttons: list[dict[str, Any]] = []
    for kind, _ in ACTIONS:
        before = next((button for button in stored if button.get("type") == kind), {})
        label = console.field(form, f"{prefix}{kind}-label", 300)
        url = console.field(form, f"{prefix}{kind}-url", 2000)
        if not label:
            continue  # no label: no button
        button = {**before, "type": kind, "content": label}
        if url:
            button["url"] = url
        else:
            button.pop("url", None)
        buttons.append(button)
    buttons.extend(button for button in stored if button.get("type") not in ("primary", "secondary"))
    if buttons:
        return {**cta, "type": cta.get("type") or "redirect", "action": {**action, "buttons": buttons}}
    if action:
        return {**cta, "action": {key: value for key, value in action.items() if key != "buttons"}}
    return cta


def _pairs_text(pairs: Any) -> str:
    """``[{key, value}]`` as lines of ``key: value`` (a header's name holds no colon)."""
    if not isinstance(pairs, list):
        return ""
    return "\n".join(f"{pair.get('key', '')}: {pair.get('value', '')}" for pair in pairs if isinstance(pair, dict))


def _pairs_from_text(console: Console, field: str, text: str) -> list[dict[str, str]]:
    """Lines of ``key: value`` as ``[{key, value}]``; a line without a colon is an error of the field."""
    pairs: list[dict[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, colon, value = line.partition(":")
        if not colon or not key.strip():
            console.fail(field, f"Line {number} is not a name and a value separated by a colon (Name: value)")
            continue
        pairs.append({"key": key.strip(), "value": value[1:] if value.startswith(" ") else value})
    return pairs


def _json_control(console: Console, field: str, label: str, text: str) -> tuple[bool, Any]:
    """A control written as JSON: (True, value), or (False, None) with the field's error."""
    try:
        return True, json.loads(text)
    except json.JSONDecodeError as exc:
        console.fail(field, f"{label} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}")
        return False, None


def _controls_from_form(console: Console, form: FormData, index: int, step: dict[str, Any], step_type: str) -> None:
    """An ``http_request`` or ``custom`` step's ``controlValues`` from the form, over the stored ones.

    Controls the editor does not show are kept. Text that is not what the
    field takes (JSON that does not parse, a header line without a colon) is
    an error beside the field, and kept as typed (``editorText``) so the page
    shows it again; the stored control stays as it was.
    """
    prefix = f"steps-{index}-"
    controls = dict(step.get("controlValues") or {}) if isinstance(step.get("controlValues"), dict) else {}
    typed: dict[str, str] = {}
    if step_type == "custom":
        if prefix + "controls" not in form:
            return
        text = console.field(form, prefix + "controls", MAX_CONTROLS_CHARS)
        ok, value = _json_control(console, prefix + "controls", "Controls", text or "{}")
        if ok and not isinstance(value, dict):
            console.fail(prefix + "controls", "Controls must be a JSON object ({...})")
            ok = False
        if ok:
            controls = value
        else:
            typed["controls"] = text
    else:
        if prefix + "url" not in form:
            return  # not shown: kept as stored
        controls["url"] = console.field(form, prefix + "url", http_request_step.MAX_URL)
        # A select is left out of the form when disabled (a viewer's page): the stored method then.
        controls["method"] = console.field(form, prefix + "method", 8) or controls.get("method") or "GET"
        headers_text = console.field(form, prefix + "headers", MAX_CONTROLS_CHARS)
        errors_before = len(console.errors)
        headers = _pairs_from_text(console, prefix + "headers", headers_text)
        if len(console.errors) == errors_before:
            if headers or "headers" in controls:
                controls["headers"] = headers
        else:
            typed["headers"] = headers_text
        body = console.field(form, prefix + "body", http_request_step.MAX_BODY)
        if form.get(prefix + "body-pairs") == "on":
            # Older workflows hold the body as {key, value} pairs: edited as lines, kept as pairs.
            errors_before = len(console.errors)
            pairs = _pairs_from_text(console, prefix + "body", body)
            if len(console.errors) == errors_before:
                controls["body"] = pairs
            else:
                typed["body"] = body
        elif body or "body" in controls:
            controls["body"] = body
        schema_text = console.field(form, prefix + "responseBodySchema", MAX_CONTROLS_CHARS)
        if schema_text.strip():
            ok, value = _json_control(console, prefix + "responseBodySchema", "Response body schema", schema_text)
            if ok:
                controls["responseBodySchema"] = value
            else:
                typed["responseBodySchema"] = schema_text
        else:
            controls.pop("responseBodySchema", None)
        for flag in ("enforceSchemaValidation", "continueOnFailure"):
            # Unticked: false when the step held the control, left out when it did not (a round trip adds nothing).
            if form.get(prefix + flag) == "on":
                controls[flag] = True
            elif flag in controls:
                controls[flag] = False
    step["controlValues"] = controls
    if typed:
        step["editorText"] = typed
    else:
        step.pop("editorText", None)


def _step_from_form(console: Console, form: FormData, index: int, stored: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Step ``index`` of the form, over its stored self when the form names one."""
    prefix = f"steps-{index}-"
    step_id = console.field(form, prefix + "id", 64)
    step_type = console.field(form, prefix + "type", 16)
    step = copy.deepcopy(stored[step_id]) if step_id in stored else {"template": {"type": step_type}}
    template = step.setdefault("template", {})
    step_type = str(template.get("type") or step_type)
    template["type"] = step_type
    step["name"] = (
        console.field(form, prefix + "name", 300) or step.get("name") or STEP_LABELS.get(step_type, step_type)
    )
    step["active"] = form.get(prefix + "active") == "on"
    for name, _, _ in TEMPLATE_FIELDS.get(step_type, ()):
        if prefix + name not in form:
            continue  # not shown (an email of blocks): kept as stored
        value = console.field(form, prefix + name, MAX_TEXT)
        if name == "layoutId":
            # Empty: the environment's default layout (the key left out); "none": no layout at all.
            if value == "none":
                template["layoutId"] = None
            elif value:
                template["layoutId"] = value
            else:
                template.pop("layoutId", None)
        elif value or name == "content":
            template[name] = value
        else:
            template.pop(name, None)
    if step_type == "in_app" and prefix + "redirect" in form:
        url = console.field(form, prefix + "redirect", 2000)
        cta = template.get("cta") if isinstance(template.get("cta"), dict) else {}
        if url:
            template["cta"] = {
                **cta,
                "type": cta.get("type") or "redirect",
                "data": {**(cta.get("data") or {}), "url": url},
            }
        elif cta:
            data = {key: value for key, value in (cta.get("data") or {}).items() if key != "url"}
            template["cta"] = {**cta, "data": data}
    if step_type == "in_app" and prefix + "primary-label" in form:
        cta = template.get("cta") if isinstance(template.get("cta"), dict) else {}
        cta = _actions_from_form(console, form, prefix, cta)
        if cta:
            template["cta"] = cta
    if step_type == "email" and prefix + "blocks" in form:
        content = template.get("content")
        template["content"] = _blocks_from_form(console, form, index, content if isinstance(content, list) else [])
    if step_type in CONTROL_STEP_TYPES:
        _controls_from_form(console, form, index, step, step_type)
    if prefix + "filters" in form:
        stored_filters = step.get("filters") if isinstance(step.get("filters"), list) else []
        step["filters"] = _conditions_from_form(console, form, index, stored_filters)
    if step_type in METADATA_FIELDS:
        metadata = dict(step.get("metadata") or NEW_STEP_METADATA[step_type])
        timed = dict(metadata.get("timed") or {}) if isinstance(metadata.get("timed"), dict) else {}
        for name, _, _ in METADATA_FIELDS[step_type]:
            if prefix + form_name(name) not in form:
                continue
            value = console.field(form, prefix + form_name(name), 300)
            if name in TIMED_FIELDS:
                days = [day.strip().lower() for day in value.split(",") if day.strip()][:7]
                if value:
                    timed[name] = days if name == "weekDays" else value
                else:
                    timed.pop(name, None)
            elif value:
                metadata[name] = _number(value) if name in NUMBERS else value
            else:
                metadata.pop(name, None)
        if timed:
            metadata["timed"] = timed
        else:
            metadata.pop("timed", None)
        # What the chosen kind does not take (a delay's amount once it waits for a payload time) is left out.
        keys = workflows.metadata_keys(step_type, str(metadata.get("type")))
        if keys is not None:
            metadata = {key: value for key, value in metadata.items() if key in keys}
        step["metadata"] = metadata
    return step


def _workflow_from_form(console: Console, form: FormData, stored_steps: list[dict[str, Any]]) -> dict[str, Any]:
    stored = {step["_id"]: step for step in stored_steps if isinstance(step.get("_id"), str)}
    steps = []
    for index in range(MAX_STEPS):
        if f"steps-{index}-type" not in form:
            break
        steps.append(_step_from_form(console, form, index, stored))
    return {
        **_settings_from_form(console, form),
        "name": console.field(form, "name", 300),
        "description": console.field(form, "description", 1000),
        "tags": [tag.strip() for tag in console.field(form, "tags", 2000).split(",") if tag.strip()][:50],
        "critical": form.get("critical") == "on",
        "severity": console.field(form, "severity", 16) or "none",
        "active": form.get("active") == "on",
        "steps": steps,
        "test_payload": console.field(form, "test_payload", MAX_PAYLOAD_CHARS),
        "preview_subscriber": console.field(form, "preview_subscriber", 100),
        "test_subscriber": console.field(form, "test_subscriber", 100),
    }


def _settings_from_form(console: Console, form: FormData) -> dict[str, Any]:
    """The workflow settings beyond its name: default channel preferences, payload schema, validate payload."""
    return {
        "preferences": {channel: form.get(f"preference-{channel}") == "on" for channel, _ in CHANNELS},
        "payload_schema": console.field(form, "payload_schema", MAX_SCHEMA_CHARS),
        "validate_payload": form.get("validate_payload") == "on",
    }


def _nested(names: list[str]) -> dict[str, Any]:
    """``["order.id", "name"]`` as ``{"order": {"id": "order.id"}, "name": "name"}``: a payload to start from."""
    payload: dict[str, Any] = {}
    for name in names[:100]:
        node = payload
        parts = name.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node.setdefault(parts[-1], name)
    return payload


def example_payload(schema: dict[str, Any] | None, variables: list[str]) -> dict[str, Any]:
    """A test payload: the payload schema's example, else its properties' examples or defaults, else the variables the templates use."""
    if isinstance(schema, dict):
        examples = schema.get("examples")
        if isinstance(examples, list) and examples and isinstance(examples[0], dict):
            return examples[0]
        properties = schema.get("properties")
        if isinstance(properties, dict):
            found: dict[str, Any] = {}
            for key, spec in properties.items():
                if isinstance(spec, dict):
                    if isinstance(spec.get("examples"), list) and spec["examples"]:
                        found[key] = spec["examples"][0]
                    elif "default" in spec:
                        found[key] = spec["default"]
            if found:
                return found
    return _nested(variables)


def _state_of(workflow: Any) -> dict[str, Any]:
    """The editor's state for a stored workflow."""
    variables = workflows.workflow_variables(workflow.steps or []).payload
    preferences = PreferenceSettings.model_validate(workflow.preference_settings or {}).model_dump()
    schema = workflow.payload_schema
    return {
        "preferences": {channel: bool(preferences.get(channel, True)) for channel, _ in CHANNELS},
        "payload_schema": json.dumps(schema, indent=2) if schema is not None else "",
        "validate_payload": bool(workflow.validate_payload),
        "name": workflow.name,
        "description": workflow.description or "",
        "tags": list(workflow.tags or []),
        "critical": bool(workflow.critical),
        "severity": workflow.severity or "none",
        "active": bool(workflow.active),
        "steps": copy.deepcopy(list(workflow.steps or [])),
        "test_payload": json.dumps(example_payload(workflow.payload_schema, variables), indent=2),
        "preview_subscriber": "",
        "test_subscriber": "",
    }


def _parse_payload(console: Console, text: str) -> dict[str, Any] | None:
    try:
        payload = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        console.fail("test_payload", f"Test payload is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}")
        return None
    if not isinstance(payload, dict):
        console.fail("test_payload", "Test payload must be a JSON object ({...})")
        return None
    return payload


async def _test_rows(console: Console, transaction_id: str | None) -> list[Any]:
    """The test send's run as Activity lists it (none until the engine has started it)."""
    if not transaction_id or not console.allows("activity.read"):
        return []
    rows, _ = await notifications.activity_page(
        console.db, console.principal, ActivityFilter(transaction_ids=[transaction_id[:255]])
    )
    return list(rows)


IN_CODE = "This workflow is written in code and synced from its bridge: change it in the code and run novu sync"


async def _load(console: Console, workflow_id: str) -> Any:
    return await workflows.find_workflow(console.db, console.principal, workflow_id[:64])


async def _preview(console: Console, workflow: Any, state: dict[str, Any], index: int) -> dict[str, Any]:
    """Step ``index`` of ``state`` rendered; ``{"error": ...}`` when it cannot be."""
    steps = state["steps"]
    if not 0 <= index < len(steps):
        return {"error": "There is no such step to preview"}
    payload = _parse_payload(console, state["test_payload"])
    if payload is None:
        return {"error": console.errors["test_payload"], "index": index}
    if steps[index].get("bridge"):
        return await _bridge_preview(console, workflow, steps[index], payload, index)
    about = previews.WorkflowOfPreview(workflow.trigger_identifier, bool(workflow.is_translation_enabled))
    try:
        rendered = await previews.preview_stored_step(
            console.db,
            console.principal.environment_id,
            console.organization_id,
            about,
            steps[index],
            payload,
            state["preview_subscriber"],
        )
    except TemplateError as exc:
        return {"error": f"The template cannot be rendered: {exc.message}", "index": index}
    return {**rendered, "index": index}


async def _bridge_preview(
    console: Console, workflow: Any, step: dict[str, Any], payload: dict[str, Any], index: int
) -> dict[str, Any]:
    """A code-first step as its bridge renders it for the test payload."""
    state = console.request.app.state
    answer = await previews.preview_bridge_step(
        console.db,
        console.principal.environment_id,
        workflow.trigger_identifier,
        step,
        {"payload": payload, "subscriber": {}},
        http=process_client(state),
        box=state.secret_box,
    )
    if "error" in answer:
        return {"error": f"The bridge could not preview the step: {answer['error']['message']}", "index": index}
    step_type = str((step.get("template") or {}).get("type") or "")
    rendered = {"type": step_type, **answer["preview"], "index": index}
    if step_type == "in_app" and isinstance(rendered.get("body"), str):
        rendered["text"] = html_to_text(rendered["body"])
    return rendered


async def _editor(
    console: Console,
    workflow: Any,
    state: dict[str, Any],
    *,
    status_code: int = 200,
    preview: dict[str, Any] | None = None,
    test_run: str | None = None,
    notice: str | None = None,
) -> Response:
    if preview is not None and preview.get("type") == "email":
        # The page shows the email in a srcdoc frame, which keeps the page's policy: its styles by their hashes.
        security.allow_inline_styles(console.request.scope, preview.get("body") or "")
    offered, _ = await layouts.list_page(
        console.db, console.principal, offset=0, limit=MAX_LAYOUTS_OFFERED, order_by="name", descending=False
    )
    return console.render(
        "editor.html",
        layouts=offered,
        default_layout=next((layout for layout in offered if layout.is_default), None),
        title=f"Edit {workflow.name}",
        status_code=status_code,
        workflow=workflow,
        state=state,
        preview=preview,
        test_run=test_run,
        notice=notice,
        http_methods=HTTP_METHODS,
        pairs_text=_pairs_text,
        as_json=lambda value: json.dumps(value, indent=2, ensure_ascii=False),
        # A code-first workflow's content lives in its code (herald/bridge): shown, previewed, not edited here.
        can_edit=console.allows("workflows.write") and workflow.origin != "external",
        in_code=workflow.origin == "external",
        can_test=console.allows("test_sends.send"),
        step_kinds=STEP_KINDS,
        step_labels=STEP_LABELS,
        template_fields=TEMPLATE_FIELDS,
        metadata_fields=METADATA_FIELDS,
        severities=SEVERITIES,
        channels=CHANNELS,
        test_rows=await _test_rows(console, test_run),
        status_labels=STATUS_LABELS,
        actions=ACTIONS,
        condition_sources=CONDITION_SOURCES,
        condition_operators=CONDITION_OPERATORS,
        form_name=form_name,
        block_kinds=BLOCK_KINDS,
    )


@router.get("/workflows/new")
async def new_workflow_page(console: ConsoleDep) -> Response:
    console.authorize("workflows.write")
    return console.render("workflow_new.html", title="New workflow", name="")


@router.post("/workflows/new")
async def create_workflow(console: ConsoleDep) -> Response:
    console.authorize("workflows.write")
    form = await console.form()
    name = console.field(form, "name", 300)
    if not name:
        console.fail("name", "Enter a name")
        return console.render("workflow_new.html", title="New workflow", status_code=422, name=name)
    try:
        view = await workflows.create_workflow(
            console.db, console.principal, CreateWorkflowRequest(name=name, steps=[], active=True)
        )
    except (ValidationFailed, ConflictError) as exc:
        console.errors_from(exc, "name")
        return console.render("workflow_new.html", title="New workflow", status_code=exc.status_code, name=name)
    except ValidationError:
        console.fail("name", "Enter a name of at most 300 characters")
        return console.render("workflow_new.html", title="New workflow", status_code=422, name=name)
    workflow = view.workflow
    console.record("workflow.created", "workflow", workflow.id, changes={"name": name})
    return console.redirect(f"/console/workflows/{workflow.id}/edit", flash=f"Workflow {name} created")


@router.get("/workflows/{workflow_id}/edit")
async def editor_page(workflow_id: str, console: ConsoleDep) -> Response:
    console.authorize("workflows.read")
    workflow = await _load(console, workflow_id)
    state = _state_of(workflow)
    # A stored template that does not render (saved before templates were checked) shows its error at once;
    # when the preview pool is busy the page opens without the check (Save makes it anyway).
    try:
        broken = await previews.broken_templates(console.principal.environment_id, state["steps"])
    except TooManyRequestsError:
        broken = []
    for found in broken:
        console.fail(f"steps-{found.step}-{found.field}", found.message)
    return await _editor(console, workflow, state)


def _moved(steps: list[dict[str, Any]], action: str) -> list[dict[str, Any]] | None:
    """The steps after ``add:<type>``, ``up:<n>``, ``down:<n>``, ``remove:<n>`` or a condition's action; None for any other."""
    verb, _, argument = action.partition(":")
    steps = list(steps)
    if verb == "add" and argument in STEP_LABELS:
        step: dict[str, Any] = {"name": STEP_LABELS[argument], "active": True, "template": {"type": argument}}
        if argument in NEW_STEP_METADATA:
            step["metadata"] = dict(NEW_STEP_METADATA[argument])
        if argument in NEW_STEP_CONTROLS:
            step["controlValues"] = dict(NEW_STEP_CONTROLS[argument])
        return [*steps, step]
    if verb in ("condition", "uncondition", "group"):
        return _conditions_moved(steps, verb, argument)
    if verb == "bodyas":
        return _body_switched(steps, argument)
    if verb in ("block", "unblock"):
        return _blocks_moved(steps, verb, argument)
    if verb not in ("up", "down", "remove") or not argument.isdigit() or int(argument) >= len(steps):
        return None
    index = int(argument)
    if verb == "remove":
        del steps[index]
    else:
        other = index - 1 if verb == "up" else index + 1
        if 0 <= other < len(steps):
            steps[index], steps[other] = steps[other], steps[index]
    return steps


def _blocks_moved(steps: list[dict[str, Any]], verb: str, argument: str) -> list[dict[str, Any]] | None:
    """``block:<step>`` adds a text block to an email of blocks; ``unblock:<step>.<block>`` removes one (without script)."""
    parts = argument.split(".")
    if not all(part.isdigit() for part in parts) or int(parts[0]) >= len(steps):
        return None
    step = copy.deepcopy(steps[int(parts[0])])
    template = step.get("template") or {}
    blocks = template.get("content")
    if not isinstance(blocks, list):
        return None
    if verb == "block" and len(parts) == 1:
        blocks.append({"type": "text", "content": ""})
    elif verb == "unblock" and len(parts) == 2 and int(parts[1]) < len(blocks):
        del blocks[int(parts[1])]
    else:
        return None
    return [*steps[: int(parts[0])], step, *steps[int(parts[0]) + 1 :]]


def _body_switched(steps: list[dict[str, Any]], argument: str) -> list[dict[str, Any]] | None:
    """``bodyas:<step>.html`` or ``bodyas:<step>.blocks``: an email's body written the other way.

    Blocks become the HTML they render as (engine/templates.blocks_as_html),
    variables kept as variables. HTML becomes one text block holding the
    HTML's text (a link as its text and address): its markup does not survive, which
    the page says beside the switch and again once switched; nothing is saved
    until Save.
    """
    number, _, kind = argument.partition(".")
    if not number.isdigit() or int(number) >= len(steps) or kind not in ("html", "blocks"):
        return None
    step = copy.deepcopy(steps[int(number)])
    template = step.get("template") or {}
    if template.get("type") != "email":
        return None
    content = template.get("content")
    if kind == "html" and isinstance(content, list):
        template["content"] = blocks_as_html(content)
        template["contentType"] = "customHtml"
    elif kind == "blocks" and not isinstance(content, list):
        text = html_to_text(content) if isinstance(content, str) else ""
        template["content"] = [{"type": "text", "content": text}]
        template["contentType"] = "editor"
    else:
        return None
    step["template"] = template
    return [*steps[: int(number)], step, *steps[int(number) + 1 :]]


SWITCH_NOTICES = {
    "html": "The body is now HTML: the blocks' own markup, with their variables as they were. Save to keep it.",
    "blocks": (
        "The body is now one text block holding the HTML's text, each link as its text and address; "
        "its markup (styles, images, layout) is gone. Save to keep it, or leave the page without saving to keep the HTML."
    ),
}


def _conditions_moved(steps: list[dict[str, Any]], verb: str, argument: str) -> list[dict[str, Any]] | None:
    """Conditions' buttons without script (the script adds and removes rows and groups in the page itself).

    ``condition:<step>`` adds an empty row to the step's last group,
    ``condition:<step>.<group>`` to that group; ``group:<step>`` adds a group
    (an alternative: the step runs when any group holds) with one empty row;
    ``uncondition:<step>.<group>.<row>`` removes a row.
    """
    parts = argument.split(".")
    if not all(part.isdigit() for part in parts) or int(parts[0]) >= len(steps):
        return None
    step = copy.deepcopy(steps[int(parts[0])])
    filters = step.get("filters") if isinstance(step.get("filters"), list) else []
    empty_row = {"on": "payload", "field": "", "operator": "EQUAL", "value": ""}
    if verb == "group" and len(parts) == 1:
        filters.append({"isNegated": False, "type": "GROUP", "value": "AND", "children": [empty_row]})
    elif verb == "condition" and len(parts) == 2:
        if int(parts[1]) >= len(filters):
            return None
        filters[int(parts[1])].setdefault("children", []).append(empty_row)
    elif verb == "condition" and len(parts) == 1:
        if not filters:
            filters = [{"isNegated": False, "type": "GROUP", "value": "AND", "children": []}]
        filters[-1].setdefault("children", []).append(empty_row)
    elif verb == "uncondition" and len(parts) == 3:
        group, row = int(parts[1]), int(parts[2])
        if group < len(filters) and row < len(filters[group].get("children") or []):
            del filters[group]["children"][row]
    else:
        return None
    step["filters"] = filters
    return [*steps[: int(parts[0])], step, *steps[int(parts[0]) + 1 :]]


@router.post("/workflows/{workflow_id}/edit")
async def edit_workflow(workflow_id: str, console: ConsoleDep) -> Response:
    console.authorize("workflows.read")
    form = await console.form(MAX_FORM_FIELDS)
    action = console.field(form, "action", 40) or "save"
    if action.startswith("preview:"):
        workflow = await _load(console, workflow_id)
        state = _workflow_from_form(console, form, list(workflow.steps or []))
        index = int(action[8:]) if action[8:].isdigit() else -1
        return await _editor(console, workflow, state, preview=await _preview(console, workflow, state, index))
    if action == "test":
        console.authorize("test_sends.send")
        workflow = await _load(console, workflow_id)
        state = _workflow_from_form(console, form, list(workflow.steps or []))
        return await _send_test(console, workflow, state)
    console.authorize("workflows.write")
    workflow = await _load(console, workflow_id)
    state = _workflow_from_form(console, form, list(workflow.steps or []))
    if workflow.origin == "external":
        console.fail("name", IN_CODE)
        return await _editor(console, workflow, _state_of(workflow), status_code=422)
    moved = _moved(state["steps"], action)
    if moved is not None:
        notice = SWITCH_NOTICES.get(action.rpartition(".")[2]) if action.startswith("bodyas:") else None
        return await _editor(console, workflow, {**state, "steps": moved}, notice=notice)
    if action != "save":
        console.fail("name", "The page sent an action it does not know; nothing was saved")
        return await _editor(console, workflow, state, status_code=422)
    return await _save(console, workflow, state)


async def _save(console: Console, workflow: Any, state: dict[str, Any]) -> Response:
    if not state["name"]:
        console.fail("name", "Enter a name")
    for found in await previews.broken_templates(console.principal.environment_id, state["steps"]):
        console.fail(f"steps-{found.step}-{found.field}", found.message)
    schema = _payload_schema(console, state["payload_schema"])
    if console.errors:
        return await _editor(console, workflow, state, status_code=422)
    try:
        request = UpdateWorkflowRequest(
            name=state["name"],
            description=state["description"],
            tags=state["tags"],
            critical=state["critical"],
            severity=state["severity"],
            active=state["active"],
            preferenceSettings=PreferenceSettings.model_validate(state["preferences"]),
            steps=[StepRequest.model_validate(step) for step in state["steps"]],
        )
        # An HTTP request's or custom step's settings are its controls, which the v1 body has no field for.
        controls = [
            step.get("controlValues") if (step.get("template") or {}).get("type") in CONTROL_STEP_TYPES else None
            for step in state["steps"]
        ]
        await workflows.update_workflow(console.db, console.principal, workflow.id, request, step_controls=controls)
        # The payload schema and its check on trigger are v2 fields: written through the v2 service.
        settings = PatchWorkflowV2Request(payloadSchema=schema, validatePayload=state["validate_payload"])
        await workflows_v2.patch_workflow(console.db, console.principal, workflow.id, settings)
    except ValidationError as exc:
        for error in exc.errors()[:20]:
            console.fail(_field_of(error["loc"]), f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}")
        return await _editor(console, workflow, state, status_code=422)
    except (ValidationFailed, ConflictError) as exc:
        _service_errors(console, exc)
        return await _editor(console, workflow, state, status_code=exc.status_code)
    console.record(
        "workflow.updated",
        "workflow",
        workflow.id,
        changes={
            "name": state["name"],
            "steps": [str((step.get("template") or {}).get("type")) for step in state["steps"]],
        },
    )
    return console.redirect(f"/console/workflows/{workflow.id}/edit", flash="Workflow saved")


def _service_errors(console: Console, exc: HeraldError) -> None:
    """A service's refusal beside the editor's fields: ``steps.1.metadata.timed.atTime`` is ``steps-1-atTime``."""
    details = exc.extra.get("errors")
    if not isinstance(details, dict) or not details:
        console.errors_from(exc, "name")
        return
    for name, entry in list(details.items())[:20]:
        messages = entry.get("messages") if isinstance(entry, dict) else None
        message = str(messages[0]) if messages else exc.message
        field = "name" if name == "general" else _field_of(tuple(str(name).split(".")))
        console.fail(field, f"{name}: {message}" if field != name else message)


def _payload_schema(console: Console, text: str) -> dict[str, Any] | None:
    """The payload schema field as a JSON schema; None when empty (an error of the field when it is not one)."""
    if not text:
        return None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        console.fail(
            "payload_schema", f"Payload schema is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        )
        return None
    if not isinstance(schema, dict):
        console.fail("payload_schema", "Payload schema must be a JSON object ({...})")
        return None
    try:
        workflows_v2.check_payload_schema(schema)
    except ValidationFailed as exc:
        entry = (exc.extra.get("errors") or {}).get("payloadSchema") or {}
        console.fail("payload_schema", str((entry.get("messages") or [exc.message])[0]))
        return None
    return schema


def _field_of(loc: tuple[Any, ...]) -> str:
    """The editor's field for an error's place (``steps.0.metadata.amount`` is ``steps-0-amount``)."""
    parts = [str(part) for part in loc]
    if len(parts) >= 2 and parts[0] == "steps" and parts[1].isdigit():
        rest = [part for part in parts[2:] if part not in ("template", "metadata", "timed", "controlValues")]
        if len(rest) >= 3 and rest[0] == "content" and rest[1].isdigit():
            return f"steps-{parts[1]}-blocks-{rest[1]}-{rest[2]}"  # a block of an email of blocks
        if rest and "metadata" in parts:
            return f"steps-{parts[1]}-{form_name(rest[0])}"
        return f"steps-{parts[1]}-{rest[0]}" if rest else f"steps-{parts[1]}-name"
    return parts[0] if parts else "name"


async def _send_test(console: Console, workflow: Any, state: dict[str, Any]) -> Response:
    subscriber_id = state["test_subscriber"]
    if not subscriber_id:
        console.fail("test_subscriber", "Enter the subscriber ID to send the test to")
    payload = _parse_payload(console, state["test_payload"])
    if console.errors or payload is None:
        return await _editor(console, workflow, state, status_code=422)
    try:
        request = TriggerEventRequest(name=workflow.trigger_identifier, to=subscriber_id, payload=payload)
        result = await events.trigger_event(
            console.db, console.principal, request, box=console.request.app.state.secret_box
        )
    except HeraldError as exc:
        console.fail("test_subscriber", f"The test was not sent: {exc.message}")
        return await _editor(console, workflow, state, status_code=exc.status_code if exc.status_code < 500 else 422)
    if result.status != "processed":
        console.fail("test_subscriber", f"The test was not sent: {'; '.join(result.errors) or result.status}")
        return await _editor(console, workflow, state, status_code=422)
    console.record(
        "workflow.test_sent",
        "workflow",
        workflow.id,
        changes={"subscriberId": subscriber_id, "transactionId": result.transaction_id},
    )
    return await _editor(console, workflow, state, test_run=result.transaction_id)


async def _form_preview(console: Console, workflow_id: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The workflow, the form's state and the preview of the step the form names (``preview_step``)."""
    console.authorize("workflows.read")
    form = await console.form(MAX_FORM_FIELDS)
    workflow = await _load(console, workflow_id)
    state = _workflow_from_form(console, form, list(workflow.steps or []))
    index_text = console.field(form, "preview_step", 4)
    return workflow, state, await _preview(console, workflow, state, int(index_text) if index_text.isdigit() else -1)


@router.post("/workflows/{workflow_id}/edit/preview")
async def preview_fragment(workflow_id: str, console: ConsoleDep) -> Response:
    """The Preview region's content for the form as it is now (the editor's script asks as the author types).

    An email's frame is left empty here: the script fills it from :func:`preview_email_frame`, whose answer
    carries the email's own styles (a frame made from this fragment would keep the page's policy, which
    knows only the styles of the page as it was first shown).
    """
    workflow, state, preview = await _form_preview(console, workflow_id)
    return console.render(
        "editor_preview.html", title="Preview", preview=preview, state=state, workflow=workflow, framed=True
    )


@router.post("/workflows/{workflow_id}/edit/preview/email")
async def preview_email_frame(workflow_id: str, console: ConsoleDep) -> Response:
    """An email step of the form rendered alone, for the editor's sandboxed frame (security.EMAIL_FRAME_POLICY)."""
    _, _, preview = await _form_preview(console, workflow_id)
    security.frame_as_email(console.request.scope)
    if preview.get("type") != "email":
        message = html.escape(str(preview.get("error") or "This step is not an email"))
        return HTMLResponse(f"<!doctype html><p>{message}</p>")
    return HTMLResponse(str(preview.get("body") or ""))


@router.get("/workflows/{workflow_id}/runs/{transaction_id}")
async def test_run(workflow_id: str, transaction_id: str, console: ConsoleDep) -> Response:
    """The run of a test send: its page once the engine has started it, else Activity searched for it."""
    console.authorize("activity.read")
    found, _ = await notifications.list_activity(
        console.db, console.principal, ActivityFilter(transaction_ids=[transaction_id[:255]]), offset=0, limit=1
    )
    if not found:
        return console.redirect(f"/console/activity?search={quote(transaction_id[:255])}")
    return console.redirect(f"/console/activity/{found[0].id}")
