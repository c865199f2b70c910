"""The sms step: render, choose the integration, send to subscriber.phone."""

from __future__ import annotations

from herald.engine.steps.base import StepContext, StepOutcome
from herald.engine.steps.delivery import (
    Delivery,
    deliver,
    load_integrations,
    missing_address,
    no_integration,
    select_integration,
)
from herald.engine.templates import TemplateError, render_bounded, render_sms
from herald.providers.base import SmsMessage


async def run(ctx: StepContext) -> StepOutcome:
    if not ctx.subscriber.phone:
        return missing_address(ctx, "sms", "phone number")
    try:
        content = await render_bounded(render_sms, ctx.template.get("content") or "", ctx.variables())
    except TemplateError as exc:
        return StepOutcome.failed(f"Template error: {exc}")
    integrations, already = await load_integrations(ctx, "sms")
    integration, reason = select_integration(ctx, "sms", integrations)
    if integration is None:
        return no_integration(ctx, "sms", reason)
    sms = SmsMessage(to=ctx.subscriber.phone, content=content)
    message = ctx.new_message("sms", phone=ctx.subscriber.phone, content=content, provider_id=integration.provider_id)

    async def send(provider):  # type: ignore[no-untyped-def]
        return await provider.send(sms)

    return await deliver(ctx, [Delivery(f"sms:{integration.identifier}", integration, message, send)], already)
