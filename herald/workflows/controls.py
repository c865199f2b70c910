"""Novu v2 step ``controlValues`` to and from the v1 step the engine runs.

One store serves both APIs: a v2 step is kept as a v1 step (``template`` and
``metadata``, which the engine reads) plus ``stepId`` and the controls that
have no v1 field (``controlValues``: ``skip``, ``editorType``, an email's
``from`` ...). Reading a step back as v2 takes the mapped controls from the
template, so a v1 edit shows in v2, and the kept ones from ``controlValues``.
"""

from __future__ import annotations

from typing import Any

from herald.engine.maily import MailyError, maily_document, maily_to_template
from herald.engine.templates import check_template
from herald.kit.text import slugify

# Controls each step type maps onto v1 template/metadata fields; all others are kept as sent.
MAPPED_CONTROLS: dict[str, frozenset[str]] = {
    "in_app": frozenset({"subject", "body", "avatar", "data", "redirect", "primaryAction", "secondaryAction"}),
    "email": frozenset({"subject", "body", "layoutId", "preheader"}),
    "sms": frozenset({"body"}),
    "chat": frozenset({"body"}),
    "push": frozenset({"subject", "body"}),
    "delay": frozenset({"type", "amount", "unit"}),
    "throttle": frozenset({"type", "amount", "unit", "threshold", "throttleKey", "dynamicKey"}),
    "digest": frozenset({"amount", "unit", "digestKey", "lookBackWindow"}),
}


def _redirect_to_v1(redirect: Any) -> dict[str, Any]:
    if not isinstance(redirect, dict):
        return {}
    found = {key: redirect[key] for key in ("url", "target") if isinstance(redirect.get(key), str)}
    return found


def _action_to_button(kind: str, action: Any) -> dict[str, Any] | None:
    if not isinstance(action, dict):
        return None
    button: dict[str, Any] = {
        "type": kind,
        "content": action.get("label") if isinstance(action.get("label"), str) else "",
    }
    button.update(_redirect_to_v1(action.get("redirect")))
    return button


