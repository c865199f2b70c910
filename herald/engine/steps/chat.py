"""The chat step: one message per chat channel of the subscriber (webhook URL or channel)."""

from __future__ import annotations

from typing import Any

from herald.engine.steps.base import StepContext, StepOutcome
from herald.engine.steps.subscriber_channels import deliver_to_channels
from herald.engine.templates import TemplateError, render_bounded, render_chat
from herald.kit.crypto import mask_secret
from herald.models import Integration
from herald.providers.base import ChatMessage


async def run(ctx: StepContext) -> StepOutcome:
    if ctx.bridge_outputs is not None:
        content = ctx.bridge_outputs.text("body") or ""
    else:
        try:
            content = await render_bounded(render_chat, ctx.template.get("content") or "", ctx.variables())
        except TemplateError as exc:
            return StepOutcome.failed(f"Template error: {exc}")

    def build(credentials: dict[str, Any], integration: Integration):  # type: ignore[no-untyped-def]
        chat = ChatMessage(content=content, webhook_url=credentials.get("webhookUrl"), channel=credentials.get("channel"))
        webhook_url = credentials.get("webhookUrl")
        # The message records which webhook by its mask: the address itself is a secret.
        message = ctx.new_message(
            "chat",
            content=content,
            provider_id=integration.provider_id,
            direct_webhook_url=mask_secret(webhook_url) if isinstance(webhook_url, str) else None,
        )

        async def send(provider):  # type: ignore[no-untyped-def]
            return await provider.send(chat)

        return message, send

    return await deliver_to_channels(ctx, "chat", build)
