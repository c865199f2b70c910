"""What the channel steps share: choosing integrations and sending through providers.

A send is recorded per delivery (one per integration for email and sms, one
per subscriber channel entry for chat and push) under a ``delivery_key``. A
delivery the provider accepted is stored at once, in a short transaction of
its own (while the worker still holds the job's lease), before anything else
is written: should writing the job's outcome fail afterwards (a database error,
a lost lease), the retry finds the delivery recorded and does not send it
again. A delivery that failed for good (a permanent error) is not sent again
either when another delivery of the same job is retried.

What is left is a worker dying (or cut off from the store) between the
provider's answer and that write: the job is retaken and the message sent
again, at least once. Every send carries the same identity on every attempt
(``SendIdentity``: the job and the delivery key), so a provider that takes an
idempotency key (Resend, Brevo, OneSignal) takes the copy as the same message
and does not send it twice. An SMTP server cannot be asked: before the send
begins the attempt is written down (``record_handover``), the email keeps one
Message-ID across attempts, and an attempt that finds an earlier hand-over
without an answer says in its execution details that the email may arrive
twice.

Email and sms fail over (``deliver_with_failover``): the chosen integration
first, then the channel's other active integrations in priority order, each
behind its circuit breaker (``herald.engine.breaker``); the first that accepts
stores the one message of the step. Chat and push send to each subscriber
channel entry through that entry's own provider (``deliver``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from herald.engine import breaker, queue
from herald.engine.filters import FilterContext, step_passes
from herald.engine.repository import EngineRepository
from herald.engine.steps.base import Detail, StepContext, StepOutcome
from herald.engine.steps.batch import record_handovers
from herald.kit import tracing
from herald.kit.crypto import is_secret, scrub
from herald.kit.ids import new_id
from herald.kit.metrics import ACCEPTED, PERMANENT, TRANSIENT, record_provider_call
from herald.kit.time import isoformat
from herald.models import Integration, IntegrationHealth, Message
from herald.providers.base import Provider, ProviderError, SendIdentity, SendResult
from herald.providers.registry import provider_class

logger = logging.getLogger("herald.delivery")


def log_delivery(ctx: StepContext, level: int, what: str, provider: str | None, reason: str) -> None:
    """One log line about a delivery that did not go as asked: what happened, to which step of which trigger, and why.

    ``reason`` is already scrubbed of the integration's secrets (as the execution details are).
    """
    if "outbound policy refused" in reason:
        what = f"{what}: refused by the outbound policy"
    logger.log(
        level,
        what,
        extra={
            "fields": {
                "environment": ctx.job.environment_id,
                "workflow": ctx.event.trigger_identifier,
                "transactionId": ctx.job.transaction_id,
                "step": ctx.job.step_id,
                "provider": provider,
                "reason": reason,
            }
        },
    )


async def timed_send(provider_id: str, send: Callable[[], Awaitable[SendResult]]) -> SendResult:
    """``send()``, counted and timed in the provider metrics (herald_provider_requests_total, by outcome)."""
    if tracing.tracer is not None:
        return await _traced_send(provider_id, send)
    started = time.perf_counter()
    try:
        result = await send()
    except ProviderError as exc:
        record_provider_call(provider_id, TRANSIENT if exc.transient else PERMANENT, time.perf_counter() - started)
        raise
    record_provider_call(provider_id, ACCEPTED, time.perf_counter() - started)
    return result


async def _traced_send(provider_id: str, send: Callable[[], Awaitable[SendResult]]) -> SendResult:
    """:func:`timed_send` inside a client span of the step's trace (kit/tracing.py), while traces are on."""
    with tracing.client_span(f"provider {provider_id}", **{"herald.provider": provider_id}) as span:
        started = time.perf_counter()
        try:
            result = await send()
        except ProviderError as exc:
            record_provider_call(provider_id, TRANSIENT if exc.transient else PERMANENT, time.perf_counter() - started)
            span.set_attribute("herald.provider.outcome", TRANSIENT if exc.transient else PERMANENT)
            tracing.mark_failed(span, "the provider refused the send" if not exc.transient else "the send may be retried")
            raise
        record_provider_call(provider_id, ACCEPTED, time.perf_counter() - started)
        span.set_attribute("herald.provider.outcome", ACCEPTED)
        return result


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
    if ctx.batch is not None:
        candidates = await ctx.batch.candidates(ctx.job.environment_id, channel)
        return [integration for integration, _ in candidates], await ctx.batch.earlier_messages(ctx.job.id)
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


