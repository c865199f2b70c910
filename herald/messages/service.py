"""Message and inbox use cases.

Seen and read follow spec §3: ``read`` also marks the message seen (as Novu
does); ``unread`` clears only the read flag and ``unseen`` only the seen flag,
leaving the other flag and the last-seen/last-read dates as they were (the
dates record when the message was last seen or read).
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit import query
from herald.kit.auth import Principal
from herald.kit.crypto import MASK, mask_secret
from herald.kit.errors import NotFoundError, ValidationFailed
from herald.kit.schemas import compact
from herald.kit.time import isoformat, utcnow
from herald.messages.repository import FeedFilter, MessageRepository
from herald.messages.schemas import MarkAs
from herald.messages.schemas import Message as MessageSchema
from herald.models import Message, Subscriber
from herald.realtime.signals import COUNTS, Change, announce
from herald.subscribers.repository import SubscriberRepository
from herald.webhooks.events import STATE_EVENTS, emit_for_messages


def _masked(webhook_url: str | None) -> str | None:
    """A chat message's webhook address, masked: the engine records the mask; rows written before it, the address."""
    if webhook_url is None or MASK in webhook_url:
        return webhook_url
    return mask_secret(webhook_url)


def to_schema(message: Message) -> MessageSchema:
    return MessageSchema.model_validate(
        compact({
            "_id": message.id,
            "_templateId": message.workflow_id,
            "_environmentId": message.environment_id,
            "_messageTemplateId": message.message_template_id,
            "_organizationId": message.organization_id,
            "_notificationId": message.notification_id,
            "_subscriberId": message.subscriber_id,
            "templateIdentifier": message.template_identifier,
            "createdAt": isoformat(message.created_at),
            "deliveredAt": message.delivered_at,
            "lastSeenDate": isoformat(message.last_seen_date),
            "lastReadDate": isoformat(message.last_read_date),
            "content": message.content,
            "transactionId": message.transaction_id,
            "subject": message.subject,
            "channel": message.channel,
            "read": message.read,
            "seen": message.seen,
            "archived": message.archived,
            "snoozedUntil": isoformat(message.snoozed_until),
            "email": message.email,
            "phone": message.phone,
            "directWebhookUrl": _masked(message.direct_webhook_url),
            "providerId": message.provider_id,
            "deviceTokens": message.device_tokens,
            "title": message.title,
            "cta": message.cta or {},
            "_feedId": message.feed_id,
            "_jobId": message.job_id,
            "status": message.status,
            "errorId": message.error_id,
            "errorText": message.error_text,
            "payload": message.payload,
            "overrides": message.overrides,
            "contextKeys": message.context_keys,
            "updatedAt": isoformat(message.updated_at),
            "deliveryStatus": message.delivery_status,
            "deliveryStatusAt": isoformat(message.delivery_status_at),
        })
    )


def _flags(mark_as: MarkAs) -> dict[str, bool]:
    return {
        "read": {"read": True, "seen": True},
        "unread": {"read": False},
        "seen": {"seen": True},
        "unseen": {"seen": False},
    }[mark_as]


def _stamps(mark_as: MarkAs, now: datetime) -> dict[str, Any]:
    # first_seen_date is the inbox's firstSeenAt (herald/inbox): set once, by whichever API sees it first.
    first_seen = func.coalesce(Message.first_seen_date, now)
    if mark_as == "read":
        return {"last_read_date": now, "last_seen_date": now, "first_seen_date": first_seen, "updated_at": now}
    if mark_as == "seen":
        return {"last_seen_date": now, "first_seen_date": first_seen, "updated_at": now}
    return {"updated_at": now}


async def _subscriber(session: AsyncSession, principal: Principal, subscriber_id: str, message: str) -> Subscriber:
    subscriber = await SubscriberRepository(session).get_by_subscriber_id(principal.environment_id, subscriber_id)
    if subscriber is None or subscriber.deleted:
        raise NotFoundError(message)
    return subscriber


async def mark_messages_as(
    session: AsyncSession, principal: Principal, subscriber_id: str, message_ids: Sequence[str], mark_as: MarkAs
) -> list[Message]:
    """Change the state of some of a subscriber's in-app messages (spec §4.3).

    Ids that are not this subscriber's in-app messages in this environment are
    ignored. The answer lists the changed messages in the order their ids
    were given.
    """
    subscriber = await _subscriber(session, principal, subscriber_id, f"Subscriber {subscriber_id} not found")
    now = utcnow()
    changed = await MessageRepository(session).set_state(
        principal.environment_id, subscriber.id, message_ids, {**_flags(mark_as), **_stamps(mark_as, now)}
    )
    if changed:
        await _counts_changed(session, principal.environment_id, subscriber.id)
        if mark_as in STATE_EVENTS:
            await emit_for_messages(session, principal.environment_id, STATE_EVENTS[mark_as], [m.id for m in changed])
    return changed


async def _counts_changed(session: AsyncSession, environment_id: str, subscriber_id: str) -> None:
    """The subscriber's Inbox sockets are sent their counts again once this commits (herald/realtime)."""
    await announce(session, [Change(environment_id, subscriber_id, COUNTS)])


