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

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.inbox.service import NotificationView, to_inbox_notification
from herald.kit.auth import SubscriberPrincipal
from herald.kit.time import utcnow
from herald.realtime import repository


async def payloads(
    session: AsyncSession, environment_id: str, subscriber_id: str, message_id: str | None
) -> tuple[dict[str, Any] | None, dict[str, Any], dict[str, Any]]:
    """What a change sends: ``notification_received``'s ``{message}`` (None without a message, or when it is gone),
    ``unseen_count_changed``'s and ``unread_count_changed``'s bodies. Two statements at most."""
    now = utcnow()
    received = None
    if message_id is not None:
        found = await repository.message(session, environment_id, subscriber_id, message_id)
        if found is not None:
            received = {"message": novu_message(NotificationView(found[0], found[1], found[2], now))}
    severity, unseen = await repository.counts(session, environment_id, subscriber_id, now)
    total = sum(severity.values())
    return (
        received,
        {"unseenCount": unseen, "hasMore": False},
        {"unreadCount": total, "counts": {"total": total, "severity": severity}, "hasMore": False},
    )


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


async def set_online(session: AsyncSession, principal: SubscriberPrincipal, online: bool) -> None:
    """``isOnline`` as Novu's socket keeps it: true on connect; false, with ``lastOnlineAt``, on the last disconnect."""
    await repository.set_online(session, principal.environment_id, principal.subscriber_id, online)
