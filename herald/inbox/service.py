"""Inbox use cases: Novu's ``/v1/inbox`` as @novu/js 3.19 calls it.

A session names an environment by its public identifier and a subscriber by
its id; when the environment's in-app integration has ``credentials.hmac``
on, it must also prove the subscriber: ``subscriberHash`` is the hex
HMAC-SHA256 of the subscriberId keyed by one of the environment's API keys, as
the application's backend computes it for Novu. A session creates a subscriber
it does not know with the fields it sends, but changes an existing one only
when it proves it (a valid hash, whether HMAC is required or not), as Novu
does. The answer carries a subscriber token (herald.kit.auth) that every
other route takes.

State follows @novu/js (what its optimistic updates assume): reading a
notification also marks it seen and takes it out of the archive; archiving
also reads it; unarchiving leaves it read. Read and seen are the very flags
the v1 feed and mark-as routes read and write (herald/messages). A snoozed
notification is out of the lists that ask for ``snoozed=false`` until its
time, then back by itself: a job of the engine's queue, written with the
snooze, delivers it again then (herald.inbox.snooze); tags and severity are
its workflow's.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from hashlib import sha256
from typing import Any

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession

from herald.inbox import snooze as snooze_jobs
from herald.inbox.repository import InboxFilter, InboxRepository, SessionRepository
from herald.inbox.schemas import SEVERITIES, SessionRequest
from herald.kit.auth import Principal, SubscriberPrincipal
from herald.kit.crypto import SecretBox, SecretKeyMismatch
from herald.kit.errors import BadRequestError, NotFoundError, ValidationFailed
from herald.kit.query import json_text
from herald.kit.time import isoformat, parse_iso, utcnow
from herald.models import Message, Subscriber, Workflow
from herald.organizations.service import IN_APP_PROVIDER_ID
from herald.realtime.signals import COUNTS, Change, announce
from herald.webhooks.events import STATE_EVENTS, emit_for_messages

logger = logging.getLogger("herald.inbox")

# Novu's limit for a snooze on its paid tiers: 90 days.
MAX_SNOOZE_DURATION_HOURS = 90 * 24
MAX_LIMIT = 100
DEFAULT_LIMIT = 10
# createdGte and createdLte: milliseconds since the epoch, within the dates the stores keep (years 1 to 9999).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_MILLIS = -62_135_596_800_000
MAX_MILLIS = 253_402_300_799_999
MILLIS_MEANING = "a time in milliseconds since the epoch"

INVALID_APPLICATION = "Please provide a valid application identifier"
NO_IN_APP_INTEGRATION = "The active in-app integration could not be found"
INVALID_HMAC = "Please provide a valid HMAC hash"


# -- session ----------------------------------------------------------------------------------


@dataclass
class SessionResult:
    principal: SubscriberPrincipal
    application_identifier: str
    development: bool
    unread: dict[str, int]  # by severity


def subscriber_hash(api_key: str, subscriber_id: str) -> str:
    """What a backend sends as ``subscriberHash``: hex HMAC-SHA256 of the subscriberId keyed by the API key."""
    return hmac.new(api_key.encode(), subscriber_id.encode(), sha256).hexdigest()


def _hmac_required(credentials: Mapping[str, Any] | None) -> bool:
    value = (credentials or {}).get("hmac")
    return value is True or (isinstance(value, str) and value.lower() == "true")


async def _hash_is_valid(repository: SessionRepository, box: SecretBox, environment_id: str, subscriber_id: str, given: str | None) -> bool:
    """Whether ``given`` is the subscriber's hash under one of the environment's live, sealed API keys."""
    if not given:
        return False
    sealed_keys = await repository.sealed_api_keys(environment_id)
    if not sealed_keys:
        logger.warning(
            "inbox session: a subscriberHash cannot be checked for environment %s: none of its API keys "
            "is kept sealed (keys made before Herald kept them); make a new key with `herald keys create`",
            environment_id,
        )
    valid = False
    for sealed in sealed_keys:
        try:
            key = box.open(sealed)
        except SecretKeyMismatch:
            continue
        valid |= hmac.compare_digest(subscriber_hash(key, subscriber_id), given.strip().lower())
    return valid


async def start_session(
    session: AsyncSession, box: SecretBox, request: SessionRequest, admit: Callable[[str], None] | None = None
) -> SessionResult:
    """Start an inbox session; ``admit(application_identifier)`` raises when the caller may start no more.

    The rate limit is asked first, by the application identifier (which names
    one environment): a flood of sessions is refused before it costs a query.
    """
    from herald.subscribers.schemas import CreateSubscriberRequest
    from herald.subscribers.service import upsert_subscriber

    repository = SessionRepository(session)
    identifier = (request.applicationIdentifier or "").strip()
    if admit is not None and identifier:
        admit(identifier)
    environment = await repository.environment_by_identifier(identifier) if identifier else None
    if environment is None:
        raise BadRequestError(INVALID_APPLICATION)
    integration = await repository.active_in_app_integration(environment.id, IN_APP_PROVIDER_ID)
    if integration is None:
        raise NotFoundError(NO_IN_APP_INTEGRATION)
    given = request.subscriber
    subscriber_id = (given.subscriberId if given is not None and given.subscriberId else request.subscriberId) or ""
    if not subscriber_id:
        raise ValidationFailed.field("subscriberId", "subscriberId or subscriber.subscriberId is required", None)
    verified = await _hash_is_valid(repository, box, environment.id, subscriber_id, request.subscriberHash)
    if _hmac_required(integration.credentials) and not verified:
        raise BadRequestError(INVALID_HMAC)
    fields = given.model_dump(exclude_unset=True) if given is not None else {}
    fields["subscriberId"] = subscriber_id
    try:
        upsert = CreateSubscriberRequest.model_validate(fields)
    except ValueError as exc:
        raise ValidationFailed.field("subscriber", str(exc).splitlines()[0], None) from None
    # As Novu: a page creates its subscriber, but changes an existing one only with a valid subscriberHash
    # (without it, anyone knowing a subscriberId could rewrite that subscriber's email).
    subscriber = await repository.subscriber(environment.id, subscriber_id)
    if subscriber is None or verified:
        caller = Principal(environment.id, environment.organization_id, api_key_id="inbox")
        subscriber = await upsert_subscriber(session, caller, upsert, box=box)
    principal = SubscriberPrincipal(
        environment_id=environment.id,
        organization_id=environment.organization_id,
        subscriber_id=subscriber.id,
        external_subscriber_id=subscriber.subscriber_id,
    )
    unread = await unread_by_severity(session, principal)
    return SessionResult(principal, environment.identifier, environment.name.lower() != "production", unread)


async def unread_by_severity(session: AsyncSession, principal: SubscriberPrincipal) -> dict[str, int]:
    """Unread, unarchived, unsnoozed notifications by their workflow's severity."""
    repository = _repository(session, principal)
    counts = await repository.count_by_workflow(InboxFilter(read=False, archived=False, snoozed=False), utcnow())
    severities = {row.id: row.severity or "none" for row in await repository.workflows([w for w in counts if w])}
    result = dict.fromkeys(SEVERITIES, 0)
    for workflow_id, count in counts.items():
        result[severities.get(workflow_id or "", "none")] += count
    return result


