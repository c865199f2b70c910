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

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.inbox.service import NotificationView, to_inbox_notification
from herald.kit.db import session_scope
from herald.kit.time import utcnow
from herald.realtime import repository


async def payloads(
    session: AsyncSession, environment_id: str, subscriber_id: str, message_ids: Sequence[str]
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """What a subscriber's changes send: one ``notification_received`` body (``{message}``) per message of
    ``message_ids`` still there, in their order, then ``unseen_count_changed``'s and ``unread_count_changed``'s
    bodies, read once for all of them (the counts only need the latest). One statement a message, one for the counts."""
    now = utcnow()
    received = []
    for message_id in message_ids:
        found = await repository.message(session, environment_id, subscriber_id, message_id)
        if found is not None:
            received.append({"message": novu_message(NotificationView(found[0], found[1], found[2], now))})
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


# -- online across API processes ------------------------------------------------------------------
#
# ``isOnline`` as Novu's socket keeps it: true on connect; false, with
# ``lastOnlineAt``, on the last disconnect, wherever the subscriber's sockets
# are. Each API process keeps in the store which subscribers it holds a socket
# of (realtime_presence) and that it is alive (realtime_processes, pushed
# ahead by its heartbeat); the per-socket counts stay in its memory.

# A process's row expires this many heartbeats after it was last refreshed:
# one missed beat (a busy event loop, a slow commit) is no death.
EXPIRY_HEARTBEATS = 3
# Subscribers per statement when a whole process's presence goes at once.
CHUNK = 500


def process_ttl(heartbeat_seconds: float) -> timedelta:
    return timedelta(seconds=heartbeat_seconds * EXPIRY_HEARTBEATS)


async def register_process(session: AsyncSession, process_id: str, ttl: timedelta) -> None:
    now = utcnow()
    await repository.register_process(session, process_id, now, now + ttl)


async def heartbeat(session: AsyncSession, process_id: str, ttl: timedelta) -> bool:
    """Keep this process alive in the store; False when a sweep took it (its presence must be written again)."""
    now = utcnow()
    return await repository.keep_process(session, process_id, now, now + ttl)


async def hold(session: AsyncSession, process_id: str, ttl: timedelta, environment_id: str, subscriber_id: str) -> None:
    """This process's first socket of the subscriber (0 -> 1): it holds them, and they are online."""
    await hold_many(session, process_id, ttl, environment_id, [subscriber_id])


async def hold_many(
    session: AsyncSession, process_id: str, ttl: timedelta, environment_id: str, subscriber_ids: Sequence[str]
) -> None:
    """:func:`hold` for several subscribers of an environment, in one statement each."""
    if not subscriber_ids:
        return
    now = utcnow()
    ordered = sorted(set(subscriber_ids))
    await repository.ensure_process(session, process_id, now, now + ttl)
    for start in range(0, len(ordered), CHUNK):
        chunk = ordered[start : start + CHUNK]
        await repository.add_presence(session, process_id, environment_id, chunk)
        # The subscribers' row locks, in id order: serialized with a release or sweep of the same subscribers.
        await repository.lock_subscribers(session, environment_id, chunk)
        await repository.set_online(session, environment_id, chunk, True)


async def release(session: AsyncSession, process_id: str, environment_id: str, subscriber_id: str) -> bool:
    """This process's last socket of the subscriber closed (1 -> 0): offline unless a live process holds another.

    True when the subscriber went offline.
    """
    return bool(await release_many(session, process_id, environment_id, [subscriber_id]))


async def release_many(session: AsyncSession, process_id: str, environment_id: str, subscriber_ids: Sequence[str]) -> set[str]:
    """:func:`release` for several subscribers of an environment; those who went offline."""
    if not subscriber_ids:
        return set()
    now = utcnow()
    ordered = sorted(set(subscriber_ids))
    gone: set[str] = set()
    for start in range(0, len(ordered), CHUNK):
        chunk = ordered[start : start + CHUNK]
        await repository.remove_presence(session, process_id, environment_id, chunk)
        await repository.lock_subscribers(session, environment_id, chunk)
        held = await repository.held_elsewhere(session, environment_id, chunk, now)
        offline = [subscriber_id for subscriber_id in chunk if subscriber_id not in held]
        if offline:
            await repository.set_offline(session, environment_id, offline, now, only_online=False)
            gone.update(offline)
    return gone


async def sweep_process(session: AsyncSession, process_id: str, *, expired_before: datetime | None) -> int:
    """Remove a process and its presence; its subscribers no live process holds go offline.

    With ``expired_before``, only a process whose row expired before then (one
    that died without closing); their ``lastOnlineAt`` is when it was last seen.
    Without it, this process leaving on a clean shutdown. Returns the
    subscribers that went offline.
    """
    seen_at = await repository.take_process(session, process_id, expired_before)
    if expired_before is not None and seen_at is None:
        return 0  # another sweep took it, or it is alive again
    at = seen_at if expired_before is not None and seen_at is not None else utcnow()
    taken: dict[str, list[str]] = defaultdict(list)
    for environment_id, subscriber_id in await repository.take_presence(session, process_id):
        taken[environment_id].append(subscriber_id)
    now = utcnow()
    offline = 0
    for environment_id in sorted(taken):
        subscriber_ids = sorted(taken[environment_id])
        for start in range(0, len(subscriber_ids), CHUNK):
            chunk = subscriber_ids[start : start + CHUNK]
            await repository.lock_subscribers(session, environment_id, chunk)
            held = await repository.held_elsewhere(session, environment_id, chunk, now)
            gone = [subscriber_id for subscriber_id in chunk if subscriber_id not in held]
            if gone:
                await repository.set_offline(session, environment_id, gone, at, only_online=True)
                offline += len(gone)
    return offline


async def sweep_dead_processes(sessionmaker: async_sessionmaker[AsyncSession], limit: int = 100) -> int:
    """Sweep every process whose row expired, one short transaction each; returns the subscribers that went offline."""
    now = utcnow()
    async for session in session_scope(sessionmaker):
        dead = await repository.expired_processes(session, now, limit)
    offline = 0
    for process_id in dead:
        async for session in session_scope(sessionmaker):
            offline += await sweep_process(session, process_id, expired_before=now)
    return offline
