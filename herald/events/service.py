"""Trigger use cases: validate, record durably, answer.

A trigger is accepted by writing an ``Event`` row and the ``Job`` that will
expand it in the request's transaction, so an accepted trigger cannot be lost
between the answer and the worker. Delivery is the engine's work.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.contexts.service import parse_context
from herald.contexts.service import resolve as resolve_contexts
from herald.engine.queue import PRESSURE_REQUESTS
from herald.events.repository import EventRepository, WorkflowsChanged
from herald.events.schemas import BroadcastEventRequest, TriggerEventRequest, TriggerTenant
from herald.events.targets import TriggerTargets
from herald.kit import tracing
from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.db import without_transaction
from herald.kit.errors import UnprocessableError, ValidationFailed, validation_errors
from herald.kit.ids import new_id, new_transaction_id
from herald.kit.text import is_valid_identifier
from herald.kit.time import utcnow
from herald.models import Workflow
from herald.subscribers.schemas import CreateSubscriberRequest
from herald.tenants.repository import TenantRepository
from herald.topics.repository import TopicRepository
from herald.workflows.payload import PayloadValidationError, checked_payload
from herald.workflows.repository import TriggerTarget, WorkflowRepository

DUPLICATE_TRANSACTION = (
    "transactionId property is not unique, please make sure all triggers have a unique transactionId"
)
SUBSCRIBER_FIELDS = (
    "subscriberId",
    "email",
    "firstName",
    "lastName",
    "phone",
    "avatar",
    "locale",
    "data",
    "channels",
    "timezone",
)


@dataclass
class TriggerResult:
    acknowledged: bool
    status: str
    transaction_id: str
    errors: list[str] = field(default_factory=list)

    def as_response(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "acknowledged": self.acknowledged,
            "status": self.status,
            "transactionId": self.transaction_id,
        }
        if self.errors:
            body["error"] = self.errors
        return body


@dataclass
class Recipients:
    accepted: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    # Where each accepted entry was in ``to``, so a later refusal names its place.
    accepted_at: list[int] = field(default_factory=list)

    def accept(self, index: int, entry: dict[str, Any]) -> None:
        self.accepted.append(entry)
        self.accepted_at.append(index)

    def reject(self, index: int, recipient: Any, reason: str) -> None:
        self.rejected.append({"index": index, "recipient": recipient, "reason": reason})

    @property
    def reasons(self) -> list[str]:
        return [f"to[{item['index']}]: {item['reason']}" for item in self.rejected]


def check_recipient_count(to: Any, limit: int, field: str = "to") -> None:
    """Refuse a ``to`` that lists more than ``limit`` recipients (HERALD_MAX_RECIPIENTS), with a 422.

    Each entry counts as one, a topic too: topics and broadcasts are how a
    trigger reaches a large audience, and their fan-out is the engine's, in
    batches. A list in one request is held, parsed and judged at once.
    """
    if isinstance(to, list) and len(to) > limit:
        raise ValidationFailed.field(
            field,
            f"{field} lists {len(to):,} recipients; a trigger may list at most {limit:,} (HERALD_MAX_RECIPIENTS): "
            "send to a topic to reach more",
            len(to),
        )


def parse_recipients(to: Any) -> Recipients:
    """Sort the ``to`` field into recipients the engine can address and refused ones (with why).

    Accepted entries are normalized to ``{"type": "Subscriber", "subscriberId", ...fields}``
    or ``{"type": "Topic", "topicKey", "exclude"}``.
    """
    items = to if isinstance(to, list) else [to]
    recipients = Recipients()
    for index, item in enumerate(items):
        if isinstance(item, str):
            if is_valid_identifier(item):
                recipients.accept(index, {"type": "Subscriber", "subscriberId": item})
            else:
                recipients.reject(index, item, f"subscriberId {item!r} is not valid: use letters, digits, _ : . - or an email address")
            continue
        if not isinstance(item, dict):
            recipients.reject(index, item, "a recipient must be a subscriberId, a subscriber object or a topic")
            continue
        if str(item.get("type", "")).lower() == "topic":
            key = item.get("topicKey")
            if not is_valid_identifier(key):
                recipients.reject(index, item, f"topicKey {key!r} is not valid")
                continue
            exclude = item.get("exclude") or []
            if not isinstance(exclude, list) or not all(isinstance(value, str) for value in exclude):
                recipients.reject(index, item, "exclude must be an array of subscriberIds")
                continue
            recipients.accept(index, {"type": "Topic", "topicKey": key, "exclude": exclude})
            continue
        subscriber_id = item.get("subscriberId")
        if subscriber_id is None:
            recipients.reject(index, item, "subscriberId under property to is not configured")
        elif not is_valid_identifier(subscriber_id):
            recipients.reject(index, item, f"subscriberId {subscriber_id!r} is not valid: use letters, digits, _ : . - or an email address")
        else:
            entry, problems = subscriber_fields(item)
            if problems:
                recipients.reject(index, item, problems)
            else:
                recipients.accept(index, {"type": "Subscriber", **entry})
    return recipients


def subscriber_fields(item: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The subscriber fields of an inline recipient or actor, checked as ``POST /v1/subscribers`` checks them.

    Only the fields given are kept (the engine sets just those on an existing
    subscriber); a field of the wrong type or shape is refused here, with
    why, rather than failing the run later.
    """
    given = {key: item[key] for key in SUBSCRIBER_FIELDS if key in item}
    checked, problems = _checked(CreateSubscriberRequest, given)
    return (checked if checked is not None else given), problems