async def subscriber_principal(session: AsyncSession, principal: Principal, subscriber_id: str) -> SubscriberPrincipal:
    """The inbox of a subscriber named by an API-key caller (/v2/subscribers/{subscriberId}/notifications).

    Those routes and the subscriber-token ones then run the same use cases below on the same rows; a
    subscriberId the caller's environment does not hold answers Novu's 404.
    """
    from herald.subscribers.service import require_subscriber

    subscriber = await require_subscriber(session, principal, subscriber_id)
    return SubscriberPrincipal(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        subscriber_id=subscriber.id,
        external_subscriber_id=subscriber.subscriber_id,
    )


# -- filters ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilterInput:
    """A filter as the client gives it, before tags and severity become workflow ids."""

    read: bool | None = None
    seen: bool | None = None
    archived: bool | None = None
    snoozed: bool | None = None
    # AND of OR groups.
    tag_groups: tuple[tuple[str, ...], ...] | None = None
    severities: tuple[str, ...] | None = None
    data: dict[str, Any] | None = None
    created_gte: float | None = None
    created_lte: float | None = None


def tag_groups(tags: Any) -> tuple[tuple[str, ...], ...] | None:
    """``["a", "b"]`` or ``{"or": [...]}`` (one OR group), ``{"and": [{"or": [...]}, ...]}`` (all groups)."""
    if tags is None:
        return None
    if isinstance(tags, str):
        tags = [tags]
    if isinstance(tags, list):
        return (tuple(str(tag) for tag in tags),) if tags else None
    if isinstance(tags, dict) and isinstance(tags.get("or"), list):
        return (tuple(str(tag) for tag in tags["or"]),) if tags["or"] else None
    if isinstance(tags, dict) and isinstance(tags.get("and"), list):
        groups = tuple(
            tuple(str(tag) for tag in group.get("or", [])) for group in tags["and"] if isinstance(group, dict)
        )
        return tuple(group for group in groups if group) or None
    raise ValidationFailed.field("tags", "tags must be a list of tags, {or: [...]} or {and: [{or: [...]}]}", tags)


