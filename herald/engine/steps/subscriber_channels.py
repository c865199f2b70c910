"""Chat and push go to every entry of subscriber.channels whose provider has an active integration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from herald.engine.steps.base import Detail, StepContext, StepOutcome
from herald.engine.steps.delivery import Delivery, deliver, load_integrations
from herald.kit.crypto import is_secret
from herald.models import Integration, Message
from herald.subscribers.channels import open_channel_credentials


async def deliver_to_channels(
    ctx: StepContext,
    channel: str,
    build: Callable[[dict[str, Any], Integration], tuple[Message, Callable[..., Any]] | str],
) -> StepOutcome:
    """Deliver to each channel entry; ``build`` answers the message and its send, or why the entry cannot be used."""
    integrations, already = await load_integrations(ctx, channel)
    deliveries = []
    unusable = []
    for index, entry in enumerate(ctx.subscriber.channels or []):
        provider_id = entry.get("providerId")
        wanted = entry.get("integrationIdentifier")
        integration = next(
            (i for i in integrations if i.provider_id == provider_id and (not wanted or i.identifier == wanted)), None
        )
        if integration is None:
            if any(i.channel == channel for i in integrations) or provider_id:
                unusable.append(f"{provider_id} has no active integration")
            continue
        # The entry's secrets (webhookUrl) are stored sealed: opened here, to send with.
        credentials = open_channel_credentials(ctx.box, entry.get("credentials") or {})
        built = build(credentials, integration)
        if isinstance(built, str):
            unusable.append(built)
            continue
        message, send = built
        secrets = tuple(value for key, value in credentials.items() if is_secret(key, value))
        deliveries.append(Delivery(f"{channel}:{integration.identifier}:{index}", integration, message, send, secrets))
    if not deliveries:
        text = f"Subscriber {ctx.subscriber.subscriber_id} has no {channel} channel that can be used" + (
            f" ({'; '.join(unusable)})" if unusable else ""
        )
        message = ctx.new_message(channel, status="warning", error_id="missing_channel", error_text=text)
        return StepOutcome("skipped", details=[Detail("Warning", text)], messages=[message])
    outcome = await deliver(ctx, deliveries, already)
    if unusable:
        outcome.details.append(Detail("Warning", f"Channels left out: {'; '.join(unusable)}"))
    return outcome
