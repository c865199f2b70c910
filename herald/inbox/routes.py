"""Novu's Inbox API (``/v1/inbox``) as @novu/js 3.19 calls it.

``POST /v1/inbox/session`` takes the environment's public identifier and a
subscriber and answers with a subscriber token; every other route takes
``Authorization: Bearer <token>`` and sees that subscriber's notifications
only. Browsers call these routes from other origins: herald.app answers their
CORS preflights (``HERALD_CORS_ORIGINS``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from herald.inbox import preference_routes, service
from herald.inbox.query import ListFilterDep, count_filters, echo
from herald.inbox.schemas import (
    BulkRequest,
    CountsResponse,
    FilterCount,
    InboxActionRequest,
    InboxNotification,
    NotificationsResponse,
    Session,
    SessionRequest,
    SeverityCounts,
    SnoozeRequest,
    UnreadCount,
)
from herald.kit.auth import SubscriberPrincipalDep, issue_subscriber_token
from herald.kit.db import ReadSessionDep, SessionDep
from herald.kit.query import MAX_INTEGER
from herald.kit.schemas import ERROR_RESPONSES, DataResponse

router = APIRouter(prefix="/v1/inbox", tags=["Inbox"], responses=ERROR_RESPONSES)


@router.post("/session", status_code=201, response_model=DataResponse[Session], summary="Start an inbox session")
async def start_session(body: SessionRequest, session: SessionDep, request: Request) -> DataResponse[Session]:
    settings = request.app.state.settings
    limits = request.app.state.rate_limits
    client = request.client.host if request.client is not None else ""
    result = await service.start_session(
        session, request.app.state.secret_box, body, admit=lambda identifier: limits.admit_session(identifier, client)
    )
    total = sum(result.unread.values())
    return DataResponse(
        data=Session(
            token=issue_subscriber_token(result.principal, settings.secret_key, settings.inbox_token_seconds),
            totalUnreadCount=total,
            unreadCount=UnreadCount(total=total, severity=SeverityCounts(**result.unread)),
            removeNovuBranding=False,
            isDevelopmentMode=result.development,
            maxSnoozeDurationHours=service.MAX_SNOOZE_DURATION_HOURS,
            applicationIdentifier=result.application_identifier,
            contextKeys=[],
        )
    )


@router.get("/notifications", response_model=NotificationsResponse, summary="List the subscriber's notifications")
async def list_notifications(
    session: ReadSessionDep,
    principal: SubscriberPrincipalDep,
    filters: ListFilterDep,
    limit: Annotated[int, Query(ge=1, le=service.MAX_LIMIT)] = service.DEFAULT_LIMIT,
    after: Annotated[str | None, Query(max_length=64)] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_INTEGER)] = 0,
) -> NotificationsResponse:
    """Newest first; ``after`` (a notification id) continues after it. Filters: read, seen, archived,
    snoozed (true: snoozed now; false: not), ``tags[]``, ``severity[]``, ``data`` (JSON), createdGte/createdLte (ms)."""
    given = filters.given
    views, more = await service.list_notifications(session, principal, given, after=after, offset=offset, limit=limit)
    return NotificationsResponse(
        data=[InboxNotification.model_validate(service.to_inbox_notification(view)) for view in views],
        hasMore=more,
        filter=echo(given, filters.tags, filters.severity),
    )


@router.get("/notifications/count", response_model=CountsResponse, summary="Count the subscriber's notifications")
async def count_notifications(
    session: ReadSessionDep,
    principal: SubscriberPrincipalDep,
    filters: Annotated[str, Query(description="A JSON array of filters; one count each")] = "[{}]",
) -> CountsResponse:
    parsed, given = count_filters(filters)
    counts = await service.count_notifications(session, principal, given)
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
        notificationId: str, session: SessionDep, principal: SubscriberPrincipalDep
    ) -> DataResponse[InboxNotification]:
        return _answer(await service.change_state(session, principal, notificationId, action))

    change.__name__ = f"{action}_notification"
    router.add_api_route(
        f"/notifications/{{notificationId}}/{action}",
        change,
        methods=["PATCH"],
        response_model=DataResponse[InboxNotification],
        summary=summary,
    )


_state_route("read", "Mark a notification read (and seen)")
_state_route("unread", "Mark a notification unread")
_state_route("archive", "Archive a notification (and read it)")
_state_route("unarchive", "Take a notification out of the archive")


@router.patch(
    "/notifications/{notificationId}/snooze",
    response_model=DataResponse[InboxNotification],
    summary="Snooze a notification until a time",
)
async def snooze_notification(
    notificationId: str, body: SnoozeRequest, session: SessionDep, principal: SubscriberPrincipalDep
) -> DataResponse[InboxNotification]:
    return _answer(await service.snooze(session, principal, notificationId, body.snoozeUntil))


@router.patch(
    "/notifications/{notificationId}/unsnooze",
    response_model=DataResponse[InboxNotification],
    summary="Bring a snoozed notification back now",
)
async def unsnooze_notification(
    notificationId: str, session: SessionDep, principal: SubscriberPrincipalDep
) -> DataResponse[InboxNotification]:
    return _answer(await service.unsnooze(session, principal, notificationId))


@router.patch(
    "/notifications/{notificationId}/complete",
    response_model=DataResponse[InboxNotification],
    summary="Complete a notification's primary or secondary action",
)
async def complete_action(
    notificationId: str, body: InboxActionRequest, session: SessionDep, principal: SubscriberPrincipalDep
) -> DataResponse[InboxNotification]:
    return _answer(await service.set_action(session, principal, notificationId, body.actionType, done=True))


@router.patch(
    "/notifications/{notificationId}/revert",
    response_model=DataResponse[InboxNotification],
    summary="Revert a notification's completed action",
)
async def revert_action(
    notificationId: str, body: InboxActionRequest, session: SessionDep, principal: SubscriberPrincipalDep
) -> DataResponse[InboxNotification]:
    return _answer(await service.set_action(session, principal, notificationId, body.actionType, done=False))


@router.delete("/notifications/{notificationId}/delete", status_code=204, summary="Delete a notification")
async def delete_notification(notificationId: str, session: SessionDep, principal: SubscriberPrincipalDep) -> Response:
    await service.delete_notification(session, principal, notificationId)
    return Response(status_code=204)


def _bulk_route(action: str, summary: str) -> None:
    async def apply(body: BulkRequest, session: SessionDep, principal: SubscriberPrincipalDep) -> Response:
        await service.bulk(
            session, principal, action, tags=body.tags, data=body.data, notification_ids=body.notificationIds
        )
        return Response(status_code=204)

    apply.__name__ = f"bulk_{action.replace('-', '_')}"
    router.add_api_route(f"/notifications/{action}", apply, methods=["POST"], status_code=204, summary=summary)


_bulk_route("read", "Read all the notifications (of the tags and data given)")
_bulk_route("archive", "Archive all the notifications (of the tags and data given)")
_bulk_route("read-archive", "Archive all the read notifications (of the tags and data given)")
_bulk_route("delete", "Delete all the notifications (of the tags and data given)")
_bulk_route("seen", "Mark notifications seen (the ids, or all of the tags and data given)")

# The preferences (/v1/inbox/preferences*), in a module of their own.
router.include_router(preference_routes.router)
