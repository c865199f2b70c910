"""The email step: render, choose the integration, send to subscriber.email."""

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
from herald.engine.templates import TemplateError, render_bounded, render_email
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
    integrations, already = await load_integrations(ctx, "email")
    integration, reason = select_integration(ctx, "email", integrations)
    if integration is None:
        return no_integration(ctx, "email", reason)
    email = EmailMessage(
        to=[ctx.subscriber.email],
        subject=rendered.subject,
        html=rendered.html,
        text=rendered.text,
        sender_name=template.get("senderName") or None,
    )
    message = ctx.new_message(
        "email", email=ctx.subscriber.email, subject=rendered.subject, content=rendered.html, provider_id=integration.provider_id
    )

    async def send(provider):  # type: ignore[no-untyped-def]
        return await provider.send(email)

    return await deliver(ctx, [Delivery(f"email:{integration.identifier}", integration, message, send)], already)
