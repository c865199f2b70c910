"""What the channel steps share: choosing integrations and sending through providers.

A send is recorded per delivery (one per integration for email and sms, one
per subscriber channel entry for chat and push) under a ``delivery_key``. A
delivery the provider accepted is stored at once, in a short transaction of
its own (while the worker still holds the job's lease), before anything else
is written: should writing the job's outcome fail afterwards (a database error,
a lost lease), the retry finds the delivery recorded and does not send it
again. A delivery that failed for good (a permanent error) is not sent again
either when another delivery of the same job is retried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from herald.engine import queue
from herald.engine.filters import FilterContext, step_passes
from herald.engine.repository import EngineRepository
from herald.engine.steps.base import Detail, StepContext, StepOutcome
from herald.kit.crypto import is_secret, scrub
from herald.kit.ids import new_id
from herald.kit.time import isoformat
from herald.models import Integration, Message
from herald.providers.base import Provider, ProviderError, SendResult
from herald.providers.registry import provider_class


@dataclass
class Delivery:
    """One send: which integration, under which key, and the message row to record it."""

    key: str
    integration: Integration
    message: Message
    send: Callable[[Provider[Any]], Awaitable[SendResult]]
    # Secrets of the send besides the integration's (a subscriber's webhookUrl): kept out of error texts.
    secrets: tuple[str, ...] = ()


async def load_integrations(ctx: StepContext, channel: str) -> tuple[Sequence[Integration], dict[str, Message]]:
    async with ctx.sessionmaker() as session:
        repository = EngineRepository(session)
        return await repository.active_integrations(ctx.job.environment_id, channel), await repository.messages_of_job(ctx.job.id)


def select_integration(ctx: StepContext, channel: str, integrations: Sequence[Integration]) -> tuple[Integration | None, str]:
    """The integration that sends this step's email or sms, or None and why.

    ``overrides.<channel>.integrationIdentifier`` names one; otherwise, with a
    tenant, the first active integration whose conditions match; otherwise the
    channel's primary, even when it has conditions of its own (as Novu, which
    reads the primary without looking at them); with no primary, the
    highest-priority active integration without conditions (one with
    conditions is there for the tenants they name).
    """
    override = ((ctx.event.overrides or {}).get(channel) or {}).get("integrationIdentifier")
    if override:
        chosen = next((i for i in integrations if i.identifier == override), None)
        if chosen is None:
            return None, f"No active {channel} integration with identifier {override!r} in this environment"
        return chosen, f"integration {override} chosen by overrides.{channel}.integrationIdentifier"
    if ctx.tenant:
        context = FilterContext(subscriber=ctx.subscriber_fields(), payload=ctx.payload, tenant=ctx.tenant)
        for integration in integrations:
            if integration.conditions and step_passes(integration.conditions, context).passed:
                return integration, f"integration {integration.identifier} chosen by its conditions"
    primary = next((i for i in integrations if i.primary), None)
    if primary is not None:
        return primary, f"integration {primary.identifier} (primary)"
    unconditional = [i for i in integrations if not i.conditions]
    if not unconditional:
        return None, f"No active {channel} integration in this environment"
    return unconditional[0], f"integration {unconditional[0].identifier} (highest priority)"


async def deliver(ctx: StepContext, deliveries: list[Delivery], already: dict[str, Message]) -> StepOutcome:
    """Send every delivery not yet settled; answer what the job should become."""
    details: list[Detail] = []
    messages: list[Message] = []
    transient: list[str] = []
    permanent: list[str] = []
    for delivery in deliveries:
        delivery.message.delivery_key = delivery.key
        provider_id = delivery.integration.provider_id
        previous = already.get(delivery.key)
        if previous is not None and previous.status == "sent":
            details.append(Detail("Success", f"Already sent by {provider_id} (id {previous.provider_message_id}); not sent again", provider_id))
            continue
        if previous is not None and previous.status == "error":
            # Failed for good on an earlier attempt (a retry would meet the same refusal).
            permanent.append(previous.error_text or "delivery failed")
            details.append(Detail("Failed", f"Not sent again: it failed for good on an earlier attempt ({previous.error_text})", provider_id))
            continue
        cls = provider_class(provider_id)
        if cls is None:
            permanent.append(_fail(delivery, messages, details, f"Provider {provider_id!r} is not supported by Herald"))
            continue
        credentials = ctx.box.open_credentials(delivery.integration.credentials)
        provider = cls(credentials, ctx.http)
        try:
            result = await delivery.send(provider)
        except ProviderError as exc:
            # What a provider answered may echo the key or the webhook address it was called with.
            secrets = [value for key, value in credentials.items() if is_secret(key, value)]
            exc.message = scrub(exc.message, [*secrets, *delivery.secrets])
            if exc.transient and ctx.job.attempts < ctx.job.max_attempts:
                transient.append(exc.message)
                details.append(Detail("Failed", f"Provider error (will retry): {exc.message}", provider_id))
            else:
                permanent.append(_fail(delivery, messages, details, exc.message, status_code=exc.status_code))
            continue
        delivery.message.status = "sent"
        delivery.message.provider_message_id = result.provider_message_id
        delivery.message.delivered_at = [isoformat(ctx.now)]
        await record_accepted(ctx, delivery.message)
        messages.append(delivery.message)
        note = f"; some recipients failed: {'; '.join(result.failures)}" if result.failures else ""
        # Only the provider's id is kept of its answer: whatever answered a
        # caller-written URL is not repeated to the caller (result.raw is not stored).
        details.append(
            Detail(
                "Success",
                f"Accepted by {provider_id} (id {result.provider_message_id}){note}",
                provider_id,
                raw={"providerMessageId": result.provider_message_id},
            )
        )
    if transient:
        return StepOutcome("failed", details=details, messages=messages, retryable=True, error_text="; ".join(transient))
    if permanent:
        return StepOutcome("failed", details=details, messages=messages, error_text="; ".join(permanent))
    return StepOutcome("completed", details=details, messages=messages)


async def record_accepted(ctx: StepContext, message: Message) -> None:
    """Store a delivery the provider accepted, at once, while this worker still holds the job.

    A worker whose lease ran out (``JobLost``) writes nothing: the job, and
    what to record about it, belong to the worker that took it over.
    """
    async with ctx.sessionmaker() as session, session.begin():
        await queue.lock_owned_job(session, ctx.job.id, ctx.worker_id)
        await EngineRepository(session).save_messages([message])


def _fail(delivery: Delivery, messages: list[Message], details: list[Detail], text: str, status_code: int | None = None) -> str:
    delivery.message.status = "error"
    delivery.message.error_id = f"provider_error_{status_code}" if status_code else f"error_{new_id()}"
    delivery.message.error_text = text
    messages.append(delivery.message)
    details.append(Detail("Failed", f"Delivery failed: {text}", delivery.integration.provider_id))
    return text


def missing_address(ctx: StepContext, channel: str, what: str) -> StepOutcome:
    """A subscriber who cannot be reached on this channel: a warning message, and the workflow goes on."""
    text = f"Subscriber {ctx.subscriber.subscriber_id} has no {what}; the {channel} step was not sent"
    message = ctx.new_message(channel, status="warning", error_id="missing_address", error_text=text)
    return StepOutcome("skipped", details=[Detail("Warning", text)], messages=[message])


def no_integration(ctx: StepContext, channel: str, reason: str) -> StepOutcome:
    message = ctx.new_message(channel, status="error", error_id="no_integration", error_text=reason)
    return StepOutcome("failed", details=[Detail("Failed", reason)], messages=[message], error_text=reason)
