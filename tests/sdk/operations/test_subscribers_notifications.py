"""novu.subscribers.notifications.*: a subscriber's inbox with the secret API key (/v2/subscribers/{id}/notifications)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from fastapi import FastAPI
from novu_py import Novu
from sqlalchemy import select

from herald.kit.time import utcnow
from herald.models import Message
from tests.conftest import Tenancy
from tests.fixtures.builders import insert_in_app_message, unique
from tests.sdk.operations.conftest import call

CTA = {"action": {"buttons": [{"type": "primary", "content": "Open"}, {"type": "secondary", "content": "Later"}]}}


async def subscriber_of(novu: Novu, tenancy: Tenancy) -> dict[str, Any]:
    """A subscriber made through the SDK, as the builders name its fields."""
    created = await call(
        lambda: novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": unique("sdk")}).result
    )
    return {
        "_id": created.id,
        "subscriberId": created.subscriber_id,
        "_environmentId": tenancy.environment_id,
        "_organizationId": tenancy.organization_id,
    }


async def stored(app: FastAPI, message_id: str) -> Message | None:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Message).where(Message.id == message_id))).scalar_one_or_none()


async def test_subscribers_notifications_list(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    older = await insert_in_app_message(app, subscriber, cta=CTA, data={"kind": "invoice"})
    newer = await insert_in_app_message(app, subscriber, read=True, seen=True)
    page = await call(
        lambda: (
            novu.subscribers.notifications.list(
                request={"subscriber_id": subscriber["subscriberId"], "limit": 1}
            ).result
        )
    )
    assert [item.id for item in page.data] == [newer.id] and page.has_more is True
    rest = await call(
        lambda: (
            novu.subscribers.notifications.list(
                request={"subscriber_id": subscriber["subscriberId"], "after": newer.id, "read": False}
            ).result
        )
    )
    assert [item.id for item in rest.data] == [older.id] and rest.has_more is False
    assert rest.data[0].primary_action is not None and rest.data[0].primary_action.label == "Open"
    assert rest.data[0].data == {"kind": "invoice"} and rest.data[0].to.subscriber_id == subscriber["subscriberId"]


async def test_subscribers_notifications_count(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    await insert_in_app_message(app, subscriber)
    await insert_in_app_message(app, subscriber, read=True, seen=True)
    counts = await call(
        lambda: (
            novu.subscribers.notifications.count(
                subscriber_id=subscriber["subscriberId"], filters=json.dumps([{"read": False}, {}])
            ).result
        )
    )
    assert [(item.count, item.filter_) for item in counts] == [(1, {"read": False}), (2, {})]


async def test_subscribers_notifications_mark_as_read(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    message = await insert_in_app_message(app, subscriber)
    read = await call(
        lambda: (
            novu.subscribers.notifications.mark_as_read(
                subscriber_id=subscriber["subscriberId"], notification_id=message.id
            ).result
        )
    )
    assert read.is_read is True and read.is_seen is True
    assert (await stored(app, message.id)).read is True  # type: ignore[union-attr]


async def test_subscribers_notifications_mark_as_unread(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    message = await insert_in_app_message(app, subscriber, read=True, seen=True)
    unread = await call(
        lambda: (
            novu.subscribers.notifications.mark_as_unread(
                subscriber_id=subscriber["subscriberId"], notification_id=message.id
            ).result
        )
    )
    assert unread.is_read is False and unread.read_at is None
    assert (await stored(app, message.id)).read is False  # type: ignore[union-attr]


async def test_subscribers_notifications_archive(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    message = await insert_in_app_message(app, subscriber)
    archived = await call(
        lambda: (
            novu.subscribers.notifications.archive(
                subscriber_id=subscriber["subscriberId"], notification_id=message.id
            ).result
        )
    )
    assert archived.is_archived is True and archived.archived_at
    assert (await stored(app, message.id)).archived is True  # type: ignore[union-attr]


async def test_subscribers_notifications_unarchive(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    message = await insert_in_app_message(app, subscriber, archived=True, archived_at=utcnow(), read=True)
    unarchived = await call(
        lambda: (
            novu.subscribers.notifications.unarchive(
                subscriber_id=subscriber["subscriberId"], notification_id=message.id
            ).result
        )
    )
    assert unarchived.is_archived is False and unarchived.archived_at is None
    assert (await stored(app, message.id)).archived is False  # type: ignore[union-attr]


async def test_subscribers_notifications_snooze(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    message = await insert_in_app_message(app, subscriber)
    until = utcnow() + timedelta(hours=2)
    snoozed = await call(
        lambda: (
            novu.subscribers.notifications.snooze(
                request={
                    "subscriber_id": subscriber["subscriberId"],
                    "notification_id": message.id,
                    "snooze_subscriber_notification_dto": {"snooze_until": until},
                }
            ).result
        )
    )
    assert snoozed.is_snoozed is True and snoozed.snoozed_until
    row = await stored(app, message.id)
    assert row is not None and row.snoozed_until is not None and abs((row.snoozed_until - until).total_seconds()) < 1


async def test_subscribers_notifications_unsnooze(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    message = await insert_in_app_message(app, subscriber, snoozed_until=utcnow() + timedelta(hours=1))
    back = await call(
        lambda: (
            novu.subscribers.notifications.unsnooze(
                subscriber_id=subscriber["subscriberId"], notification_id=message.id
            ).result
        )
    )
    assert back.is_snoozed is False and back.delivered_at is not None and len(back.delivered_at) == 2
    assert (await stored(app, message.id)).snoozed_until is None  # type: ignore[union-attr]


async def test_subscribers_notifications_complete_action(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    message = await insert_in_app_message(app, subscriber, cta=CTA)
    done = await call(
        lambda: (
            novu.subscribers.notifications.complete_action(
                request={
                    "subscriber_id": subscriber["subscriberId"],
                    "notification_id": message.id,
                    "action_type": "secondary",
                }
            ).result
        )
    )
    assert done.secondary_action is not None and done.secondary_action.is_completed is True
    assert done.primary_action is not None and done.primary_action.is_completed is False
    assert (await stored(app, message.id)).cta["action"]["status"] == "done"  # type: ignore[union-attr]


async def test_subscribers_notifications_revert_action(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    cta = {"action": {**CTA["action"], "status": "done", "result": {"type": "primary"}}}
    message = await insert_in_app_message(app, subscriber, cta=cta)
    reverted = await call(
        lambda: (
            novu.subscribers.notifications.revert_action(
                request={
                    "subscriber_id": subscriber["subscriberId"],
                    "notification_id": message.id,
                    "action_type": "primary",
                }
            ).result
        )
    )
    assert reverted.primary_action is not None and reverted.primary_action.is_completed is False
    assert (await stored(app, message.id)).cta["action"]["status"] == "pending"  # type: ignore[union-attr]


async def test_subscribers_notifications_delete(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    message = await insert_in_app_message(app, subscriber)
    kept = await insert_in_app_message(app, subscriber)
    await call(
        lambda: novu.subscribers.notifications.delete(
            subscriber_id=subscriber["subscriberId"], notification_id=message.id
        )
    )
    assert await stored(app, message.id) is None and await stored(app, kept.id) is not None


async def test_subscribers_notifications_delete_all(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    other = await subscriber_of(novu, tenancy)
    mine = [await insert_in_app_message(app, subscriber) for _ in range(2)]
    theirs = await insert_in_app_message(app, other)
    await call(
        lambda: novu.subscribers.notifications.delete_all(
            subscriber_id=subscriber["subscriberId"], update_all_subscriber_notifications_dto={}
        )
    )
    assert [await stored(app, m.id) for m in mine] == [None, None] and await stored(app, theirs.id) is not None


async def test_subscribers_notifications_mark_all_as_read(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    messages = [await insert_in_app_message(app, subscriber) for _ in range(2)]
    await call(
        lambda: novu.subscribers.notifications.mark_all_as_read(
            subscriber_id=subscriber["subscriberId"], update_all_subscriber_notifications_dto={}
        )
    )
    assert [(await stored(app, m.id)).read for m in messages] == [True, True]  # type: ignore[union-attr]


async def test_subscribers_notifications_archive_all(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    messages = [await insert_in_app_message(app, subscriber) for _ in range(2)]
    await call(
        lambda: novu.subscribers.notifications.archive_all(
            subscriber_id=subscriber["subscriberId"], update_all_subscriber_notifications_dto={}
        )
    )
    assert [(await stored(app, m.id)).archived for m in messages] == [True, True]  # type: ignore[union-attr]


async def test_subscribers_notifications_archive_all_read(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    read = await insert_in_app_message(app, subscriber, read=True, seen=True)
    unread = await insert_in_app_message(app, subscriber)
    await call(
        lambda: novu.subscribers.notifications.archive_all_read(
            subscriber_id=subscriber["subscriberId"], update_all_subscriber_notifications_dto={}
        )
    )
    assert (await stored(app, read.id)).archived is True  # type: ignore[union-attr]
    assert (await stored(app, unread.id)).archived is False  # type: ignore[union-attr]


async def test_subscribers_notifications_mark_as_seen(novu: Novu, tenancy: Tenancy, app: FastAPI) -> None:
    subscriber = await subscriber_of(novu, tenancy)
    seen = await insert_in_app_message(app, subscriber)
    unseen = await insert_in_app_message(app, subscriber)
    await call(
        lambda: novu.subscribers.notifications.mark_as_seen(
            subscriber_id=subscriber["subscriberId"],
            mark_subscriber_notifications_as_seen_dto={"notification_ids": [seen.id]},
        )
    )
    assert (await stored(app, seen.id)).seen is True  # type: ignore[union-attr]
    assert (await stored(app, unseen.id)).seen is False  # type: ignore[union-attr]