def severities(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    values = value if isinstance(value, list) else [value]
    for item in values:
        if item not in SEVERITIES:
            raise ValidationFailed.field("severity", f"severity must be one of {', '.join(SEVERITIES)}", item)
    return tuple(values) or None


# Bounds of one ``data`` filter. Novu's server takes at most 2 levels of keys, 256-character strings and
# 200 values; within these, every filter Novu's server takes is taken, and the store's work is bounded.
MAX_DATA_DEPTH = 6  # levels of objects and lists, the filter itself the first: {a: {b: {and: [{or: [1]}]}}}
MAX_DATA_TERMS = 256  # its keys and values together
MAX_DATA_TEXT = 256  # characters of a key or a string value
MAX_DATA_NUMBER = 2**53  # magnitude of a number: what a JavaScript client sends exactly, and the stores compare alike


def parse_data(value: Any, field: str = "data") -> dict[str, Any] | None:
    """The ``data`` filter: an object, or its JSON text (how @novu/js sends it), within the bounds above."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = json_text(field, value)
    if not isinstance(value, dict):
        raise ValidationFailed.field(field, "data must be a JSON object", value)
    check_data_bounds(value, field)
    return value or None


def check_data_bounds(data: dict[str, Any], field: str = "data") -> None:
    """A 422 naming the bound ``data`` passes, if any (a body's ``data`` comes read but bounded only in depth)."""
    terms = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)) and depth > MAX_DATA_DEPTH:
            raise ValidationFailed.field(field, f"{field} nests more than {MAX_DATA_DEPTH} levels of objects and lists")
        terms += len(item) if isinstance(item, dict) else 0 if isinstance(item, list) else 1
        if terms > MAX_DATA_TERMS:
            raise ValidationFailed.field(field, f"{field} has more than {MAX_DATA_TERMS} keys and values")
        if isinstance(item, dict):
            if any(len(key) > MAX_DATA_TEXT for key in item):
                raise ValidationFailed.field(field, f"a key of {field} is longer than {MAX_DATA_TEXT} characters")
            stack.extend((member, depth + 1) for member in item.values())
        elif isinstance(item, list):
            stack.extend((member, depth + 1) for member in item)
        elif isinstance(item, str) and len(item) > MAX_DATA_TEXT:
            raise ValidationFailed.field(field, f"a value of {field} is longer than {MAX_DATA_TEXT} characters")
        elif isinstance(item, (int, float)) and not isinstance(item, bool) and not abs(item) <= MAX_DATA_NUMBER:
            raise ValidationFailed.field(field, f"a number of {field} is not finite or past ±{MAX_DATA_NUMBER}", item)


def filter_from_json(value: Any) -> FilterInput:
    """One filter of the count route's ``filters`` list."""
    if not isinstance(value, dict):
        raise ValidationFailed.field("filters", "each filter must be an object", value)

    def flag(name: str) -> bool | None:
        raw = value.get(name)
        if raw is None or isinstance(raw, bool):
            return raw
        raise ValidationFailed.field(f"filters.{name}", f"{name} must be a boolean", raw)

    def number(name: str) -> float | None:
        raw = value.get(name)
        if raw is None or (isinstance(raw, (int, float)) and not isinstance(raw, bool) and MIN_MILLIS <= raw <= MAX_MILLIS):
            return raw
        raise ValidationFailed.field(f"filters.{name}", f"{name} must be {MILLIS_MEANING} from {MIN_MILLIS} to {MAX_MILLIS}", raw)

    return FilterInput(
        read=flag("read"),
        seen=flag("seen"),
        archived=flag("archived"),
        snoozed=flag("snoozed"),
        tag_groups=tag_groups(value.get("tags")),
        severities=severities(value.get("severity")),
        data=parse_data(value.get("data"), "filters.data"),
        created_gte=number("createdGte"),
        created_lte=number("createdLte"),
    )


