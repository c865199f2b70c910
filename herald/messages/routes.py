"""Messages (``/v1/messages``) and the subscriber's inbox (``/v1/subscribers/{subscriberId}/...``)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response

from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.pagination import PageDep, paginated
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, PaginatedResponse
from herald.messages import service
from herald.messages.repository import FeedFilter
from herald.messages.schemas import (
    Channel,
    DeleteMessageResponse,
    MarkAllMessagesAsRequest,
    MarkMessagesAsRequest,
    Message,
    MessageActionRequest,
    UnseenCount,
)

MAX_TRANSACTION_IDS = 100
MAX_FEED_IDS = 100
MAX_UNSEEN_LIMIT = 1000

messages_router = APIRouter(prefix="/v1/messages", tags=["Messages"], responses=ERROR_RESPONSES)
inbox_router = APIRouter(prefix="/v1/subscribers/{subscriberId}", tags=["Inbox"], responses=ERROR_RESPONSES)

FeedIds = Annotated[
    list[str] | None,
    Query(max_length=MAX_FEED_IDS, description="Only messages of these feeds (their _feedId)"),
]


@inbox_router.post(
    "/messages/mark-as",
    status_code=201,
    response_model=DataResponse[list[Message]],
    summary="Update notifications state",
)
async def mark_messages_as(
    subscriberId: str, body: MarkMessagesAsRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[list[Message]]:
    """Mark some of the subscriber's messages read, seen, unread or unseen (spec §4.3).

    Ids that are not this subscriber's messages are ignored and absent from
    the answer; the answer lists the updated messages in the order of the ids given.
    """
    rows = await service.mark_messages_as(session, principal, subscriberId, body.message_ids(), body.markAs)
    return DataResponse(data=[service.to_schema(row) for row in rows])


@inbox_router.post(
    "/messages/mark-all",
    status_code=201,
    response_model=DataResponse[int],
    summary="Mark all the subscriber's in-app messages",
)
async def mark_all_messages_as(
    subscriberId: str, body: MarkAllMessagesAsRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[int]:
    """The answer is the number of messages whose state changed."""
    changed = await service.mark_all_messages_as(session, principal, subscriberId, body.markAs, body.feed_ids())
    return DataResponse(data=changed)


@inbox_router.post(
    "/messages/{messageId}/actions/{type}",
    status_code=201,
    response_model=DataResponse[Message],
    summary="Record the result of a message's action button",
)
async def mark_message_action(
    subscriberId: str,
    messageId: str,
    button_type: Annotated[Literal["primary", "secondary"], Path(alias="type")],
    body: MessageActionRequest,
    session: SessionDep,
    principal: PrincipalDep,
) -> DataResponse[Message]:
    message = await service.record_action(
        session, principal, subscriberId, messageId, button_type, body.status, body.payload
    )
    return DataResponse(data=service.to_schema(message))


@inbox_router.get(
    "/notifications/feed",
    response_model=PaginatedResponse[Message],
    summary="The subscriber's in-app feed",
)
async def get_notifications_feed(
    subscriberId: str,
    page: PageDep,
    session: SessionDep,
    principal: PrincipalDep,
    read: Annotated[bool | None, Query(description="Only read (true) or unread (false) messages")] = None,
    seen: Annotated[bool | None, Query(description="Only seen (true) or unseen (false) messages")] = None,
    payload: Annotated[
        str | None, Query(description="Base64 of a JSON object; messages whose payload holds the same values")
    ] = None,
    feedIdentifier: FeedIds = None,
) -> PaginatedResponse[Message]:
    """In-app messages, newest first. ``totalCount`` counts the matches, up to 10,000 past the page."""
    filters = FeedFilter(read=read, seen=seen, feed_ids=feedIdentifier, payload=service.decode_payload_filter(payload))
    rows, total = await service.feed(session, principal, subscriberId, filters, offset=page.offset, limit=page.limit)
    return PaginatedResponse[Message](**paginated([service.to_schema(row) for row in rows], page, total))


@inbox_router.get(
    "/notifications/unseen",
    response_model=DataResponse[UnseenCount],
    summary="Count the subscriber's unseen in-app messages",
)
async def get_unseen_count(
    subscriberId: str,
    session: SessionDep,
    principal: PrincipalDep,
    seen: Annotated[bool, Query(description="Count seen (true) or unseen (false) messages")] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_UNSEEN_LIMIT, description="Stop counting at this number")] = 100,
    feedId: FeedIds = None,
) -> DataResponse[UnseenCount]:
    count = await service.unseen_count(session, principal, subscriberId, seen=seen, limit=limit, feed_ids=feedId)
    return DataResponse(data=UnseenCount(count=count))


@messages_router.get("", response_model=PaginatedResponse[Message], summary="List messages")
async def list_messages(
    page: PageDep,
    session: SessionDep,
    principal: PrincipalDep,
    subscriberId: Annotated[str | None, Query(description="The subscriber's identifier")] = None,
    channel: Channel | None = None,
    transactionId: Annotated[
        list[str] | None, Query(max_length=MAX_TRANSACTION_IDS, description="One or more transaction ids")
    ] = None,
) -> PaginatedResponse[Message]:
    """Messages of the environment, newest first."""
    rows, total = await service.list_messages(
        session,
        principal,
        subscriber_id=subscriberId,
        channel=channel,
        transaction_ids=transactionId,
        offset=page.offset,
        limit=page.limit,
    )
    return PaginatedResponse[Message](**paginated([service.to_schema(row) for row in rows], page, total))


@messages_router.delete(
    "/transaction/{transactionId}",
    status_code=204,
    response_class=Response,
    summary="Delete the messages of a transaction",
)
async def delete_messages_by_transaction(
    transactionId: str, session: SessionDep, principal: PrincipalDep, channel: Channel | None = None
) -> Response:
    await service.delete_messages_by_transaction(session, principal, transactionId, channel)
    return Response(status_code=204)


@messages_router.delete(
    "/{messageId}", response_model=DataResponse[DeleteMessageResponse], summary="Delete a message"
)
async def delete_message(
    messageId: str, session: SessionDep, principal: PrincipalDep
) -> DataResponse[DeleteMessageResponse]:
    await service.delete_message(session, principal, messageId)
    return DataResponse(data=DeleteMessageResponse(acknowledged=True, status="deleted"))


router = APIRouter()
router.include_router(inbox_router)
router.include_router(messages_router)