async def load_candidates(ctx: StepContext, channel: str) -> tuple[list[tuple[Integration, IntegrationHealth | None]], dict[str, Message]]:
    """The channel's active integrations (failover order) with their breaker, and the job's messages so far.

    Read once for the steps of a batch (steps/batch.py) when the runner gave them one.
    """
    if ctx.batch is not None:
        return await ctx.batch.candidates(ctx.job.environment_id, channel), await ctx.batch.earlier_messages(ctx.job.id)
    async with ctx.sessionmaker() as session:
        repository = EngineRepository(session)
        return (
            await repository.active_integrations_with_health(ctx.job.environment_id, channel),
            await repository.messages_of_job(ctx.job.id),
        )


def failover_order(
    ctx: StepContext, first: Integration, candidates: Sequence[tuple[Integration, IntegrationHealth | None]]
) -> list[tuple[Integration, IntegrationHealth | None]]:
    """The chosen integration, then the channel's others in priority order.

    An integration with conditions is there for the tenants they name: it is
    a fallback only when its conditions match this trigger.
    """
    context = FilterContext(subscriber=ctx.subscriber_fields(), payload=ctx.payload, tenant=ctx.tenant) if ctx.tenant else None
    ordered = [pair for pair in candidates if pair[0].id == first.id]
    for integration, health in candidates:
        if integration.id == first.id:
            continue
        if integration.conditions and (context is None or not step_passes(integration.conditions, context).passed):
            continue
        ordered.append((integration, health))
    return ordered


Build = Callable[[Integration], tuple[Message, Callable[[Provider[Any]], Awaitable[SendResult]]]]


