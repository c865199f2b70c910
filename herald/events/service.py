"""Trigger use cases: validate, record durably, answer.

A trigger is accepted by writing an ``Event`` row and the ``Job`` that will
expand it in the request's transaction, so an accepted trigger cannot be lost
between the answer and the worker. Delivery is the engine's work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.events.repository import EventRepository
from herald.events.schemas import BroadcastEventRequest, TriggerEventRequest
from herald.kit.auth import Principal
from herald.kit.errors import UnprocessableError, ValidationFailed
from herald.kit.ids import new_id, new_transaction_id
from herald.kit.text import is_valid_identifier
from herald.models import Event, Job, Workflow
from herald.tenants.repository import TenantRepository
from herald.topics.repository import TopicRepository
from herald.workflows.repository import WorkflowRepository

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

    def reject(self, index: int, recipient: Any, reason: str) -> None:
        self.rejected.append({"index": index, "recipient": recipient, "reason": reason})

    @property
    def reasons(self) -> list[str]:
        return [f"to[{item['index']}]: {item['reason']}" for item in self.rejected]


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
                recipients.accepted.append({"type": "Subscriber", "subscriberId": item})
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
            exclude = [value for value in item.get("exclude") or [] if isinstance(value, str)]
            recipients.accepted.append({"type": "Topic", "topicKey": key, "exclude": exclude})
            continue
        subscriber_id = item.get("subscriberId")
        if subscriber_id is None:
            recipients.reject(index, item, "subscriberId under property to is not configured")
        elif not is_valid_identifier(subscriber_id):
            recipients.reject(index, item, f"subscriberId {subscriber_id!r} is not valid: use letters, digits, _ : . - or an email address")
        else:
            entry = {key: item[key] for key in SUBSCRIBER_FIELDS if key in item}
            recipients.accepted.append({"type": "Subscriber", **entry})
    return recipients


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
    return {key: actor[key] for key in SUBSCRIBER_FIELDS if key in actor}


def normalize_tenant(tenant: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if tenant is None:
        return None
    if isinstance(tenant, str):
        tenant = {"identifier": tenant}
    identifier = tenant.get("identifier")
    if not isinstance(identifier, str) or not identifier:
        raise ValidationFailed.field("tenant.identifier", "tenant must be an identifier or an object with an identifier", identifier)
    return {key: tenant[key] for key in ("identifier", "name", "data") if key in tenant}


def workflow_status(workflow: Workflow) -> str | None:
    """Why a workflow cannot run now, as a trigger status; None when it can."""
    if not workflow.active:
        return "trigger_not_active"
    if not workflow.steps:
        return "no_workflow_steps_defined"
    if not any(step.get("active", True) for step in workflow.steps):
        return "no_workflow_active_steps_defined"
    return None


async def _find_workflow(session: AsyncSession, principal: Principal, name: str) -> Workflow:
    workflow = await WorkflowRepository(session).get_by_trigger_identifier(principal.environment_id, name)
    if workflow is None:
        raise UnprocessableError("workflow_not_found")
    return workflow


async def _check_topics(session: AsyncSession, principal: Principal, recipients: Recipients) -> None:
    keys = [r["topicKey"] for r in recipients.accepted if r["type"] == "Topic"]
    if not keys:
        return
    existing = await TopicRepository(session).keys_that_exist(principal.environment_id, keys)
    kept = []
    for recipient in recipients.accepted:
        if recipient["type"] == "Topic" and recipient["topicKey"] not in existing:
            recipients.rejected.append(
                {
                    "index": None,
                    "recipient": recipient,
                    "reason": f"Topic with key {recipient['topicKey']} not found in current environment",
                }
            )
        else:
            kept.append(recipient)
    recipients.accepted = kept


async def trigger_event(
    session: AsyncSession,
    principal: Principal,
    request: TriggerEventRequest | BroadcastEventRequest,
    *,
    broadcast: bool = False,
) -> TriggerResult:
    """Validate a trigger and record it for the engine (spec §4.4)."""
    workflow = await _find_workflow(session, principal, request.name)
    transaction_id = request.transactionId or new_transaction_id()
    actor = normalize_actor(request.actor)
    tenant = normalize_tenant(request.tenant)

    def outcome(status: str, errors: list[str] | None = None) -> TriggerResult:
        return TriggerResult(True, status, transaction_id, errors or [])

    if tenant is not None:
        if await TenantRepository(session).get_by_identifier(principal.environment_id, tenant["identifier"]) is None:
            return outcome("no_tenant_found", [f"Tenant with identifier {tenant['identifier']} not found"])
    blocked = workflow_status(workflow)
    if blocked is not None:
        return outcome(blocked)

    if broadcast:
        recipients = Recipients()
    else:
        assert isinstance(request, TriggerEventRequest)
        recipients = parse_recipients(request.to)
        await _check_topics(session, principal, recipients)
        if not recipients.accepted:
            return outcome("invalid_recipients", recipients.reasons)

    event = Event(
        id=new_id(),
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        transaction_id=transaction_id,
        workflow_id=workflow.id,
        trigger_identifier=workflow.trigger_identifier,
        kind="broadcast" if broadcast else "trigger",
        steps=workflow.steps,
        recipients=recipients.accepted,
        rejected_recipients=_jsonable(recipients.rejected),
        payload=request.payload,
        overrides=request.overrides,
        actor=actor,
        tenant=tenant,
        context=request.context,
    )
    job = Job(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        kind="event",
        status="queued",
        event_id=event.id,
        transaction_id=transaction_id,
        workflow_id=workflow.id,
    )
    if not await EventRepository(session).record(event, job):
        return outcome("error", [DUPLICATE_TRANSACTION])
    # Recipients refused at acceptance are reported to the caller and kept on the event.
    return outcome("processed", recipients.reasons)


def _jsonable(rejected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Refused recipients may be any JSON value; keep them as sent.
    return [dict(item) for item in rejected]


async def trigger_bulk(
    session: AsyncSession, principal: Principal, requests: list[TriggerEventRequest]
) -> list[TriggerResult]:
    """Each event is judged on its own; one failing does not fail the others (Novu's bulk)."""
    results = []
    for request in requests:
        try:
            results.append(await trigger_event(session, principal, request))
        except (UnprocessableError, ValidationFailed) as exc:
            detail = exc.message if not isinstance(exc, ValidationFailed) else _describe(exc)
            results.append(TriggerResult(True, "error", request.transactionId or new_transaction_id(), [detail]))
    return results


def _describe(exc: ValidationFailed) -> str:
    errors = exc.extra.get("errors", {})
    return "; ".join(message for entry in errors.values() for message in entry.get("messages", [])) or exc.message


async def cancel_transaction(session: AsyncSession, principal: Principal, transaction_id: str) -> bool:
    """Cancel what still waits in a transaction (delays, digests); False when nothing was pending."""
    return await EventRepository(session).cancel_pending(principal.environment_id, transaction_id) > 0
