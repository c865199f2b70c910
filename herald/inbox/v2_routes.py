"""Novu's ``/v2/subscribers/{subscriberId}/notifications`` (novu-py's ``subscribers.notifications``).

The secret API key's view of one subscriber's inbox: the same use cases as
the subscriber-token routes (herald.inbox.routes), on the same rows, with the
same state rules, filters, cursor and realtime count events. Only who names
the subscriber differs: here the path does, within the key's environment.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response

from herald.inbox import service
from herald.inbox.query import ListFilterDep, count_filters, echo
from herald.inbox.schemas import (
    ActionType,
    BulkRequest,
    CountsResponse,
    FilterCount,
    InboxNotification,
    NotificationsResponse,
    SnoozeRequest,
)
from herald.kit import query
from herald.kit.auth import PrincipalDep, SubscriberPrincipal
from herald.kit.db import ReadSessionDep, SessionDep
from herald.kit.schemas import ERROR_RESPONSES, DataResponse

router = APIRouter(
    prefix="/v2/subscribers/{subscriberId}/notifications", tags=["Subscribers"], responses=ERROR_RESPONSES
)


async def _subscriber(
    subscriberId: Annotated[str, Path(description="The identifier the subscriber was created with")],
    session: SessionDep,
    principal: PrincipalDep,
) -> SubscriberPrincipal:
    return await service.subscriber_principal(session, principal, subscriberId)


SubscriberDep = Annotated[SubscriberPrincipal, Depends(_subscriber)]


async def _subscriber_to_read(
    subscriberId: Annotated[str, Path(description="The identifier the subscriber was created with")],
    session: ReadSessionDep,
    principal: PrincipalDep,
) -> SubscriberPrincipal:
    return await service.subscriber_principal(session, principal, subscriberId)


# For the routes that only read (on their own connections on SQLite: herald.kit.db.ReadSessionDep).
ReadSubscriberDep = Annotated[SubscriberPrincipal, Depends(_subscriber_to_read)]
NotificationIdPath = Annotated[str, Path(max_length=64)]


@router.get("", response_model=NotificationsResponse, summary="List a subscriber's notifications")
async def list_notifications(
    session: ReadSessionDep,
    subscriber: ReadSubscriberDep,
    filters: ListFilterDep,
    after: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[str | None, Query(description="1 to 100 (10 when not given); novu-py sends 10.0")] = None,
    offset: Annotated[str | None, Query(description="How many to skip (0 when not given)")] = None,
) -> NotificationsResponse:
    """Newest first; ``after`` (a notification id) continues after it. Filters as the Inbox's list."""
    # novu-py sends limit and offset as numbers (10 or 10.0): whole numbers in range.
    page_size = query.whole_number("limit", limit, default=service.DEFAULT_LIMIT, low=1, high=service.MAX_LIMIT)
    skip = query.whole_number("offset", offset, default=0, low=0)
    given = filters.given
    views, more = await service.list_notifications(session, subscriber, given, after=after, offset=skip, limit=page_size)
    return NotificationsResponse(
        data=[InboxNotification.model_validate(service.to_inbox_notification(view)) for view in views],
        hasMore=more,
        filter=echo(given, filters.tags, filters.severity),
    )


@router.get("/count", response_model=CountsResponse, summary="Count a subscriber's notifications")
async def count_notifications(
    session: ReadSessionDep,
    subscriber: ReadSubscriberDep,
    filters: Annotated[str, Query(description="A JSON array of filters; one count each")] = "[{}]",
) -> CountsResponse:
    parsed, given = count_filters(filters)
    counts = await service.count_notifications(session, subscriber, given)
    return CountsResponse(
        data=[
            FilterCount(count=count, filter=echo(item, raw.get("tags"), raw.get("severity")))
            for count, item, raw in zip(counts, given, parsed, strict=True)
        ]
    )


def _answer(view: service.NotificationView) -> DataResponse[InboxNotification]:
    return DataResponse(data=InboxNotification.model_validate(service.to_inbox_notification(view)))