def _in_app_template(controls: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = {"type": "in_app", "content": controls.get("body") or ""}
    for key in ("subject", "avatar", "data"):
        if controls.get(key) is not None:
            template[key] = controls[key]
    cta: dict[str, Any] = {}
    redirect = _redirect_to_v1(controls.get("redirect"))
    if redirect:
        cta = {"type": "redirect", "data": redirect}
    buttons = [
        button
        for button in (
            _action_to_button("primary", controls.get("primaryAction")),
            _action_to_button("secondary", controls.get("secondaryAction")),
        )
        if button is not None
    ]
    if buttons:
        cta.setdefault("type", "redirect")
        cta.setdefault("data", {})
        cta["action"] = {"buttons": buttons}
    if cta:
        template["cta"] = cta
    return template


def to_v1(step_type: str, controls: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The v1 ``template`` and ``metadata`` for a v2 step's controls (Novu's names on the left).

    in_app: body -> content, redirect -> cta.data, primary/secondaryAction ->
    cta.action.buttons; email: body -> content (custom HTML), layoutId kept on
    the template; push: subject -> title; delay and digest controls -> metadata
    (a digest's lookBackWindow is v1's backoff).
    """
    if step_type == "in_app":
        return _in_app_template(controls), None
    if step_type == "email":
        template = {
            "type": "email",
            "subject": controls.get("subject") or "",
            "content": email_html(controls.get("body")),
            "contentType": "customHtml",
        }
        for key in ("layoutId", "preheader"):
            if controls.get(key) is not None:
                template[key] = controls[key]
        return template, None
    if step_type in ("sms", "chat"):
        return {"type": step_type, "content": controls.get("body") or ""}, None
    if step_type == "push":
        template = {"type": "push", "content": controls.get("body") or ""}
        if controls.get("subject") is not None:
            template["title"] = controls["subject"]
        return template, None
    if step_type == "delay":
        metadata = {
            "type": controls.get("type") or "regular",
            "amount": controls.get("amount"),
            "unit": controls.get("unit"),
        }
        return {"type": "delay"}, {key: value for key, value in metadata.items() if value is not None}
    if step_type == "throttle":
        metadata = {key: controls.get(key) for key in ("type", "amount", "unit", "threshold", "throttleKey", "dynamicKey")}
        metadata["type"] = metadata["type"] or "fixed"
        return {"type": "throttle"}, {key: value for key, value in metadata.items() if value is not None}
    if step_type == "digest":
        metadata = {"type": "regular", "amount": controls.get("amount"), "unit": controls.get("unit")}
        if controls.get("digestKey"):
            metadata["digestKey"] = controls["digestKey"]
        window = controls.get("lookBackWindow")
        if isinstance(window, dict):
            metadata.update(backoff=True, backoffAmount=window.get("amount"), backoffUnit=window.get("unit"))
        return {"type": "digest"}, {key: value for key, value in metadata.items() if value is not None}
    return {"type": step_type}, None


def email_html(body: Any) -> str:
    """An email body as the HTML template the engine renders: the block editor's document made into one
    (herald/engine/maily.py), any other body as written, as Novu does whatever ``editorType`` says.
    Raises :class:`MailyError` for a document that cannot be made into one."""
    document = maily_document(body)
    if document is not None:
        return maily_to_template(document)
    return body if isinstance(body, str) else ""


def _button_to_action(button: dict[str, Any]) -> dict[str, Any]:
    action: dict[str, Any] = {"label": button.get("content") or ""}
    redirect = _redirect_to_v1(button)
    if redirect:
        action["redirect"] = redirect
    return action


def from_v1(step: dict[str, Any]) -> dict[str, Any]:
    """A stored step's v2 ``controlValues``: the kept controls, then those the template and metadata hold."""
    template = step.get("template") or {}
    step_type = template.get("type")
    controls: dict[str, Any] = dict(step.get("controlValues") or {})
    if step_type == "in_app":
        controls["body"] = template.get("content") if isinstance(template.get("content"), str) else ""
        for key in ("subject", "avatar", "data"):
            if template.get(key) is not None:
                controls[key] = template[key]
        cta = template.get("cta") if isinstance(template.get("cta"), dict) else {}
        redirect = _redirect_to_v1(cta.get("data"))
        if redirect.get("url"):
            controls["redirect"] = redirect
        action = cta.get("action") if isinstance(cta.get("action"), dict) else {}
        for button in action.get("buttons") or []:
            if isinstance(button, dict) and button.get("type") in ("primary", "secondary"):
                controls[f"{button['type']}Action"] = _button_to_action(button)
    elif step_type == "email":
        content = template.get("content")
        if isinstance(content, list):
            # v1 editor blocks: shown as the HTML they render to, in order.
            content = "".join(
                f'<a href="{block.get("url") or "#"}">{block.get("content", "")}</a>'
                if block.get("type") == "button"
                else f"<p>{block.get('content', '')}</p>"
                for block in content
                if isinstance(block, dict)
            )
        controls["subject"] = template.get("subject") or ""
        kept_body = controls.get("body")
        # The block editor's document is shown as sent while the template is still the one made of it
        # (a v1 edit of the content since shows the content).
        if not (maily_document(kept_body) is not None and _made_of(kept_body, content)):
            controls["body"] = content or ""
        controls.setdefault("editorType", "html")
        for key in ("layoutId", "preheader"):
            if template.get(key) is not None:
                controls[key] = template[key]
    elif step_type in ("sms", "chat"):
        controls["body"] = template.get("content") if isinstance(template.get("content"), str) else ""
    elif step_type == "push":
        controls["body"] = template.get("content") if isinstance(template.get("content"), str) else ""
        title = template.get("title") or template.get("subject")
        if title is not None:
            controls["subject"] = title
    elif step_type == "throttle":
        metadata = step.get("metadata") or {}
        for key in ("type", "amount", "unit", "threshold", "throttleKey", "dynamicKey"):
            if metadata.get(key) is not None:
                controls[key] = metadata[key]
    elif step_type in ("delay", "digest"):
        metadata = step.get("metadata") or {}
        for key in ("amount", "unit", "digestKey"):
            if metadata.get(key) is not None:
                controls[key] = metadata[key]
        if step_type == "delay":
            if metadata.get("type") == "scheduled":
                controls["delayPath"] = metadata.get("delayPath")
            else:
                controls["type"] = "regular"
        elif metadata.get("backoff") or metadata.get("type") == "backoff":
            if metadata.get("backoffAmount") is not None and metadata.get("backoffUnit") is not None:
                controls["lookBackWindow"] = {"amount": metadata["backoffAmount"], "unit": metadata["backoffUnit"]}
    return controls


def _made_of(document_body: Any, content: Any) -> bool:
    try:
        return email_html(document_body) == content
    except MailyError:
        return False


def kept_controls(step_type: str, controls: dict[str, Any]) -> dict[str, Any]:
    """The controls with no v1 field, kept on the step as sent; an email's block-editor document too (its
    template is what the v1 step holds, the document what the editor reads back)."""
    mapped = MAPPED_CONTROLS.get(step_type, frozenset())
    kept = {key: value for key, value in controls.items() if key not in mapped}
    if step_type == "email" and maily_document(controls.get("body")) is not None:
        kept["body"] = controls["body"]
    return kept


def step_key(step: dict[str, Any]) -> str:
    """The step's v2 ``stepId``: as given, else made from its name as Novu does."""
    given = step.get("stepId")
    if isinstance(given, str) and given:
        return given
    return slugify(str(step.get("name") or "")) or str(step.get("_id"))


def step_slug(step: dict[str, Any]) -> str:
    """Novu's step slug: the name's slug and the step's id (``<name>_st_<id>``)."""
    return f"{slugify(str(step.get('name') or '')) or 'step'}_st_{step.get('_id')}"


def workflow_slug(name: str, workflow_id: str) -> str:
    """Novu's workflow slug: the name's slug and the workflow's id (``<name>_wf_<id>``)."""
    return f"{slugify(name) or 'workflow'}_wf_{workflow_id}"


# Controls whose strings are rendered as templates, by step type (an email's layoutId is a name).
TEMPLATE_CONTROLS: dict[str, frozenset[str]] = {
    "in_app": frozenset({"subject", "body", "avatar", "data", "redirect", "primaryAction", "secondaryAction"}),
    "email": frozenset({"subject", "body", "preheader"}),
    "sms": frozenset({"body"}),
    "chat": frozenset({"body"}),
    "push": frozenset({"subject", "body"}),
}
CONTENT_ISSUE = "ILLEGAL_VARIABLE_IN_CONTROL_VALUE"
_MAX_DEPTH = 8


def _texts(path: str, value: Any, depth: int = 0) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(path, value)]
    if depth >= _MAX_DEPTH:
        return []
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _texts(f"{path}.{key}", item, depth + 1)]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in _texts(f"{path}.{index}", item, depth + 1)]
    return []


