from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from herald.kit import query
from herald.kit.auth import PrincipalDep
from herald.kit.crypto import SecretBox
from herald.kit.db import SessionDep
from herald.kit.pagination import PageDep, paginated
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, PaginatedResponse
from herald.subscribers import service
from herald.subscribers.repository import SubscriberSearch
from herald.subscribers.schemas import (
    BulkCreateSubscribersRequest,
    BulkCreateSubscribersResponse,
    ChatOrPushProviderId,
    CreateSubscriberRequest,
    ListSubscribersResponse,
    RemoveSubscriberResponse,
    Subscriber,
    UpdateSubscriberChannelRequest,
    UpdateSubscriberOnlineStatusRequest,
    UpdateSubscriberRequest,
)


def _secret_box(request: Request) -> SecretBox:
    return request.app.state.secret_box


# Seals the secrets of channel credentials (webhookUrl) and masks them in answers.
BoxDep = Annotated[SecretBox, Depends(_secret_box)]
SubscriberIdPath = Annotated[str, Path(description="The identifier the subscriber was created with")]

v1 = APIRouter(prefix="/v1/subscribers", tags=["Subscribers"], responses=ERROR_RESPONSES)
v2 = APIRouter(prefix="/v2/subscribers", tags=["Subscribers"], responses=ERROR_RESPONSES)

DELETED = RemoveSubscriberResponse(acknowledged=True, status="deleted")


@v1.get("", response_model=PaginatedResponse[Subscriber], summary="List subscribers")
async def list_subscribers(page: PageDep, session: SessionDep, principal: PrincipalDep, box: BoxDep) -> dict[str, Any]:
    """The environment's subscribers, oldest first (new subscribers are added at the end, so pages stay put)."""
    rows, total = await service.list_subscribers(session, principal, offset=page.offset, limit=page.limit)
    return paginated([service.to_schema(row, box) for row in rows], page, total)


@v1.post("", status_code=201, response_model=DataResponse[Subscriber], summary="Create or update a subscriber")
async def upsert_subscriber(
    body: CreateSubscriberRequest, session: SessionDep, principal: PrincipalDep, box: BoxDep
) -> DataResponse[Subscriber]:
    """Creates the subscriber, or updates the one with this subscriberId: only the fields sent change."""
    subscriber = await service.upsert_subscriber(session, principal, body, box=box)
    return DataResponse(data=service.to_schema(subscriber, box))


@v1.post(
    "/bulk",
    status_code=201,
    response_model=DataResponse[BulkCreateSubscribersResponse],
    summary="Create or update up to 500 subscribers",
)
async def bulk_upsert_subscribers(
    body: BulkCreateSubscribersRequest, session: SessionDep, principal: PrincipalDep, box: BoxDep
) -> DataResponse[BulkCreateSubscribersResponse]:
    """Each subscriber is created, or updated as ``POST /v1/subscribers`` updates it, in the order sent."""
    return DataResponse(data=await service.bulk_upsert_subscribers(session, principal, body.subscribers, box=box))


@v1.get("/{subscriberId}", response_model=DataResponse[Subscriber], summary="Get a subscriber")
async def get_subscriber(
    subscriberId: SubscriberIdPath,
    session: SessionDep,
    principal: PrincipalDep,
    box: BoxDep,
    includeTopics: Annotated[bool, Query(description="Add the keys of the subscriber's topics")] = False,
) -> DataResponse[Subscriber]:
    subscriber, topics = await service.get_subscriber(session, principal, subscriberId, include_topics=includeTopics)
    return DataResponse(data=service.to_schema(subscriber, box, topics))


@v1.put("/{subscriberId}", response_model=DataResponse[Subscriber], summary="Update a subscriber")
async def update_subscriber(
    subscriberId: SubscriberIdPath, body: UpdateSubscriberRequest, session: SessionDep, principal: PrincipalDep, box: BoxDep
) -> DataResponse[Subscriber]:
    subscriber = await service.update_subscriber(session, principal, subscriberId, body, box=box)
    return DataResponse(data=service.to_schema(subscriber, box))


@v1.delete("/{subscriberId}", response_model=DataResponse[RemoveSubscriberResponse], summary="Delete a subscriber")
async def delete_subscriber(
    subscriberId: SubscriberIdPath, session: SessionDep, principal: PrincipalDep
) -> DataResponse[RemoveSubscriberResponse]:
    """Deletes the subscriber with its topic memberships and messages, for good."""
    await service.delete_subscriber(session, principal, subscriberId)
    return DataResponse(data=DELETED)


@v1.put(
    "/{subscriberId}/credentials",
    response_model=DataResponse[Subscriber],
    summary="Set a subscriber's provider credentials",
)
async def replace_subscriber_credentials(
    subscriberId: SubscriberIdPath, body: UpdateSubscriberChannelRequest, session: SessionDep, principal: PrincipalDep, box: BoxDep
) -> DataResponse[Subscriber]:
    """Replaces the credentials (device tokens included) the subscriber holds for the provider's integration."""
    subscriber = await service.set_channel_credentials(session, principal, subscriberId, body, replace=True, box=box)
    return DataResponse(data=service.to_schema(subscriber, box))


@v1.patch(
    "/{subscriberId}/credentials",
    response_model=DataResponse[Subscriber],
    summary="Add to a subscriber's provider credentials",
)
async def modify_subscriber_credentials(
    subscriberId: SubscriberIdPath, body: UpdateSubscriberChannelRequest, session: SessionDep, principal: PrincipalDep, box: BoxDep
) -> DataResponse[Subscriber]:
    """Merges the credentials in; device tokens are appended, without duplicates."""
    subscriber = await service.set_channel_credentials(session, principal, subscriberId, body, replace=False, box=box)
    return DataResponse(data=service.to_schema(subscriber, box))


