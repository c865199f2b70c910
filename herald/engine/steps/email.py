"""The email step: render, choose the integration, send to subscriber.email (failing over to the channel's next)."""

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
from herald.engine.templates import TemplateError, render_bounded, render_email
from herald.models import Integration
from herald.providers.base import EmailMessage


async def run(ctx: StepContext) -> StepOutcome:
    if not ctx.subscriber.email:
        return missing_address(ctx, "email", "email address")
    template = ctx.template
    try:
        rendered = await render_bounded(
            render_email,
            template.get("content") or "",
            template.get("subject") or "",
            ctx.variables(),
            preheader=template.get("preheader"),
        )
    except TemplateError as exc:
        return StepOutcome.failed(f"Template error: {exc}")
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
    )

    async def send(provider):  # type: ignore[no-untyped-def]
        return await provider.send(email)

    def build(chosen: Integration):  # type: ignore[no-untyped-def]
        message = ctx.new_message(
            "email", email=ctx.subscriber.email, subject=rendered.subject, content=rendered.html, provider_id=chosen.provider_id
        )
        return message, send

    return await deliver_with_failover(ctx, "email", failover_order(ctx, integration, candidates), build, already)
