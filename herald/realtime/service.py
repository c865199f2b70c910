"""What a subscriber's sockets are sent, read when a change reaches the process that holds them.

The shapes are the ones @novu/js 3.19 reads from its socket.io client
(``src/ws/socket.ts``): ``notification_received`` carries ``{message}``, the
message as Novu stores it (``_id``, ``content``, ``cta``, ``read``, ...),
which the client maps into its Notification; ``unseen_count_changed`` carries
``{unseenCount, hasMore}``; ``unread_count_changed`` carries ``{unreadCount,
counts, hasMore}``, of which the client reads ``counts``, the session's
``unreadCount`` (``{total, severity}``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from herald.inbox.repository import InboxFilter, InboxRepository
from herald.inbox.service import NotificationView, to_inbox_notification, unread_by_severity
from herald.kit.auth import SubscriberPrincipal
from herald.kit.time import utcnow
from herald.models import Subscriber


def principal_for(environment_id: str, subscriber_id: str) -> SubscriberPrincipal:
    # The organization is not read by anything here (every read is scoped by environment and subscriber).
    return SubscriberPrincipal(environment_id=environment_id, organization_id="", subscriber_id=subscriber_id, external_subscriber_id="")


async def unseen_count(session: AsyncSession, principal: SubscriberPrincipal) -> dict[str, Any]:
    """``unseen_count_changed``: what the Inbox has not looked at yet (not archived, not snoozed)."""
    repository = InboxRepository(session, principal.environment_id, principal.subscriber_id)
    count = await repository.count(InboxFilter(seen=False, archived=False, snoozed=False), utcnow())
    return {"unseenCount": count, "hasMore": False}


async def unread_counts(session: AsyncSession, principal: SubscriberPrincipal) -> dict[str, Any]:
    """``unread_count_changed``: the unread badge, as the session's ``unreadCount`` (``counts``) and its total."""
    severity = await unread_by_severity(session, principal)
    total = sum(severity.values())
    return {"unreadCount": total, "counts": {"total": total, "severity": severity}, "hasMore": False}


async def received_message(session: AsyncSession, principal: SubscriberPrincipal, message_id: str) -> dict[str, Any] | None:
    """``notification_received``'s ``{message}``, or None when the message is gone (deleted since)."""
    repository = InboxRepository(session, principal.environment_id, principal.subscriber_id)
    message = await repository.get(message_id)
    if message is None:
        return None
    workflows = await repository.workflows([message.workflow_id]) if message.workflow_id else []
    view = NotificationView(message, workflows[0] if workflows else None, await repository.subscriber(), utcnow())
    return {"message": novu_message(view)}


def novu_message(view: NotificationView) -> dict[str, Any]:
    """The in-app message as Novu stores it and its socket sends it: what @novu/js's ``mapToNotification`` reads."""
    shown = to_inbox_notification(view)
    message, subscriber = view.message, view.subscriber
    return {
        "_id": message.id,
        "_environmentId": message.environment_id,
        "_subscriberId": message.subscriber_id,
        "_templateId": message.workflow_id,
        "_notificationId": message.notification_id,
        "transactionId": message.transaction_id,
        "channel": "in_app",
        "subject": shown["subject"],
        "content": shown["body"],
        "cta": message.cta or {},
        "read": bool(message.read),
        "seen": bool(message.seen),
        "archived": bool(message.archived),
        "snoozedUntil": shown["snoozedUntil"],
        "deliveredAt": shown["deliveredAt"],
        "createdAt": shown["createdAt"],
        "lastReadDate": shown["readAt"],
        "firstSeenDate": shown["firstSeenAt"],
        "archivedAt": shown["archivedAt"],
        "avatar": shown["avatar"],
        "tags": shown["tags"],
        "data": shown["data"],
        "payload": message.payload or {},
        "severity": shown["severity"],
        "workflow": shown.get("workflow"),
        "subscriber": {
            "_id": message.subscriber_id,
            "subscriberId": subscriber.subscriber_id if subscriber is not None else "",
            "firstName": subscriber.first_name if subscriber is not None else None,
            "lastName": subscriber.last_name if subscriber is not None else None,
            "avatar": subscriber.avatar if subscriber is not None else None,
            "locale": subscriber.locale if subscriber is not None else None,
            "data": subscriber.data if subscriber is not None else None,
            "timezone": subscriber.timezone if subscriber is not None else None,
            "email": subscriber.email if subscriber is not None else None,
            "phone": subscriber.phone if subscriber is not None else None,
        },
    }


async def set_online(session: AsyncSession, principal: SubscriberPrincipal, online: bool, now: datetime | None = None) -> None:
    """``isOnline`` as Novu's socket keeps it: true on connect; false, with ``lastOnlineAt``, on the last disconnect."""
    values: dict[str, Any] = {"is_online": online}
    if not online:
        values["last_online_at"] = now or utcnow()
    await session.execute(
        update(Subscriber)
        .where(Subscriber.id == principal.subscriber_id, Subscriber.environment_id == principal.environment_id)
        .values(**values),
        execution_options={"synchronize_session": False},
    )