@v1.delete(
    "/{subscriberId}/credentials/{providerId}",
    status_code=204,
    response_class=Response,
    summary="Delete a subscriber's provider credentials",
)
async def delete_subscriber_credentials(
    subscriberId: SubscriberIdPath, providerId: ChatOrPushProviderId, session: SessionDep, principal: PrincipalDep
) -> Response:
    await service.delete_channel_credentials(session, principal, subscriberId, providerId)
    return Response(status_code=204)


@v1.patch(
    "/{subscriberId}/online-status",
    response_model=DataResponse[Subscriber],
    summary="Set a subscriber's online status",
)
async def update_subscriber_online_status(
    subscriberId: SubscriberIdPath,
    body: UpdateSubscriberOnlineStatusRequest,
    session: SessionDep,
    principal: PrincipalDep,
    box: BoxDep,
) -> DataResponse[Subscriber]:
    subscriber = await service.update_online_status(session, principal, subscriberId, body.isOnline)
    return DataResponse(data=service.to_schema(subscriber, box))


@v2.post("", status_code=201, response_model=DataResponse[Subscriber], summary="Create a subscriber")
async def create_subscriber_v2(
    body: CreateSubscriberRequest,
    session: SessionDep,
    principal: PrincipalDep,
    box: BoxDep,
    failIfExists: Annotated[
        bool, Query(description="Answer 409 instead of updating when the subscriberId already exists")
    ] = False,
) -> DataResponse[Subscriber]:
    """Creates the subscriber; an existing one is updated unless ``failIfExists=true`` (then 409)."""
    subscriber = await service.upsert_subscriber(session, principal, body, box=box, fail_if_exists=failIfExists)
    return DataResponse(data=service.to_schema(subscriber, box))


@v2.get("", response_model=ListSubscribersResponse, summary="Search subscribers")
async def search_subscribers(
    session: SessionDep,
    principal: PrincipalDep,
    box: BoxDep,
    limit: Annotated[str | None, Query(description="1 to 100; 10 when not given")] = None,
    after: Annotated[str | None, Query(max_length=64, description="The _id the page starts after (a next)")] = None,
    before: Annotated[str | None, Query(max_length=64, description="The _id the page ends before (a previous)")] = None,
    orderBy: Annotated[str, Query(description="_id, createdAt or updatedAt")] = "_id",
    orderDirection: Annotated[str, Query(description="ASC or DESC")] = "DESC",
    includeCursor: Annotated[bool, Query(description="The cursor's own subscriber starts the page")] = False,
    email: Annotated[str | None, Query(max_length=320)] = None,
    phone: Annotated[str | None, Query(max_length=64)] = None,
    subscriberId: Annotated[str | None, Query(max_length=255)] = None,
    name: Annotated[str | None, Query(max_length=512, description="Within \"firstName lastName\"")] = None,
) -> ListSubscribersResponse:
    """The environment's subscribers whose email, phone, subscriberId and name contain what is given
    (case-insensitive), by cursor: ``next``/``previous`` are the ``after``/``before`` of the pages either side."""
    page = await service.search_subscribers(
        session,
        principal,
        SubscriberSearch(email=email, phone=phone, subscriber_id=subscriberId, name=name),
        after=after or None,
        before=before or None,
        # novu-py sends limit as a number (10 or 10.0).
        limit=query.whole_number("limit", limit, default=10, low=1, high=service.SEARCH_MAX_LIMIT),
        order_by=orderBy,
        order_direction=orderDirection.upper(),
        include_cursor=includeCursor,
    )
    return ListSubscribersResponse(
        data=[service.to_schema(row, box) for row in page.subscribers],
        next=page.next,
        previous=page.previous,
        totalCount=page.total,
        totalCountCapped=page.capped,
    )


@v2.get("/{subscriberId}", response_model=DataResponse[Subscriber], summary="Get a subscriber")
async def get_subscriber_v2(
    subscriberId: SubscriberIdPath, session: SessionDep, principal: PrincipalDep, box: BoxDep
) -> DataResponse[Subscriber]:
    subscriber, _ = await service.get_subscriber(session, principal, subscriberId)
    return DataResponse(data=service.to_schema(subscriber, box))


@v2.patch("/{subscriberId}", response_model=DataResponse[Subscriber], summary="Update a subscriber")
async def patch_subscriber_v2(
    subscriberId: SubscriberIdPath, body: UpdateSubscriberRequest, session: SessionDep, principal: PrincipalDep, box: BoxDep
) -> DataResponse[Subscriber]:
    subscriber = await service.update_subscriber(session, principal, subscriberId, body, box=box)
    return DataResponse(data=service.to_schema(subscriber, box))


@v2.delete("/{subscriberId}", response_model=DataResponse[RemoveSubscriberResponse], summary="Delete a subscriber")
async def delete_subscriber_v2(
    subscriberId: SubscriberIdPath, session: SessionDep, principal: PrincipalDep
) -> DataResponse[RemoveSubscriberResponse]:
    """Deletes the subscriber with its topic memberships and messages, for good."""
    await service.delete_subscriber(session, principal, subscriberId)
    return DataResponse(data=DELETED)


router = APIRouter()
router.include_router(v1)
router.include_router(v2)
