"""Previews: a workflow step's or a layout's content rendered for an editor, where it cannot starve the API.

Every preview route renders through this module (``POST /v2/workflows/{workflowId}/step/{stepId}/preview``
with :func:`preview_step`, ``POST /v2/layouts/{layoutId}/preview`` with :func:`preview_layout`):

* off the event loop, always, in a pool of PREVIEW_THREADS threads of its own (the engine's renders
  have theirs), with the limits of a step's render (docs/templates.md, "Limits"): the loop goes on
  answering every other request while a preview renders;
* at most MAX_PREVIEWS_PER_ENVIRONMENT at once for an environment, rendering or waiting for the pool,
  and MAX_PREVIEWS_WAITING in the process: one more is answered 429, so no environment can queue the
  pool for the others;
* without the request's database connection: it goes back to the pool before the render (SQLite's
  has one connection, and every other request would wait for the preview);
* each charged PREVIEW_COST tokens of the environment's request rate limit (herald/kit/limits.py).

A template that cannot be rendered raises TemplateError, as rendering it for a step would.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from herald.bridge import client as bridge_client
from herald.bridge.client import BridgeError
from herald.bridge.repository import BridgeRepository
from herald.engine.steps.base import subscriber_variables
from herald.engine.templates import (
    RenderedEmail,
    TemplateError,
    html_to_text,
    render_chat,
    render_email,
    render_html,
    render_in_app,
    render_off_loop,
    render_push,
    render_sms,
    render_text,
)
from herald.environment_variables.repository import EnvironmentVariableRepository
from herald.kit.crypto import SecretBox
from herald.kit.errors import TooManyRequestsError
from herald.kit.outbound import OutboundRefused
from herald.layouts.repository import LayoutRepository
from herald.subscribers.repository import SubscriberRepository
from herald.translations.render import translate_template
from herald.translations.repository import TranslationRepository
from herald.translations.schemas import ResourceType
from herald.translations.service import DEFAULT_LOCALE
from herald.workflows import controls as control_map

PREVIEW_THREADS = 1
"""Threads a process renders previews in (renders hold the interpreter: more would not render more at once)."""
MAX_PREVIEWS_PER_ENVIRONMENT = 2
"""Previews of one environment rendering or waiting at once in a process."""
MAX_PREVIEWS_WAITING = 16
"""Previews of all environments rendering or waiting at once in a process."""
BUSY_MESSAGE = "Too many previews are being rendered; try again when one has finished"

PREVIEW_PLACEHOLDER = (
    '<div data-content-placeholder style="border:1px dashed #e1e4ea;padding:8px;text-align:center;'
    'color:#99a0ae;font-size:10px;">Dynamic placeholder content</div>'
)
"""What a layout's preview places where the email's content goes."""

_Result = TypeVar("_Result")


class PreviewPool:
    """The threads previews render in, and the previews of each environment under way."""

    def __init__(self, threads: int = PREVIEW_THREADS) -> None:
        self.threads = threads
        self._executor: ThreadPoolExecutor | None = None
        self.under_way: dict[str, int] = {}

    async def render(self, environment_id: str, render: Callable[..., _Result], *args: Any) -> _Result:
        """``render(*args)`` in the pool, charged to ``environment_id``; TooManyRequestsError when it is busy."""
        if (
            self.under_way.get(environment_id, 0) >= MAX_PREVIEWS_PER_ENVIRONMENT
            or sum(self.under_way.values()) >= MAX_PREVIEWS_WAITING
        ):
            raise TooManyRequestsError(BUSY_MESSAGE, headers={"Retry-After": "1"})
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="herald-preview")
        self.under_way[environment_id] = self.under_way.get(environment_id, 0) + 1
        loop = asyncio.get_running_loop()
        future = self._executor.submit(render_off_loop, render, *args)

        def finished(_: Future[Any]) -> None:
            # A preview its caller gave up on still holds its place until its thread is done with it.
            loop.call_soon_threadsafe(self._release, environment_id)

        future.add_done_callback(finished)
        return await asyncio.wrap_future(future)

    def _release(self, environment_id: str) -> None:
        left = self.under_way.get(environment_id, 0) - 1
        if left > 0:
            self.under_way[environment_id] = left
        else:
            self.under_way.pop(environment_id, None)


pool = PreviewPool()


def _render_step(step_type: str, controls: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    template, _ = control_map.to_v1(step_type, controls)
    return _render_template(step_type, template, context)


def _render_template(
    step_type: str,
    template: dict[str, Any],
    context: dict[str, Any],
    *,
    layout: str | None = None,
    preheader: bool = False,
) -> dict[str, Any]:
    if step_type == "in_app":
        rendered = render_in_app(template, context)
        preview: dict[str, Any] = {"body": rendered.get("content", "")}
        for key in ("subject", "avatar", "data"):
            if rendered.get(key) is not None:
                preview[key] = rendered[key]
        back = control_map.from_v1({"template": {**template, **rendered, "type": "in_app"}})
        for key in ("redirect", "primaryAction", "secondaryAction"):
            if key in back:
                preview[key] = back[key]
        return preview
    if step_type == "email":
        email = render_email(
            template.get("content") or "",
            template.get("subject") or "",
            context,
            layout=layout,
            preheader=template.get("preheader") if preheader else None,
            with_text=False,
        )
        return {"subject": email.subject, "body": email.html}
    if step_type == "sms":
        return {"body": render_sms(template.get("content") or "", context)}
    if step_type == "chat":
        return {"body": render_chat(template.get("content") or "", context)}
    push = render_push(template.get("title"), template.get("content"), context)
    return {"subject": push.title, "body": push.content}


RENDERED_STEP_TYPES = frozenset({"in_app", "email", "sms", "chat", "push"})


async def preview_step(
    session: AsyncSession, environment_id: str, step_type: str, controls: dict[str, Any], context: dict[str, Any]
) -> dict[str, Any]:
    """A step's controls rendered for ``context`` as Novu's preview shows them (body, subject, ...).

    Steps that are not channels render nothing: their mapped controls are shown as they are.
    ``session`` is closed first: the caller has read what the preview needs.
    """
    if step_type not in RENDERED_STEP_TYPES:
        return {key: value for key, value in controls.items() if key in control_map.MAPPED_CONTROLS.get(step_type, ())}
    await session.close()
    return await pool.render(environment_id, _render_step, step_type, controls, context)


async def preview_layout(
    session: AsyncSession, environment_id: str, layout: str, context: dict[str, Any], body: str = PREVIEW_PLACEHOLDER
) -> RenderedEmail:
    """A layout rendered around ``body`` (an email's HTML, itself a template) for ``context``; ``session`` is closed first."""
    await session.close()
    return await pool.render(environment_id, _render_layout, layout, context, body)


def _render_layout(layout: str, context: dict[str, Any], body: str = PREVIEW_PLACEHOLDER) -> RenderedEmail:
    return render_email(body, "", context, layout=layout, with_text=False)


# --------------------------------------------------------------------------- The console's editor

MASKED_SECRET = "••••••"
"""What a secret environment variable renders as in a preview: its value never reaches a browser."""
PREVIEW_SUBSCRIBER_ID = "preview-subscriber"
"""The subscriberId a preview shows when no subscriber is chosen."""

TEMPLATE_FIELDS: dict[str, tuple[str, ...]] = {
    "in_app": ("subject", "content", "avatar"),
    "email": ("subject", "preheader", "content"),
    "sms": ("content",),
    "chat": ("content",),
    "push": ("title", "content"),
}
"""The template fields of each channel step that are rendered (the ones a broken template is looked for in)."""

GSM_CHARACTERS = frozenset(
    "@\u00a3$\u00a5\u00e8\u00e9\u00f9\u00ec\u00f2\u00c7\n\u00d8\u00f8\r\u00c5\u00e5\u0394_\u03a6\u0393\u039b\u03a9\u03a0\u03a8\u03a3\u0398\u039e"
    "\u00c6\u00e6\u00df\u00c9 !\"#\u00a4%&'()*+,-./0123456789:;<=>?\u00a1ABCDEFGHIJKLMNOPQRSTUVWXYZ\u00c4\u00d6\u00d1\u00dc\u00a7"
    "\u00bfabcdefghijklmnopqrstuvwxyz\u00e4\u00f6\u00f1\u00fc\u00e0^{}\\[~]|\u20ac"
)
"""The GSM-7 alphabet (with its extension table): an SMS of these alone is sent 7 bits a character."""


def sms_segments(text: str) -> int:
    """How many parts an SMS of ``text`` is sent in: 160 GSM-7 characters or 70 UCS-2 ones alone, else 153 or 67 each."""
    if not text:
        return 0
    single, part = (160, 153) if all(char in GSM_CHARACTERS for char in text) else (70, 67)
    return 1 if len(text) <= single else math.ceil(len(text) / part)


@dataclass(frozen=True)
class BrokenTemplate:
    """A step's template field that does not render: which step, which field, what and where."""

    step: int
    field: str
    error: TemplateError

    @property
    def message(self) -> str:
        return f"Step {self.step + 1}, {self.field}: {self.error.message}"


def _broken_fields(step_type: str, template: dict[str, Any]) -> list[tuple[str, TemplateError]]:
    broken: list[tuple[str, TemplateError]] = []
    for name in TEMPLATE_FIELDS.get(step_type, ()):
        value = template.get(name)
        if not isinstance(value, str) or not value:
            continue
        try:
            # Rendered, not only parsed: a filter that does not exist fails when it is applied.
            (render_html if name == "content" and step_type in ("email", "in_app") else render_text)(value, {})
        except TemplateError as exc:
            broken.append((name, exc))
    return broken


def _broken_steps(steps: Sequence[dict[str, Any]]) -> list[BrokenTemplate]:
    found: list[BrokenTemplate] = []
    for index, step in enumerate(steps):
        template = step.get("template") or {}
        for name, error in _broken_fields(str(template.get("type") or ""), template):
            found.append(BrokenTemplate(index, name, error))
    return found


async def broken_templates(environment_id: str, steps: Sequence[dict[str, Any]]) -> list[BrokenTemplate]:
    """The template fields of ``steps`` (stored form) that do not parse or render, in the preview pool."""
    return await pool.render(environment_id, _broken_steps, list(steps))


@dataclass(frozen=True)
class WorkflowOfPreview:
    """What a step's preview needs to know of its workflow."""

    identifier: str
    translations: bool


async def _subscriber_fields(session: AsyncSession, environment_id: str, subscriber_id: str) -> dict[str, Any]:
    subscriber = (
        await SubscriberRepository(session).get_by_subscriber_id(environment_id, subscriber_id)
        if subscriber_id
        else None
    )
    if subscriber is None:
        return {"subscriberId": subscriber_id or PREVIEW_SUBSCRIBER_ID, "data": {}}
    # Its channels' credentials are sealed secrets: a preview, shown in a browser, goes without them.
    return {key: value for key, value in subscriber_variables(subscriber).items() if key != "channels"}


async def _environment_values(session: AsyncSession, organization_id: str, environment_id: str) -> dict[str, str]:
    """The environment's variables as a run sees them, each secret one masked."""
    values: dict[str, str] = {}
    for variable in await EnvironmentVariableRepository(session).list(organization_id):
        stored = (variable.values or {}).get(environment_id)
        if stored is not None:
            values[variable.key] = MASKED_SECRET if variable.is_secret else stored
    return values


async def _translated(
    session: AsyncSession,
    environment_id: str,
    organization_id: str,
    identifier: str,
    locale: str | None,
    template: dict[str, Any],
) -> dict[str, Any]:
    repository = TranslationRepository(session)
    row = await repository.locales(organization_id)
    chain = list(dict.fromkeys(filter(None, [locale, row.default_locale if row is not None else DEFAULT_LOCALE])))
    rows = await repository.for_resources(environment_id, ResourceType.WORKFLOW.value, {identifier}, chain)
    content = {translation.locale: translation.content or {} for translation in rows}
    return translate_template(template, [content[code] for code in chain if code in content])


async def _layout_of(session: AsyncSession, environment_id: str, template: dict[str, Any]) -> str | None:
    """The layout the email would be sent in: the one the template names, else the default; none for ``layoutId: null``."""
    if "layoutId" in template and template["layoutId"] is None:
        return None
    layouts = await LayoutRepository(session).all_of(environment_id)
    named = template.get("layoutId")
    for layout in layouts:
        if (named and named in (layout.identifier, layout.id)) or (not named and layout.is_default):
            return layout.content
    return None


async def preview_stored_step(
    session: AsyncSession,
    environment_id: str,
    organization_id: str,
    workflow: WorkflowOfPreview,
    step: dict[str, Any],
    payload: dict[str, Any],
    subscriber_id: str = "",
) -> dict[str, Any]:
    """A step in its stored form rendered as a run would send it: for the subscriber (or a stand-in), with the
    payload, the workflow's translations, the environment's variables (secret ones masked) and the email's layout.

    The answer has ``type`` and Novu's preview keys (``subject``, ``body``, ...); an sms also its ``length``
    and ``segments``, an email its ``preheader``. A template that cannot be rendered raises TemplateError.
    ``session`` is closed before the render.
    """
    template = dict(step.get("template") or {})
    step_type = str(template.get("type") or "")
    if step_type not in RENDERED_STEP_TYPES:
        return {"type": step_type, **(step.get("metadata") or {})}
    subscriber = await _subscriber_fields(session, environment_id, subscriber_id)
    context = {
        "subscriber": subscriber,
        "payload": payload,
        "actor": {},
        "step": {"digest": False, "events": [], "total_count": 0},
        "tenant": {},
        "env": await _environment_values(session, organization_id, environment_id),
    }
    if workflow.translations:
        template = await _translated(
            session, environment_id, organization_id, workflow.identifier, subscriber.get("locale"), template
        )
    layout = await _layout_of(session, environment_id, template) if step_type == "email" else None
    await session.close()
    rendered = await pool.render(environment_id, _render_template_preview, step_type, template, context, layout)
    return {"type": step_type, **rendered}


def _render_template_preview(
    step_type: str, template: dict[str, Any], context: dict[str, Any], layout: str | None
) -> dict[str, Any]:
    rendered = _render_template(step_type, template, context, layout=layout, preheader=True)
    if step_type == "email" and template.get("preheader"):
        rendered["preheader"] = render_text(str(template["preheader"]), context)
    if step_type == "in_app":
        # The Inbox shows the content as HTML: as text here, so that an escaped value reads as it will there.
        rendered["text"] = html_to_text(rendered["body"])
    if step_type == "sms":
        rendered["length"] = len(rendered["body"])
        rendered["segments"] = sms_segments(rendered["body"])
    return rendered


async def preview_bridge_step(
    session: AsyncSession,
    environment_id: str,
    workflow_id: str,
    step: dict[str, Any],
    example: dict[str, Any],
    *,
    http: Any,
    box: SecretBox,
) -> dict[str, Any]:
    """A code-first step as its bridge renders it (``?action=preview``): the outputs, or Novu's ``error``.

    The framework mocks what the example leaves out (the payload from its
    schema, earlier steps from their result schemas) and does not evaluate
    ``skip``. The bridge is the environment's (its last sync).
    """
    repository = BridgeRepository(session)
    bridge_url = await repository.bridge_url(environment_id)
    sealed = await repository.sealed_signing_key(environment_id)
    await session.close()
    if not bridge_url or not sealed:
        return {"error": {"title": "Preview failed", "message": "The environment has no bridge URL", "hint": "Run `novu sync`"}}
    body = {
        "payload": example.get("payload") or {},
        # The values saved for the step (herald/bridge/controls.py); the framework fills in its defaults.
        "controls": step.get("controlValues") if isinstance(step.get("controlValues"), dict) else {},
        "state": [],
        "subscriber": example.get("subscriber") or {},
    }
    try:
        answer = await bridge_client.call(
            http,
            bridge_url,
            "preview",
            secret_key=box.open(sealed),
            body=body,
            workflow_id=workflow_id,
            step_id=str(step.get("stepId") or ""),
        )
    except (BridgeError, OutboundRefused) as exc:
        message = exc.message if isinstance(exc, BridgeError) else str(exc)
        return {"error": {"title": "Preview failed", "message": message, "hint": "The step is rendered by the workflow's code"}}
    outputs = answer.body.get("outputs")
    return {"preview": outputs if isinstance(outputs, dict) else {}}
