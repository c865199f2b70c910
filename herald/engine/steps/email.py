"""The email step: render, choose the integration, send to subscriber.email (failing over to the channel's next).

The email is wrapped in a layout (herald/layouts): the one its template names
(``layoutId``, by identifier or id), else the environment's default layout;
``layoutId: null`` written on the template opts out of both. The layouts come
from a per-process snapshot of the environment's (herald/layouts/cache.py), so
an environment without layouts costs no query per message. A named layout that
no longer exists is not an error: the email goes without it, and the step's
execution details say so.
"""

from __future__ import annotations

from herald.engine.steps.base import Detail, StepContext, StepOutcome
from herald.engine.steps.delivery import (
    deliver_with_failover,
    failover_order,
    load_candidates,
    missing_address,
    no_integration,
    select_integration,
)
from herald.engine.templates import RenderedEmail, TemplateError, html_to_text, render_bounded, render_email
from herald.layouts.cache import CachedLayout, layout_cache
from herald.models import Integration
from herald.providers.base import EmailMessage


def _named_layout(ctx: StepContext) -> tuple[bool, object]:
    """(whether a layout was named, what): from the trigger's overrides, else the template."""
    overrides = ctx.event.overrides or {}
    step_id = ctx.step.get("stepId")
    places: list[object] = []
    steps = overrides.get("steps")
    if isinstance(step_id, str) and isinstance(steps, dict):
        places.append(steps.get(step_id))
    channels = overrides.get("channels")
    if isinstance(channels, dict):
        places.append(channels.get("email"))
    for place in places:
        if isinstance(place, dict) and "layoutId" in place:
            return True, place["layoutId"]
    if "layoutIdentifier" in overrides:
        return True, overrides["layoutIdentifier"]
    template = ctx.template
    return "layoutId" in template, template.get("layoutId")


async def choose_layout(ctx: StepContext) -> tuple[CachedLayout | None, Detail | None]:
    """The layout that wraps this email, and a warning when the one named is gone.

    The trigger's overrides name one first, as Novu reads them: ``steps.<stepId>.layoutId``,
    then ``channels.email.layoutId``, then ``layoutIdentifier``; then the step's template;
    then the environment's default. A ``null`` written at any of these places opts out.
    """
    found, named = _named_layout(ctx)
    if found and named is None:
        return None, None
    layouts = await layout_cache.get(ctx.sessionmaker, ctx.job.environment_id)
    if isinstance(named, str) and named:
        layout = layouts.find(named)
        if layout is None:
            return None, Detail(
                "Warning", f"Layout {named} was not found in this environment (deleted?); the email was sent without it"
            )
        return layout, None
    return layouts.default, None


async def run(ctx: StepContext) -> StepOutcome:
    if not ctx.subscriber.email:
        return missing_address(ctx, "email", "email address")
    template = ctx.template
    bridge = ctx.bridge_outputs
    if bridge is not None:
        # A code-first step: the bridge made the whole email (its own layout included).
        body = bridge.email_html()
        rendered = RenderedEmail(subject=" ".join((bridge.text("subject") or "").split()), html=body, text=html_to_text(body))
        warning = None
    else:
        layout, warning = await choose_layout(ctx)
        try:
            rendered = await render_bounded(
                render_email,
                template.get("content") or "",
                template.get("subject") or "",
                ctx.variables(),
                layout=layout.content if layout is not None else None,
                preheader=template.get("preheader"),
            )
        except TemplateError as exc:
            where = f" (layout {layout.identifier})" if layout is not None and "layout" in exc.message else ""
            return StepOutcome.failed(f"Template error{where}: {exc}")
    candidates, already = await load_candidates(ctx, "email")
    integration, reason = select_integration(ctx, "email", [pair[0] for pair in candidates])
    if integration is None:
        return no_integration(ctx, "email", reason)
    email = EmailMessage(
        to=[ctx.subscriber.email],
        subject=rendered.subject,
        html=rendered.html,
        text=rendered.text,
        sender_name=template.get("senderName") or None,
        from_address=bridge.text("from") if bridge is not None else None,
        reply_to=bridge.text("replyTo") if bridge is not None else None,
    )

    async def send(provider):  # type: ignore[no-untyped-def]
        return await provider.send(email)

    def build(chosen: Integration):  # type: ignore[no-untyped-def]
        message = ctx.new_message(
            "email", email=ctx.subscriber.email, subject=rendered.subject, content=rendered.html, provider_id=chosen.provider_id
        )
        return message, send

    outcome = await deliver_with_failover(ctx, "email", failover_order(ctx, integration, candidates), build, already)
    if warning is not None:
        outcome.details.insert(0, warning)
    return outcome