def _from_millis(value: float | None) -> datetime | None:
    return None if value is None else EPOCH + timedelta(milliseconds=value)


def _workflow_ids(workflows: Sequence[Workflow], given: FilterInput) -> frozenset[str] | None:
    if given.tag_groups is None and given.severities is None:
        return None
    chosen = set()
    for workflow in workflows:
        tags = set(workflow.tags or [])
        if given.tag_groups is not None and not all(tags.intersection(group) for group in given.tag_groups):
            continue
        if given.severities is not None and (workflow.severity or "none") not in given.severities:
            continue
        chosen.add(workflow.id)
    return frozenset(chosen)


def _supported(given: FilterInput) -> FilterInput:
    # Novu refuses it: archiving reads a notification, so an unread archived one is not a state the inbox makes.
    if given.read is False and given.archived is True:
        raise BadRequestError("Filtering for unread and archived notifications is not supported.")
    return given


async def _resolve(
    repository: InboxRepository,
    given: FilterInput,
    ids: Sequence[str] | None = None,
    workflows: Sequence[Workflow] | None = None,
) -> InboxFilter:
    workflow_ids = None
    if given.tag_groups is not None or given.severities is not None:
        workflow_ids = _workflow_ids(workflows if workflows is not None else await repository.workflows(), given)
    return InboxFilter(
        read=given.read,
        seen=given.seen,
        archived=given.archived,
        snoozed=given.snoozed,
        workflow_ids=workflow_ids,
        data=given.data,
        created_gte=_from_millis(given.created_gte),
        created_lte=_from_millis(given.created_lte),
        ids=ids,
    )


def _repository(session: AsyncSession, principal: SubscriberPrincipal) -> InboxRepository:
    return InboxRepository(session, principal.environment_id, principal.subscriber_id)


async def _counts_changed(session: AsyncSession, principal: SubscriberPrincipal) -> None:
    """The subscriber's sockets are sent their counts again once this commits (herald/realtime)."""
    await announce(session, [Change(principal.environment_id, principal.subscriber_id, COUNTS)])


# -- reads ------------------------------------------------------------------------------------


@dataclass
class NotificationView:
    """A message with what its answer shows besides: its workflow and subscriber, and the time it was read at."""

    message: Message
    workflow: Workflow | None
    subscriber: Subscriber | None
    now: datetime


async def _views(repository: InboxRepository, messages: Sequence[Message]) -> list[NotificationView]:
    workflows = {row.id: row for row in await repository.workflows([m.workflow_id for m in messages if m.workflow_id])}
    subscriber = await repository.subscriber()
    now = utcnow()
    return [NotificationView(m, workflows.get(m.workflow_id or ""), subscriber, now) for m in messages]


async def list_notifications(
    session: AsyncSession,
    principal: SubscriberPrincipal,
    given: FilterInput,
    *,
    after: str | None,
    offset: int,
    limit: int,
) -> tuple[list[NotificationView], bool]:
    repository = _repository(session, principal)
    cursor = None
    if after:
        cursor = await repository.get(after)
        if cursor is None:
            raise BadRequestError(f"Notification with id {after} not found: after must be a notification of the list")
    messages, more = await repository.page(
        await _resolve(repository, _supported(given)), utcnow(), after=cursor, offset=offset, limit=limit
    )
    return await _views(repository, messages), more


async def count_notifications(session: AsyncSession, principal: SubscriberPrincipal, filters: Sequence[FilterInput]) -> list[int]:
    repository = _repository(session, principal)
    supported = [_supported(given) for given in filters]
    needs_workflows = any(given.tag_groups is not None or given.severities is not None for given in supported)
    workflows = await repository.workflows() if needs_workflows else []
    resolved = [await _resolve(repository, given, workflows=workflows) for given in supported]
    return await repository.counts(resolved, utcnow())


# -- one notification -------------------------------------------------------------------------


async def _require(repository: InboxRepository, notification_id: str) -> Message:
    message = await repository.get(notification_id)
    if message is None:
        raise NotFoundError(f"Notification with id: {notification_id} is not found.")
    return message


def _seen_values(now: datetime) -> dict[str, Any]:
    return {"seen": True, "last_seen_date": now, "first_seen_date": func.coalesce(Message.first_seen_date, now)}