def _checked(model: type[BaseModel], given: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    try:
        parsed = model.model_validate(given)
    except ValidationError as exc:
        errors = validation_errors(exc.errors())
        return None, "; ".join(message for entry in errors.values() for message in entry["messages"])
    return parsed.model_dump(exclude_unset=True, mode="json"), None


def normalize_actor(actor: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if actor is None:
        return None
    if isinstance(actor, str):
        actor = {"subscriberId": actor}
    subscriber_id = actor.get("subscriberId")
    if not is_valid_identifier(subscriber_id):
        raise ValidationFailed.field(
            "actor.subscriberId", "actor must be a subscriberId or an object with a valid subscriberId", subscriber_id
        )
    entry, problems = subscriber_fields(actor)
    if problems:
        raise ValidationFailed.field("actor", f"actor: {problems}", actor)
    return entry


def normalize_tenant(tenant: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if tenant is None:
        return None
    if isinstance(tenant, str):
        tenant = {"identifier": tenant}
    identifier = tenant.get("identifier")
    if not isinstance(identifier, str) or not identifier:
        raise ValidationFailed.field("tenant.identifier", "tenant must be an identifier or an object with an identifier", identifier)
    checked, problems = _checked(TriggerTenant, {key: tenant[key] for key in ("identifier", "name", "data") if key in tenant})
    if checked is None:
        raise ValidationFailed.field("tenant", f"tenant: {problems}", tenant)
    return checked


def workflow_status(workflow: Workflow | TriggerTarget) -> str | None:
    """Why a workflow cannot run now, as a trigger status; None when it can."""
    if not workflow.active:
        return "trigger_not_active"
    if not workflow.steps:
        return "no_workflow_steps_defined"
    if not any(step.get("active", True) for step in workflow.steps):
        return "no_workflow_active_steps_defined"
    return None


@dataclass(frozen=True)
class Trigger:
    """One trigger to record: who sent it and what they sent."""

    principal: Principal
    request: TriggerEventRequest | BroadcastEventRequest
    broadcast: bool = False
    # Seals the secrets (webhookUrl) of inline subscribers' channels before the event is stored.
    box: SecretBox | None = None
    # The request's span while traces are on (kit/tracing.py), taken where the trigger is made: the
    # group commit writes it from another task. Written on the event's job; None while traces are off.
    trace_context: str | None = field(default_factory=tracing.current_traceparent)


@dataclass
class _Lookups:
    """What a batch of triggers needs from the store, read once for the whole batch."""

    workflows: dict[tuple[str, str], TriggerTarget]
    tenants: set[tuple[str, str]]
    topics: set[tuple[str, str]]
    # The workflows taken from the process's TriggerTargets, not read: the
    # write checks they are unchanged.
    kept: dict[tuple[str, str], TriggerTarget] = field(default_factory=dict)


async def _lookups(
    session: AsyncSession,
    triggers: Sequence[Trigger],
    targets: TriggerTargets | None = None,
    known: Mapping[tuple[str, str], TriggerTarget] | None = None,
) -> _Lookups:
    names: dict[str, set[str]] = defaultdict(set)
    tenants: dict[str, set[str]] = defaultdict(set)
    topics: dict[str, set[str]] = defaultdict(set)
    for trigger in triggers:
        environment_id = trigger.principal.environment_id
        names[environment_id].add(trigger.request.name)
        tenant = trigger.request.tenant
        identifier = tenant if isinstance(tenant, str) else tenant.get("identifier") if isinstance(tenant, dict) else None
        if isinstance(identifier, str) and identifier:
            tenants[environment_id].add(identifier)
        to = getattr(trigger.request, "to", None)
        for item in to if isinstance(to, list) else [to]:
            if isinstance(item, dict) and str(item.get("type", "")).lower() == "topic" and isinstance(item.get("topicKey"), str):
                topics[environment_id].add(item["topicKey"])
    workflows = WorkflowRepository(session)
    found = _Lookups(workflows=dict(known or {}), tenants=set(), topics=set())
    for environment_id, identifiers in names.items():
        unknown = {identifier for identifier in identifiers if (environment_id, identifier) not in found.workflows}
        if targets is not None:
            for identifier in list(unknown):
                kept = targets.get(environment_id, identifier)
                if kept is not None:
                    found.workflows[(environment_id, identifier)] = found.kept[(environment_id, identifier)] = kept
                    unknown.discard(identifier)
        if not unknown:
            continue
        for workflow in await workflows.trigger_targets(environment_id, unknown):
            found.workflows[(environment_id, workflow.trigger_identifier)] = workflow
            if targets is not None:
                targets.keep(environment_id, workflow)
    for environment_id, identifiers in tenants.items():
        existing = await TenantRepository(session).identifiers_that_exist(environment_id, identifiers)
        found.tenants.update((environment_id, identifier) for identifier in existing)
    for environment_id, keys in topics.items():
        existing = await TopicRepository(session).keys_that_exist(environment_id, list(keys))
        found.topics.update((environment_id, key) for key in existing)
    return found


async def _store_contexts(session: AsyncSession, accepted: Sequence[_Accepted]) -> None:
    """Make the contexts the batch's triggers name exist, one upsert per environment.

    Only batches where a trigger names a context come here; the others pay
    nothing. An upsert is idempotent, so a batch judged again (WorkflowsChanged)
    may repeat it.
    """
    by_environment: dict[tuple[str, str], list[tuple[str, str, dict[str, Any] | None]]] = defaultdict(list)
    for item in accepted:
        if item.contexts:
            by_environment[(item.event["environment_id"], item.event["organization_id"])].extend(item.contexts)
    for (environment_id, organization_id), entries in by_environment.items():
        await resolve_contexts(session, environment_id, organization_id, entries)


def _check_topics(environment_id: str, recipients: Recipients, existing: set[tuple[str, str]]) -> None:
    accepted = list(zip(recipients.accepted, recipients.accepted_at, strict=True))
    recipients.accepted, recipients.accepted_at = [], []
    for recipient, index in accepted:
        if recipient["type"] == "Topic" and (environment_id, recipient["topicKey"]) not in existing:
            recipients.reject(index, recipient, f"Topic with key {recipient['topicKey']} not found in current environment")
        else:
            recipients.accept(index, recipient)
    recipients.rejected.sort(key=lambda item: item["index"])


@dataclass
class _Accepted:
    """A trigger that will run, once its event row is written."""

    event: dict[str, Any]
    result: TriggerResult
    # The trigger's context as (type, id, data or None); None without one.
    contexts: list[tuple[str, str, dict[str, Any] | None]] | None = None


# How many of the environment's workflows an unknown identifier is compared with.
SUGGESTION_CANDIDATES = 1000


class UnknownWorkflow(UnprocessableError):
    """A trigger names no workflow of its environment: Novu's ``workflow_not_found``.

    The message and ``errors.general`` stay Novu's (SDKs read them); ``errors.name``
    says which identifier was not found and, once :func:`_suggest` has looked, the
    closest existing one.
    """

    def __init__(self, environment_id: str, name: str) -> None:
        super().__init__("workflow_not_found")
        self.environment_id = environment_id
        self.name = name
        self.suggest(None)

    def suggest(self, closest: str | None) -> None:
        shown = self.name if len(self.name) <= 100 else self.name[:100] + "..."
        explanation = f"No workflow with the trigger identifier {shown!r} in this environment"
        explanation += f"; did you mean {closest!r}?" if closest else ""
        self.extra["errors"] = {
            "general": {"messages": ["workflow_not_found"], "value": None},
            "name": {"messages": [explanation], "value": shown},
        }


async def _suggest(session: AsyncSession, unknown: Sequence[UnknownWorkflow]) -> None:
    """Name the closest existing identifier in each error (read only when a trigger failed so)."""
    repository = WorkflowRepository(session)
    known: dict[str, list[str]] = {}
    for error in unknown:
        if error.environment_id not in known:
            known[error.environment_id] = await repository.trigger_identifiers(error.environment_id, SUGGESTION_CANDIDATES)
        closest = difflib.get_close_matches(error.name[:200], known[error.environment_id], n=1, cutoff=0.6)
        error.suggest(closest[0] if closest else None)


def _judge(trigger: Trigger, found: _Lookups) -> TriggerResult | _Accepted:
    """Decide a trigger's fate from what the batch read (spec §4.4); raises on a 422."""
    principal, request = trigger.principal, trigger.request
    workflow = found.workflows.get((principal.environment_id, request.name))
    if workflow is None:
        raise UnknownWorkflow(principal.environment_id, request.name)
    payload = request.payload
    if workflow.payload_schema is not None:
        payload = checked_payload(workflow.payload_schema, payload)
    transaction_id = request.transactionId or new_transaction_id()
    actor = _sealed_channels(trigger.box, normalize_actor(request.actor))
    tenant = normalize_tenant(request.tenant)

    def outcome(status: str, errors: list[str] | None = None) -> TriggerResult:
        return TriggerResult(True, status, transaction_id, errors or [])

    if tenant is not None and (principal.environment_id, tenant["identifier"]) not in found.tenants:
        return outcome("no_tenant_found", [f"Tenant with identifier {tenant['identifier']} not found"])
    blocked = workflow_status(workflow)
    if blocked is not None:
        return outcome(blocked)

    if trigger.broadcast:
        recipients = Recipients()
    else:
        assert isinstance(request, TriggerEventRequest)
        recipients = parse_recipients(request.to)
        if trigger.box is not None:
            recipients.accepted = [_sealed_channels(trigger.box, entry) for entry in recipients.accepted]
            recipients.rejected = [
                {**item, "recipient": _sealed_channels(trigger.box, item["recipient"])} for item in recipients.rejected
            ]
        _check_topics(principal.environment_id, recipients, found.topics)
        if not recipients.accepted:
            return outcome("invalid_recipients", recipients.reasons)

    # Checked before the event is made; stored (and created where missing) with the batch's write.
    contexts = None if request.context is None else parse_context(request.context)
    event_id = new_id()
    now = utcnow()
    event = {
        "id": event_id,
        "environment_id": principal.environment_id,
        "organization_id": principal.organization_id,
        "transaction_id": transaction_id,
        "workflow_id": workflow.id,
        "trigger_identifier": workflow.trigger_identifier,
        "kind": "broadcast" if trigger.broadcast else "trigger",
        "steps": workflow.steps,
        "recipients": recipients.accepted,
        "rejected_recipients": _jsonable(recipients.rejected),
        "payload": payload,
        "overrides": request.overrides,
        "actor": actor,
        "tenant": tenant,
        "context": None if contexts is None else {type_: key for type_, key, _ in contexts},
        "status": "accepted",
        "created_at": now,
    }
    if trigger.trace_context is not None:
        event["trace_context"] = trigger.trace_context  # not a column of events: for its job (event_job)
    # Recipients refused at acceptance are reported to the caller and kept on the event.
    return _Accepted(event, outcome("processed", recipients.reasons), contexts or None)


async def record_triggers(
    session: AsyncSession,
    triggers: Sequence[Trigger],
    *,
    busy: bool = False,
    targets: TriggerTargets | None = None,
    known: Mapping[tuple[str, str], TriggerTarget] | None = None,
) -> list[TriggerResult | Exception]:
    """Validate triggers and record those that will run, in the session (spec §4.4).

    One outcome per trigger, in order: its result, or the 422 it raised. The
    reads are made once for the whole list and the events and their jobs are
    written with one statement each on SQLite, one for both on PostgreSQL
    (``EventRepository.record_many``), so a batch costs a few round trips
    whatever its size. A transactionId already used in the environment (or
    twice in the list) is refused by the unique index, not by a read.
    ``busy``: as many callers as there are triggers wait on this write (see
    ``EventRepository.record_many``). ``targets``: workflows kept from earlier
    batches, used without a read and checked by the write (events/targets.py).
    ``known``: workflows given by (environment, identifier) that are not stored, such
    as one discovered on the trigger's bridge (herald/bridge/stateless.py).
    """
    found = await _lookups(session, triggers, targets, known)
    outcomes: list[TriggerResult | Exception | _Accepted] = []
    for trigger in triggers:
        try:
            outcomes.append(_judge(trigger, found))
        except (UnprocessableError, ValidationFailed, PayloadValidationError) as exc:
            outcomes.append(exc)
    unknown = [outcome for outcome in outcomes if isinstance(outcome, UnknownWorkflow)]
    if unknown:
        await _suggest(session, unknown)
    accepted = [outcome for outcome in outcomes if isinstance(outcome, _Accepted)]
    if any(item.contexts for item in accepted):
        await _store_contexts(session, accepted)
    try:
        written = await EventRepository(session).record_many(
            [item.event for item in accepted], busy=busy, unchanged=found.kept.values()
        )
    except WorkflowsChanged:
        # Nothing was written: judge the batch again on the workflows as they are
        # now. The kept ones it used are read (and kept) afresh, so a second
        # round has fewer to check, and the last has none.
        if targets is not None:
            targets.forget(found.kept)
        return await record_triggers(session, triggers, busy=busy, targets=targets, known=known)
    results: list[TriggerResult | Exception] = []
    for outcome in outcomes:
        if not isinstance(outcome, _Accepted):
            results.append(outcome)
        elif outcome.event["id"] in written:
            results.append(outcome.result)
        else:
            results.append(TriggerResult(True, "error", outcome.result.transaction_id, [DUPLICATE_TRANSACTION]))
    return results


async def record_trigger_batch(
    session: AsyncSession, triggers: Sequence[Trigger], targets: TriggerTargets | None = None
) -> list[TriggerResult | Exception]:
    """:func:`record_triggers` for the trigger route's group commit, outside a transaction on PostgreSQL.

    The batch makes its reads, then one write statement that is atomic by
    itself (``EventRepository.record_many``), so the BEGIN and COMMIT round
    trips around them would add nothing but waiting. With ``targets`` (the
    process's kept workflows, on PostgreSQL) a batch naming known workflows
    makes the write alone. A batch of PRESSURE_REQUESTS triggers or more is as
    many requests waiting on this process: the workers are told to give way
    (queue.BUSY).
    """
    await without_transaction(session)
    return await record_triggers(session, triggers, busy=len(triggers) >= PRESSURE_REQUESTS, targets=targets)


async def trigger_event(
    session: AsyncSession,
    principal: Principal,
    request: TriggerEventRequest | BroadcastEventRequest,
    *,
    broadcast: bool = False,
    box: SecretBox | None = None,
    workflow: TriggerTarget | None = None,
) -> TriggerResult:
    """Validate one trigger and record it in the session's transaction (``workflow``: its target, not stored)."""
    known = None if workflow is None else {(principal.environment_id, request.name): workflow}
    [outcome] = await record_triggers(session, [Trigger(principal, request, broadcast, box)], known=known)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def _sealed_channels(box: SecretBox | None, entry: Any) -> Any:
    """An inline subscriber with the secrets of its channels' credentials (webhookUrl) sealed.

    The event keeps its recipients until the engine has run it, and the
    engine keeps them on the subscriber as they are: sealed here, they are
    never stored in the clear (herald.subscribers.channels).
    """
    if box is None or not isinstance(entry, dict) or not isinstance(entry.get("channels"), list):
        return entry
    channels = [
        {**channel, "credentials": box.seal_credentials(channel["credentials"])}
        if isinstance(channel, dict) and isinstance(channel.get("credentials"), dict)
        else channel
        for channel in entry["channels"]
    ]
    return {**entry, "channels": channels}


def _jsonable(rejected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Refused recipients may be any JSON value; keep them as sent.
    return [dict(item) for item in rejected]


async def trigger_bulk(
    session: AsyncSession, principal: Principal, requests: list[TriggerEventRequest], *, box: SecretBox | None = None
) -> list[TriggerResult]:
    """Each event is judged on its own; one failing does not fail the others (Novu's bulk)."""
    outcomes = await record_triggers(session, [Trigger(principal, request, box=box) for request in requests])
    results = []
    for request, outcome in zip(requests, outcomes, strict=True):
        if isinstance(outcome, ValidationFailed):
            outcome = TriggerResult(True, "error", request.transactionId or new_transaction_id(), [_describe(outcome)])
        elif isinstance(outcome, (UnprocessableError, PayloadValidationError)):
            outcome = TriggerResult(True, "error", request.transactionId or new_transaction_id(), [outcome.message])
        results.append(outcome)
    return results


def _describe(exc: ValidationFailed) -> str:
    errors = exc.extra.get("errors", {})
    return "; ".join(message for entry in errors.values() for message in entry.get("messages", [])) or exc.message


async def cancel_transaction(session: AsyncSession, principal: Principal, transaction_id: str) -> bool:
    """Cancel what still waits in a transaction (delays, digests); False when nothing was pending."""
    return await EventRepository(session).cancel_pending(principal.environment_id, transaction_id) > 0
