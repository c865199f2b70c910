"""The in_app step: the inbox message of spec §2.2."""

from __future__ import annotations

from herald.engine.steps.base import StepContext, StepOutcome
from herald.engine.templates import TemplateError, render_bounded, render_in_app
from herald.kit.time import isoformat


async def run(ctx: StepContext) -> StepOutcome:
    if ctx.bridge_outputs is not None:
        # A code-first step: the bridge made (and sanitized) its content.
        rendered = ctx.bridge_outputs.in_app()
    else:
        try:
            rendered = await render_bounded(render_in_app, ctx.template, ctx.variables())
        except TemplateError as exc:
            return StepOutcome.failed(f"Template error: {exc}")
    message = ctx.new_message(
        "in_app",
        content=rendered.get("content", ""),
        subject=rendered.get("subject"),
        title=rendered.get("title"),
        cta=rendered.get("cta") or {},
        feed_id=ctx.template.get("_feedId"),
        status="sent",
        seen=False,
        read=False,
        delivered_at=[isoformat(ctx.now)],
        data=rendered.get("data"),
        avatar=rendered.get("avatar"),
    )
    return StepOutcome.done("In-app message created", messages=[message])