def step_issues(step_type: str, controls: dict[str, Any]) -> dict[str, Any]:
    """Novu's step ``issues`` for controls holding a template that cannot be used; {} when there are none.

    ``{"controls": {"body": [{"issueType": "ILLEGAL_VARIABLE_IN_CONTROL_VALUE",
    "message": "unknown filter 'upcas' (line 1, column 12)"}]}}``, named by the
    control's path (``primaryAction.label``).
    """
    found: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(TEMPLATE_CONTROLS.get(step_type, frozenset()) & controls.keys()):
        value = controls[name]
        if step_type == "email" and name == "body" and maily_document(value) is not None:
            # The block editor's document: its template is what is rendered, so that is what is checked.
            try:
                value = email_html(value)
            except MailyError as exc:
                found.setdefault(name, []).append({"issueType": CONTENT_ISSUE, "message": str(exc)})
                continue
        for path, text in _texts(name, value):
            for problem in check_template(text):
                found.setdefault(path, []).append({"issueType": CONTENT_ISSUE, "message": str(problem)})
    return {"controls": found} if found else {}


def issues_reason(issues: dict[str, Any]) -> str:
    """One line naming each control with an issue, for a step that cannot run because of them."""
    controls = issues.get("controls") if isinstance(issues, dict) else None
    parts = [
        f"{name}: {issue.get('message')}"
        for name, listed in (controls.items() if isinstance(controls, dict) else ())
        for issue in (listed if isinstance(listed, list) else [])
        if isinstance(issue, dict)
    ]
    return "; ".join(parts) or "the step has issues"
