"""The sms step: render, choose the integration, send to subscriber.phone (failing over to the channel's next)."""

from __future__ import annotations

from herald.engine.steps.base import StepContext, StepOutcome
from herald.engine.steps.delivery import (
    deliver_with_failover,
    failover_order,
    load_candidates,
    missing_address,
    no_integration,
    select_integration,
)
from herald.engine.templates import TemplateError, render_bounded, render_sms
from herald.models import Integration
from herald.providers.base import SmsMessage


async def run(ctx: StepContext) -> StepOutcome:
    if not ctx.subscriber.phone:
        return missing_address(ctx, "sms", "phone number")
    if ctx.bridge_outputs is not None:
        content = ctx.bridge_outputs.text("body") or ""
    else:
        try:
            content = await render_bounded(render_sms, ctx.template.get("content") or "", ctx.variables())
        except TemplateError as exc:
            return StepOutcome.failed(f"Template error: {exc}")
    candidates, already = await load_candidates(ctx, "sms")
    integration, reason = select_integration(ctx, "sms", [pair[0] for pair in candidates])
    if integration is None:
        return no_integration(ctx, "sms", reason)
    sms = SmsMessage(to=ctx.subscriber.phone, content=content)

    async def send(provider):  # type: ignore[no-untyped-def]
        return await provider.send(sms)

    def build(chosen: Integration):  # type: ignore[no-untyped-def]
        return ctx.new_message("sms", phone=ctx.subscriber.phone, content=content, provider_id=chosen.provider_id), send

    return await deliver_with_failover(ctx, "sms", failover_order(ctx, integration, candidates), build, already)
