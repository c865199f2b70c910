"""The push step: one send per push channel of the subscriber, to its device tokens.

A channel entry without device tokens is left out, like a subscriber without
an email address: with no entry left the step is a warning, not a failure.
"""

from __future__ import annotations

from typing import Any

from herald.engine.steps.base import StepContext, StepOutcome
from herald.engine.steps.subscriber_channels import deliver_to_channels
from herald.engine.templates import RenderedPush, TemplateError, render_bounded, render_push
from herald.models import Integration
from herald.providers.base import PushMessage


async def run(ctx: StepContext) -> StepOutcome:
    if ctx.bridge_outputs is not None:
        rendered = RenderedPush(title=ctx.bridge_outputs.text("subject") or "", content=ctx.bridge_outputs.text("body") or "")
    else:
        try:
            rendered = await render_bounded(
                render_push, ctx.template.get("title") or ctx.template.get("subject"), ctx.template.get("content"), ctx.variables()
            )
        except TemplateError as exc:
            return StepOutcome.failed(f"Template error: {exc}")

    def build(credentials: dict[str, Any], integration: Integration):  # type: ignore[no-untyped-def]
        tokens = [token for token in credentials.get("deviceTokens") or [] if isinstance(token, str) and token]
        if not tokens:
            return f"{integration.provider_id} has no device token"
        push = PushMessage(
            tokens=tokens,
            title=rendered.title,
            content=rendered.content,
            data=ctx.payload,
            overrides=((ctx.event.overrides or {}).get("push") or {}),
        )
        message = ctx.new_message(
            "push", title=rendered.title, content=rendered.content, provider_id=integration.provider_id, device_tokens=tokens
        )

        async def send(provider):  # type: ignore[no-untyped-def]
            return await provider.send(push)

        return message, send

    return await deliver_to_channels(ctx, "push", build)