def _state_values(action: str, now: datetime) -> dict[str, Any]:
    """The columns each action sets (Novu's inbox, as @novu/js's optimistic updates expect)."""
    read = {"read": True, "last_read_date": now, **_seen_values(now)}
    values: dict[str, Any] = {
        "read": {**read, "archived": False, "archived_at": None},
        "unread": {"read": False, "archived": False, "archived_at": None},
        "archive": {**read, "archived": True, "archived_at": now},
        "unarchive": {**read, "archived": False, "archived_at": None},
        "seen": _seen_values(now),
    }[action]
    return {**values, "updated_at": now}


async def _view(repository: InboxRepository, notification_id: str) -> NotificationView:
    return (await _views(repository, [await _require(repository, notification_id)]))[0]


async def change_state(session: AsyncSession, principal: SubscriberPrincipal, notification_id: str, action: str) -> NotificationView:
    """read, unread, archive or unarchive one notification; the notification as it now is."""
    repository = _repository(session, principal)
    await _require(repository, notification_id)
    await repository.update([notification_id], _state_values(action, utcnow()))
    await _counts_changed(session, principal)
    if action in STATE_EVENTS:
        await emit_for_messages(session, principal.environment_id, STATE_EVENTS[action], [notification_id])
    return await _view(repository, notification_id)


async def snooze(session: AsyncSession, principal: SubscriberPrincipal, notification_id: str, snooze_until: str) -> NotificationView:
    repository = _repository(session, principal)
    await _require(repository, notification_id)
    try:
        until = parse_iso(snooze_until)
    except ValueError:
        raise ValidationFailed.field("snoozeUntil", "snoozeUntil must be an ISO 8601 date-time", snooze_until) from None
    now = utcnow()
    if until <= now:
        raise BadRequestError("Snooze time must be in the future")
    if until - now > timedelta(hours=MAX_SNOOZE_DURATION_HOURS):
        raise BadRequestError(f"Snooze time must be at most {MAX_SNOOZE_DURATION_HOURS} hours from now")
    # Snoozing is looking at it: seen too, as in Novu.
    await repository.update([notification_id], {"snoozed_until": until, **_seen_values(now), "updated_at": now})
    # Back by itself at that time, delivered again (herald.inbox.snooze), whatever restarts meanwhile.
    view = await _view(repository, notification_id)
    await snooze_jobs.schedule_return(repository, view.message, view.message.snoozed_until or until)
    await _counts_changed(session, principal)
    await emit_for_messages(session, principal.environment_id, "message.seen", [notification_id])
    return view


async def unsnooze(session: AsyncSession, principal: SubscriberPrincipal, notification_id: str) -> NotificationView:
    """Back in the inbox now: no snooze, delivered again (a new deliveredAt)."""
    repository = _repository(session, principal)
    message = await _require(repository, notification_id)
    now = utcnow()
    if message.snoozed_until is not None:
        await snooze_jobs.cancel_return(repository, message)
        delivered = [*(message.delivered_at or []), isoformat(now)]
        await repository.update([notification_id], {"snoozed_until": None, "delivered_at": delivered, "updated_at": now})
        await _counts_changed(session, principal)
    return await _view(repository, notification_id)


async def set_action(
    session: AsyncSession, principal: SubscriberPrincipal, notification_id: str, action_type: str, *, done: bool
) -> NotificationView:
    """Complete (``done``) or revert a notification's primary or secondary action.

    Kept where the v1 action route keeps it (``cta.action.status`` and
    ``cta.action.result.type``), so both APIs see one state.
    """
    repository = _repository(session, principal)
    message = await _require(repository, notification_id)
    cta = json.loads(json.dumps(message.cta or {}))
    action = cta.get("action") if isinstance(cta.get("action"), dict) else {}
    result = action.get("result") if isinstance(action.get("result"), dict) else {}
    result["type"] = action_type
    action["status"] = "done" if done else "pending"
    action["result"] = result
    cta["action"] = action
    await repository.update([notification_id], {"cta": cta, "updated_at": utcnow()})
    return await _view(repository, notification_id)


async def delete_notification(session: AsyncSession, principal: SubscriberPrincipal, notification_id: str) -> None:
    repository = _repository(session, principal)
    await _require(repository, notification_id)
    await repository.delete([notification_id])
    await _counts_changed(session, principal)


# -- bulk -------------------------------------------------------------------------------------