def _does_not_exist(subscriber_id: str, principal: Principal) -> str:
    """Novu's wording for an unknown subscriber on the mark-all and unseen routes."""
    return (
        f"Subscriber {subscriber_id} does not exist in environment {principal.environment_id}, "
        "please provide a valid subscriber identifier"
    )


async def mark_all_messages_as(
    session: AsyncSession,
    principal: Principal,
    subscriber_id: str,
    mark_as: MarkAs,
    feed_ids: Sequence[str] | None,
) -> int:
    """Change the state of all the subscriber's in-app messages; the number actually changed."""
    subscriber = await _subscriber(
        session,
        principal,
        subscriber_id,
        _does_not_exist(subscriber_id, principal),
    )
    now = utcnow()
    changed = await MessageRepository(session).set_flags_of_all(
        principal.environment_id, subscriber.id, _flags(mark_as), _stamps(mark_as, now), feed_ids=feed_ids
    )
    if changed:
        await _counts_changed(session, principal.environment_id, subscriber.id)
    return changed


async def record_action(
    session: AsyncSession,
    principal: Principal,
    subscriber_id: str,
    message_id: str,
    button_type: str,
    status: str,
    payload: dict[str, Any] | None,
) -> Message:
    """Record the outcome of a CTA button: ``cta.action.status`` and ``cta.action.result``."""
    subscriber = await _subscriber(session, principal, subscriber_id, f"Subscriber {subscriber_id} not found")
    repository = MessageRepository(session)
    message = await repository.get_for_subscriber(principal.environment_id, subscriber.id, message_id, for_update=True)
    if message is None:
        raise NotFoundError(f"Message {message_id} not found")
    cta = copy.deepcopy(message.cta or {})
    action = cta.get("action") if isinstance(cta.get("action"), dict) else {}
    result = action.get("result") if isinstance(action.get("result"), dict) else {}
    result["type"] = button_type
    if payload is not None:
        result["payload"] = payload
    action["status"] = status
    action["result"] = result
    cta["action"] = action
    return await repository.update_cta(message, cta, utcnow())


def decode_payload_filter(encoded: str | None) -> dict[str, Any] | None:
    """The feed's ``payload`` query: base64 of a JSON object (``btoa(JSON.stringify({...}))``), read as any JSON
    of the query is (herald.kit.query: bounded, no NUL or lone surrogate, finite numbers)."""
    if encoded is None:
        return None
    # Accept the url-safe alphabet, missing padding, and a "+" that an
    # unencoded query string turned into a space.
    normalized = encoded.strip().replace(" ", "+").replace("-", "+").replace("_", "/")
    try:
        text: str | None = base64.b64decode(normalized + "=" * (-len(normalized) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = None
    value = query.json_text("payload", text) if text is not None else None
    if not isinstance(value, dict):
        raise ValidationFailed.field(
            "payload", "payload must be a base64-encoded JSON object, e.g. btoa(JSON.stringify({foo: 1}))", encoded
        )
    return value


async def feed(
    session: AsyncSession,
    principal: Principal,
    subscriber_id: str,
    filters: FeedFilter,
    *,
    offset: int,
    limit: int,
) -> tuple[list[Message], int]:
    subscriber = await _subscriber(
        session,
        principal,
        subscriber_id,
        f"Subscriber not found for this environment with the id: {subscriber_id}. "
        "Make sure to create a subscriber before fetching the feed.",
    )
    return await MessageRepository(session).feed(
        principal.environment_id, subscriber.id, filters, offset=offset, limit=limit
    )


async def unseen_count(
    session: AsyncSession,
    principal: Principal,
    subscriber_id: str,
    *,
    seen: bool,
    limit: int,
    feed_ids: Sequence[str] | None,
) -> int:
    subscriber = await _subscriber(
        session,
        principal,
        subscriber_id,
        _does_not_exist(subscriber_id, principal),
    )
    return await MessageRepository(session).count_by_seen(
        principal.environment_id, subscriber.id, seen=seen, limit=limit, feed_ids=feed_ids
    )


async def list_messages(
    session: AsyncSession,
    principal: Principal,
    *,
    subscriber_id: str | None,
    channel: str | None,
    transaction_ids: Sequence[str] | None,
    offset: int,
    limit: int,
) -> tuple[list[Message], int]:
    internal_subscriber_id = None
    if subscriber_id is not None:
        subscriber = await _subscriber(session, principal, subscriber_id, f"Subscriber {subscriber_id} not found")
        internal_subscriber_id = subscriber.id
    return await MessageRepository(session).list_messages(
        principal.environment_id,
        subscriber_id=internal_subscriber_id,
        channel=channel,
        transaction_ids=transaction_ids,
        offset=offset,
        limit=limit,
    )


async def delete_message(session: AsyncSession, principal: Principal, message_id: str) -> None:
    repository = MessageRepository(session)
    message = await repository.get(principal.environment_id, message_id)
    if message is None:
        raise NotFoundError(f"Message with id {message_id} not found")
    await repository.delete(message)
    if message.channel == "in_app":
        await _counts_changed(session, message.environment_id, message.subscriber_id)


async def delete_messages_by_transaction(
    session: AsyncSession, principal: Principal, transaction_id: str, channel: str | None
) -> int:
    deleted = await MessageRepository(session).delete_by_transaction(principal.environment_id, transaction_id, channel)
    if deleted == 0:
        raise NotFoundError("Invalid transactionId or channel")
    return deleted