async def deliver_with_failover(
    ctx: StepContext,
    channel: str,
    chain: list[tuple[Integration, IntegrationHealth | None]],
    build: Build,
    already: dict[str, Message],
) -> StepOutcome:
    """Send one email or sms through the first integration of ``chain`` that takes it.

    A transient failure moves on to the next integration at once (and counts
    against the integration's breaker); a permanent one ends the step (another
    provider would refuse the same request). An integration whose breaker is
    open is skipped. When every integration failed transiently or was
    skipped, the job is retried with backoff like any transient failure; on
    its last attempt, integrations skipped by their breaker are tried anyway
    rather than failing a message no provider was asked to send.
    """
    details: list[Detail] = []
    # An earlier attempt's hand-over without an answer (record_handover); this attempt's own set it again.
    earlier, ctx.job.handed_over = ctx.job.handed_over, None
    keys = {f"{channel}:{integration.identifier}": integration for integration, _ in chain}
    for key, integration in keys.items():
        previous = already.get(key)
        if previous is not None and previous.status == "sent":
            return StepOutcome(
                "completed",
                details=[Detail("Success", f"Already sent by {integration.provider_id} through {integration.identifier} (id {previous.provider_message_id}); not sent again", integration.provider_id)],
            )
    for key, integration in keys.items():
        previous = already.get(key)
        if previous is not None and previous.status == "error":
            text = previous.error_text or "delivery failed"
            return StepOutcome(
                "failed",
                details=[Detail("Failed", f"Not sent again: it failed for good on an earlier attempt ({text})", integration.provider_id)],
                error_text=text,
            )
    if earlier is not None:
        details.append(
            Detail(
                "Warning",
                f"Attempt {earlier} began sending this {channel} to its SMTP server and no answer was recorded (its "
                "worker stopped, or the connection was lost after the message's data): it is sent again, with the same "
                "Message-ID, and may arrive twice",
            )
        )
    last_attempt = ctx.job.attempts >= ctx.job.max_attempts
    transient: list[str] = []
    skipped: list[Integration] = []
    last_tried: tuple[Integration, Message] | None = None
    # An SMTP server had this attempt's data and gave no answer: it may have the message.
    in_doubt = False

    async def attempt(integration: Integration, health: IntegrationHealth | None, *, forced: bool) -> StepOutcome | None:
        """Send through one integration: the step's outcome when it is settled, None to go on to the next."""
        nonlocal last_tried, in_doubt
        provider_id = integration.provider_id
        probing = False
        at = breaker.now()
        decision = breaker.Decision.SEND if forced else breaker.decide(health, at)
        if decision is breaker.Decision.PROBE:
            probing = await _claim_probe(ctx, integration, at)
            if not probing:
                decision = breaker.Decision.SKIP
        if decision is breaker.Decision.SKIP:
            skipped.append(integration)
            until = isoformat(health.skipped_until) if health is not None else None
            why = "another message is probing it" if health is not None and health.skipped_until and health.skipped_until <= at else f"its circuit breaker is open until {until}"
            details.append(Detail("Warning", f"Skipped {integration.identifier} ({provider_id}): {why}", provider_id, raw=_raw(integration, "skipped")))
            log_delivery(ctx, logging.INFO, "integration skipped", provider_id, why)
            return None
        if probing:
            details.append(Detail("Pending", f"Probing {integration.identifier} ({provider_id}): its cool-down is over; this message tries it first", provider_id, raw=_raw(integration, "probe")))
        elif forced:
            details.append(Detail("Pending", f"Trying {integration.identifier} ({provider_id}) although its circuit breaker is open: the job's last attempt, and every integration was skipped", provider_id, raw=_raw(integration, "forced")))
        cls = provider_class(provider_id)
        message, send = build(integration)
        message.delivery_key = f"{channel}:{integration.identifier}"
        last_tried = (integration, message)
        if cls is None:
            text = f"Provider {provider_id!r} is not supported by Herald"
            _fail(Delivery(message.delivery_key, integration, message, send), [], details, text)
            log_delivery(ctx, logging.ERROR, "delivery failed", provider_id, text)
            return StepOutcome("failed", details=details, messages=[message], error_text=text)
        credentials = ctx.box.open_credentials(integration.credentials)
        provider = cls(
            credentials,
            ctx.http,
            integration_id=integration.id,
            identity=SendIdentity(ctx.job.id, message.delivery_key),
            before_handover=partial(record_handover, ctx),
        )
        try:
            result = await timed_send(provider_id, partial(send, provider))
        except ProviderError as exc:
            # Without a reply after the data, the server may have the message: the job's outcome keeps the
            # hand-over for the next attempt to say so; a reply (or a failure before the data) settles it.
            in_doubt = in_doubt or exc.maybe_taken
            ctx.job.handed_over = ctx.job.attempts if in_doubt else None
            secrets = [value for key, value in credentials.items() if is_secret(key, value)]
            exc.message = scrub(exc.message, secrets)
            if not exc.transient:
                if probing:
                    # The provider answered: it is up, whatever it thought of this request.
                    await _clear_health(ctx, integration)
                _fail(Delivery(message.delivery_key, integration, message, send), [], details, exc.message, status_code=exc.status_code)
                log_delivery(ctx, logging.ERROR, "delivery failed", provider_id, exc.message)
                return StepOutcome("failed", details=details, messages=[message], error_text=exc.message)
            transient.append(f"{integration.identifier}: {exc.message}")
            state = await _record_failure(ctx, integration, exc.message, probing=probing)
            opened = state.skipped_until is not None and (probing or health is None or health.skipped_until != state.skipped_until)
            note = f"; its circuit breaker is open until {isoformat(state.skipped_until)}" if opened else ""
            # The last of the chain's failure is told by the step's own line (will retry, or failed).
            if integration.id != chain[-1][0].id:
                log_delivery(ctx, logging.WARNING, "provider failed, failing over" + (" (circuit breaker opened)" if opened else ""), provider_id, exc.message)
            details.append(
                Detail(
                    "Failed",
                    f"{integration.identifier} ({provider_id}) failed, moving on: {exc.message}{note}",
                    provider_id,
                    raw=_raw(integration, "transient", statusCode=exc.status_code, breakerOpen=opened),
                )
            )
            return None
        ctx.job.handed_over = None
        if probing or health is not None:
            await _clear_health(ctx, integration)
        message.status = "sent"
        message.provider_message_id = result.provider_message_id
        message.delivered_at = [isoformat(ctx.now)]
        await record_accepted(ctx, message)
        note = f"; some recipients failed: {'; '.join(result.failures)}" if result.failures else ""
        through = f" through {integration.identifier}" + (" (failover)" if transient or skipped else "")
        details.append(
            Detail(
                "Success",
                f"Accepted by {provider_id}{through} (id {result.provider_message_id}){note}{_deduplicated(result)}",
                provider_id,
                raw={"providerMessageId": result.provider_message_id, "integrationIdentifier": integration.identifier},
            )
        )
        return StepOutcome("completed", details=details, messages=[message])

    for integration, health in chain:
        outcome = await attempt(integration, health, forced=False)
        if outcome is not None:
            return outcome
    if last_attempt and skipped:
        for integration in list(skipped):
            outcome = await attempt(integration, None, forced=True)
            if outcome is not None:
                return outcome
    if not transient:
        text = f"Every active {channel} integration was skipped: their circuit breakers are open"
    else:
        text = "Every active {} integration failed: {}".format(channel, "; ".join(transient))
    if not last_attempt:
        details.append(Detail("Failed", f"{text} (will retry)"))
        log_delivery(ctx, logging.WARNING, "delivery failed, will retry", None, text)
        return StepOutcome("failed", details=details, retryable=True, error_text=text)
    integration, message = last_tried if last_tried is not None else (chain[0][0], build(chain[0][0])[0])
    message.delivery_key = f"{channel}:{integration.identifier}"
    message.status = "error"
    message.error_id = f"error_{new_id()}"
    message.error_text = text
    details.append(Detail("Failed", f"Delivery failed: {text}", integration.provider_id))
    log_delivery(ctx, logging.ERROR, "delivery failed", integration.provider_id, text)
    return StepOutcome("failed", details=details, messages=[message], error_text=text)