def _state_route(action: str, summary: str) -> None:
    async def change(
        notificationId: NotificationIdPath, session: SessionDep, subscriber: SubscriberDep
    ) -> DataResponse[InboxNotification]:
        return _answer(await service.change_state(session, subscriber, notificationId, action))

    change.__name__ = f"v2_{action}_notification"
    router.add_api_route(
        f"/{{notificationId}}/{action}",
        change,
        methods=["PATCH"],
        response_model=DataResponse[InboxNotification],
        summary=summary,
    )


_state_route("read", "Mark a subscriber's notification read (and seen)")
_state_route("unread", "Mark a subscriber's notification unread")
_state_route("archive", "Archive a subscriber's notification (and read it)")
_state_route("unarchive", "Take a subscriber's notification out of the archive")


@router.patch(
    "/{notificationId}/snooze", response_model=DataResponse[InboxNotification], summary="Snooze a notification"
)
async def snooze_notification(
    notificationId: NotificationIdPath, body: SnoozeRequest, session: SessionDep, subscriber: SubscriberDep
) -> DataResponse[InboxNotification]:
    """Out of the lists that ask for ``snoozed=false`` until ``snoozeUntil``, then delivered again by itself."""
    return _answer(await service.snooze(session, subscriber, notificationId, body.snoozeUntil))


@router.patch(
    "/{notificationId}/unsnooze",
    response_model=DataResponse[InboxNotification],
    summary="Bring a notification back now",
)
async def unsnooze_notification(
    notificationId: NotificationIdPath, session: SessionDep, subscriber: SubscriberDep
) -> DataResponse[InboxNotification]:
    return _answer(await service.unsnooze(session, subscriber, notificationId))


@router.patch(
    "/{notificationId}/actions/{actionType}/complete",
    response_model=DataResponse[InboxNotification],
    summary="Complete a notification's primary or secondary action",
)
async def complete_action(
    notificationId: NotificationIdPath, actionType: ActionType, session: SessionDep, subscriber: SubscriberDep
) -> DataResponse[InboxNotification]:
    return _answer(await service.set_action(session, subscriber, notificationId, actionType, done=True))


@router.patch(
    "/{notificationId}/actions/{actionType}/revert",
    response_model=DataResponse[InboxNotification],
    summary="Revert a notification's completed action",
)
async def revert_action(
    notificationId: NotificationIdPath, actionType: ActionType, session: SessionDep, subscriber: SubscriberDep
) -> DataResponse[InboxNotification]:
    return _answer(await service.set_action(session, subscriber, notificationId, actionType, done=False))


@router.delete("/{notificationId}", status_code=204, summary="Delete a subscriber's notification")
async def delete_notification(
    notificationId: NotificationIdPath, session: SessionDep, subscriber: SubscriberDep
) -> Response:
    await service.delete_notification(session, subscriber, notificationId)
    return Response(status_code=204)


def _bulk_route(action: str, summary: str) -> None:
    async def apply(body: BulkRequest, session: SessionDep, subscriber: SubscriberDep) -> Response:
        await service.bulk(
            session, subscriber, action, tags=_tags(body.tags), data=body.data, notification_ids=body.notificationIds
        )
        return Response(status_code=204)

    apply.__name__ = f"v2_bulk_{action.replace('-', '_')}"
    router.add_api_route(f"/{action}", apply, methods=["POST"], status_code=204, summary=summary)


def _tags(tags: Any) -> Any:
    # novu-py's body model for tags is an open object; an empty one narrows nothing.
    return None if tags == {} else tags


_bulk_route("read", "Read all a subscriber's notifications (of the tags and data given)")
_bulk_route("archive", "Archive all a subscriber's notifications (of the tags and data given)")
_bulk_route("read-archive", "Archive all a subscriber's read notifications (of the tags and data given)")
_bulk_route("delete", "Delete all a subscriber's notifications (of the tags and data given)")
_bulk_route("seen", "Mark a subscriber's notifications seen (the ids, or all of the tags and data given)")