async def bulk(
    session: AsyncSession,
    principal: SubscriberPrincipal,
    action: str,
    *,
    tags: Any,
    data: Any,
    notification_ids: Sequence[str] | None,
) -> int:
    """read, archive, read-archive, delete or seen, over the notifications the body names; how many."""
    repository = _repository(session, principal)
    given = FilterInput(tag_groups=tag_groups(tags), data=parse_data(data))
    scope = {
        # What each action can change: read-archive archives the read ones; snoozed ones are included, as in Novu.
        "read": {"read": False, "archived": False},
        "archive": {"archived": False},
        "read-archive": {"read": True, "archived": False},
        "delete": {},
        "seen": {"seen": False},
    }[action]
    resolved = await _resolve(repository, FilterInput(**{**given.__dict__, **scope}), ids=notification_ids)
    ids = await repository.ids_matching(resolved, utcnow())
    if action == "delete":
        changed = await repository.delete(ids)
    else:
        state = {"read": "read", "archive": "archive", "read-archive": "archive", "seen": "seen"}[action]
        changed = await repository.update(ids, _state_values(state, utcnow()))
        if changed and state in STATE_EVENTS:
            await emit_for_messages(session, principal.environment_id, STATE_EVENTS[state], ids)
    if changed:
        await _counts_changed(session, principal)
    return changed


# -- answers ----------------------------------------------------------------------------------


def _redirect(url: Any, target: Any) -> dict[str, Any] | None:
    if not isinstance(url, str) or not url:
        return None
    return {"url": url, "target": target} if isinstance(target, str) and target else {"url": url}


def _action(cta: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    action = cta.get("action") if isinstance(cta.get("action"), Mapping) else {}
    buttons = action.get("buttons") if isinstance(action.get("buttons"), list) else []
    button = next((b for b in buttons if isinstance(b, Mapping) and b.get("type") == kind), None)
    if button is None:
        return None
    result = action.get("result") if isinstance(action.get("result"), Mapping) else {}
    completed = action.get("status") == "done" and result.get("type") == kind
    answer: dict[str, Any] = {"label": str(button.get("content") or ""), "isCompleted": completed}
    redirect = _redirect(button.get("url"), button.get("target"))
    if redirect is not None:
        answer["redirect"] = redirect
    return answer


def to_inbox_notification(view: NotificationView) -> dict[str, Any]:
    """The InboxNotification @novu/js reads."""
    message, workflow, subscriber = view.message, view.workflow, view.subscriber
    cta = message.cta or {}
    data = cta.get("data") if isinstance(cta.get("data"), Mapping) else {}
    snoozed = message.snoozed_until is not None and message.snoozed_until > view.now
    first_seen = message.first_seen_date or (message.last_seen_date if message.seen else None)
    severity = (workflow.severity if workflow is not None else None) or "none"
    answer: dict[str, Any] = {
        "id": message.id,
        "transactionId": message.transaction_id,
        "subject": message.subject or message.title,
        "body": message.content if isinstance(message.content, str) else "",
        "to": {
            "id": message.subscriber_id,
            "subscriberId": subscriber.subscriber_id if subscriber is not None else "",
            "firstName": subscriber.first_name if subscriber is not None else None,
            "lastName": subscriber.last_name if subscriber is not None else None,
            "avatar": subscriber.avatar if subscriber is not None else None,
        },
        "isRead": message.read,
        "isSeen": message.seen,
        "isArchived": message.archived,
        "isSnoozed": snoozed,
        "snoozedUntil": isoformat(message.snoozed_until) if snoozed else None,
        "deliveredAt": [str(item) for item in message.delivered_at or []],
        "createdAt": isoformat(message.created_at),
        "readAt": isoformat(message.last_read_date) if message.read else None,
        "firstSeenAt": isoformat(first_seen),
        "archivedAt": isoformat(message.archived_at) if message.archived else None,
        "avatar": message.avatar,
        "primaryAction": _action(cta, "primary"),
        "secondaryAction": _action(cta, "secondary"),
        "channelType": "in_app",
        "tags": list(workflow.tags or []) if workflow is not None else [],
        "redirect": _redirect(data.get("url"), data.get("target")),
        "data": message.data or {},
        "severity": severity,
    }
    if workflow is not None:
        answer["workflow"] = {
            "id": workflow.id,
            "identifier": workflow.trigger_identifier,
            "name": workflow.name,
            "critical": workflow.critical,
            "tags": list(workflow.tags or []),
            "severity": severity,
        }
    return answer