def _raw(integration: Integration, outcome: str, **more: Any) -> dict[str, Any]:
    return {"integrationIdentifier": integration.identifier, "providerId": integration.provider_id, "failover": outcome, **{k: v for k, v in more.items() if v is not None}}


async def _claim_probe(ctx: StepContext, integration: Integration, at: datetime) -> bool:
    async with ctx.sessionmaker() as session, session.begin():
        return await EngineRepository(session).claim_probe(integration.id, at, at + ctx.settings.breaker.cooldown)


async def _record_failure(ctx: StepContext, integration: Integration, error: str, *, probing: bool) -> IntegrationHealth:
    settings = ctx.settings.breaker
    at = breaker.now()
    async with ctx.sessionmaker() as session, session.begin():
        state = await EngineRepository(session).record_integration_failure(
            integration.id,
            integration.environment_id,
            now=at,
            failures=settings.failures,
            window_start=at - settings.window,
            open_until=at + settings.cooldown,
            probing=probing,
            error=error,
        )
    if ctx.batch is not None:
        ctx.batch.learned(integration, state)
    return state


async def _clear_health(ctx: StepContext, integration: Integration) -> None:
    async with ctx.sessionmaker() as session, session.begin():
        await EngineRepository(session).clear_integration_health(integration.id)
    if ctx.batch is not None:
        ctx.batch.learned(integration, None)


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
            log_delivery(ctx, logging.ERROR, "delivery failed", provider_id, permanent[-1])
            continue
        credentials = ctx.box.open_credentials(delivery.integration.credentials)
        provider = cls(
            credentials, ctx.http, integration_id=delivery.integration.id, identity=SendIdentity(ctx.job.id, delivery.key)
        )
        try:
            result = await timed_send(provider_id, partial(delivery.send, provider))
        except ProviderError as exc:
            # What a provider answered may echo the key or the webhook address it was called with.
            secrets = [value for key, value in credentials.items() if is_secret(key, value)]
            exc.message = scrub(exc.message, [*secrets, *delivery.secrets])
            if exc.transient and ctx.job.attempts < ctx.job.max_attempts:
                transient.append(exc.message)
                details.append(Detail("Failed", f"Provider error (will retry): {exc.message}", provider_id))
                log_delivery(ctx, logging.WARNING, "delivery failed, will retry", provider_id, exc.message)
            else:
                permanent.append(_fail(delivery, messages, details, exc.message, status_code=exc.status_code))
                log_delivery(ctx, logging.ERROR, "delivery failed", provider_id, exc.message)
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
                f"Accepted by {provider_id} (id {result.provider_message_id}){note}{_deduplicated(result)}",
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
    what to record about it, belong to the worker that took it over. The
    steps of a batch store theirs together (steps/batch.py).
    """
    if ctx.batch is not None:
        await ctx.batch.accepted.store(ctx.job.id, message)
        return
    async with ctx.sessionmaker() as session, session.begin():
        await queue.lock_owned_job(session, ctx.job.id, ctx.worker_id)
        await EngineRepository(session).save_messages([message])
    message.stored_on_acceptance = True


async def record_handover(ctx: StepContext) -> None:
    """Write down that this attempt sends the step's email to its SMTP server, before its send begins.

    An SMTP server cannot be asked later whether it took a message. A worker
    that dies between the server's answer and storing the delivery leaves the
    job with this record; the attempt after it says the message may arrive
    twice, and sends it again with the same Message-ID (at least once: a lost
    email is worse than a copy that mail stores can fold by its Message-ID).
    Written only while this worker holds the job: ``JobLost`` otherwise, and
    the message is not sent by this worker.

    Written when the send begins, not at DATA: the sends of a claimed batch
    begin together, so their records are written together (``HandOvers``), one
    statement for a hundred emails in the engine's tests. Written at each
    email's DATA, where five sends at a time share an integration's
    connections, they were a write an email: Herald's CPU an SMTP email
    (``python -m bench.email``, PostgreSQL, 2 workers, a busy machine, runs in
    turns) went from 2.7-3.3 ms to 4.8-5.0 ms; written when the sends begin,
    3.37 ms against 3.14 (medians of five turns each). The price: a job taken
    over after its worker died says "may arrive twice" of an email that still
    waited for a connection and never went.
    """
    if ctx.batch is not None:
        await ctx.batch.handovers.record(ctx.job.id)
    elif not await record_handovers(ctx.sessionmaker, [ctx.job.id], ctx.worker_id):
        raise queue.JobLost(ctx.job.id)
    ctx.job.handed_over = ctx.job.attempts


def _deduplicated(result: SendResult) -> str:
    if not result.deduplicated:
        return ""
    return "; the provider had this message already, under its idempotency key (an earlier attempt's answer was lost), and did not send it again"


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
    log_delivery(ctx, logging.ERROR, "delivery failed", None, reason)
    return StepOutcome("failed", details=[Detail("Failed", reason)], messages=[message], error_text=reason)
