from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from herald.kit.auth import PrincipalDep
from herald.kit.cursor import CursorDep
from herald.kit.db import SessionDep
from herald.kit.pagination import MAX_PAGE_SIZE, PageParams, paginated
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, PaginatedResponse
from herald.topics import service
from herald.topics.schemas import (
    AssignSubscribersResult,
    CreatedTopic,
    CreateTopicRequest,
    CreateTopicSubscriptionsRequest,
    CreateUpdateTopicRequest,
    DeleteTopicResponse,
    DeleteTopicSubscriptionsRequest,
    FailedAssignments,
    RenameTopicRequest,
    Subscription,
    SubscriptionDetails,
    SubscriptionsResult,
    Topic,
    TopicList,
    TopicSubscriber,
    TopicSubscribersRequest,
    TopicSubscriptionList,
    TopicV2,
    UpdateTopicRequest,
    UpdateTopicSubscriptionRequest,
)

TopicKeyPath = Annotated[str, Path(description="The topic's key")]

v1 = APIRouter(prefix="/v1/topics", tags=["Topics"], responses=ERROR_RESPONSES)


@v1.post("", status_code=201, response_model=DataResponse[CreatedTopic], summary="Create a topic")
async def create_topic(body: CreateTopicRequest, session: SessionDep, principal: PrincipalDep) -> DataResponse[CreatedTopic]:
    topic = await service.create_topic(session, principal, body)
    return DataResponse(data=CreatedTopic(id=topic.id, key=topic.key))


@v1.get("", response_model=PaginatedResponse[Topic], summary="List topics")
async def list_topics(
    session: SessionDep,
    principal: PrincipalDep,
    page: Annotated[int, Query(ge=0, le=1_000_000, description="Page number, from 0")] = 0,
    pageSize: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Topics per page")] = 10,
    key: Annotated[str | None, Query(description="Only the topic with this key")] = None,
    name: Annotated[str | None, Query(description="Only topics with this name")] = None,
) -> dict[str, Any]:
    """Topics, oldest first. Each lists at most its first 100 members (in joining order) in
    ``subscribers``; ``GET /v1/topics/{topicKey}`` lists every member."""
    params = PageParams(page=page, limit=pageSize)
    topics, total = await service.list_topics(
        session, principal, offset=params.offset, limit=params.limit, key=key, name=name
    )
    return paginated(topics, params, total)


@v1.get("/{topicKey}", response_model=DataResponse[Topic], summary="Get a topic")
async def get_topic(topicKey: TopicKeyPath, session: SessionDep, principal: PrincipalDep) -> DataResponse[Topic]:
    """The topic with the subscriberIds of all its members, in joining order."""
    return DataResponse(data=await service.get_topic(session, principal, topicKey))


@v1.patch("/{topicKey}", response_model=DataResponse[Topic], summary="Rename a topic")
async def rename_topic(
    topicKey: TopicKeyPath, body: RenameTopicRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[Topic]:
    return DataResponse(data=await service.rename_topic(session, principal, topicKey, body.name))


@v1.delete("/{topicKey}", status_code=204, response_class=Response, summary="Delete a topic")
async def delete_topic(topicKey: TopicKeyPath, session: SessionDep, principal: PrincipalDep) -> Response:
    """Deletes a topic that has no members; one that still has members answers 409."""
    await service.delete_topic(session, principal, topicKey)
    return Response(status_code=204)


@v1.post(
    "/{topicKey}/subscribers",
    status_code=200,
    response_model=DataResponse[AssignSubscribersResult],
    summary="Add subscribers to a topic",
)
async def add_topic_subscribers(
    topicKey: TopicKeyPath, body: TopicSubscribersRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[AssignSubscribersResult]:
    """Adds the subscribers (creating the topic when it does not exist). Members already there
    stay; subscriberIds with no subscriber are listed in ``failed.notFound``."""
    outcome = await service.add_subscribers(session, principal, topicKey, body.subscribers)
    result = AssignSubscribersResult(succeeded=outcome.succeeded)
    if outcome.not_found:
        result = AssignSubscribersResult(
            succeeded=outcome.succeeded, failed=FailedAssignments(notFound=outcome.not_found)
        )
    return DataResponse(data=result)


@v1.post(
    "/{topicKey}/subscribers/removal",
    status_code=204,
    response_class=Response,
    summary="Remove subscribers from a topic",
)
async def remove_topic_subscribers(
    topicKey: TopicKeyPath, body: TopicSubscribersRequest, session: SessionDep, principal: PrincipalDep
) -> Response:
    """Removes the subscribers from the topic; ones that are not members are nothing to remove."""
    await service.remove_subscribers(session, principal, topicKey, body.subscribers)
    return Response(status_code=204)


@v1.get(
    "/{topicKey}/subscribers/{subscriberId}",
    response_model=DataResponse[TopicSubscriber],
    summary="Check a subscriber's membership of a topic",
)
async def get_topic_subscriber(
    topicKey: TopicKeyPath,
    subscriberId: Annotated[str, Path(description="The subscriber's identifier")],
    session: SessionDep,
    principal: PrincipalDep,
) -> DataResponse[TopicSubscriber]:
    membership = await service.get_membership(session, principal, topicKey, subscriberId)
    return DataResponse(data=service.membership_schema(membership))


# --- v2: Novu's current topic routes, over the same topics and memberships ---------------

v2 = APIRouter(prefix="/v2/topics", tags=["Topics"], responses=ERROR_RESPONSES)
subscriber_v2 = APIRouter(prefix="/v2/subscribers", tags=["Topics"], responses=ERROR_RESPONSES)
IdentifierPath = Annotated[str, Path(description="The subscription's identifier")]


@v2.post(
    "",
    status_code=201,
    response_model=DataResponse[TopicV2],
    summary="Create a topic, or update the one with this key",
    responses={200: {"description": "The topic existed and was updated"}},
)
async def upsert_topic(
    body: CreateUpdateTopicRequest,
    response: Response,
    session: SessionDep,
    principal: PrincipalDep,
    failIfExists: Annotated[bool, Query(description="Answer 409 instead of updating an existing topic")] = False,
) -> DataResponse[TopicV2]:
    """201 with a new topic, 200 with an existing one (renamed when a name is given)."""
    topic, created = await service.upsert_topic(session, principal, body, fail_if_exists=failIfExists)
    response.status_code = 201 if created else 200
    return DataResponse(data=service.topic_v2(topic))


@v2.get("", response_model=TopicList, summary="List topics")
async def list_topics_v2(
    cursor: CursorDep,
    session: SessionDep,
    principal: PrincipalDep,
    key: Annotated[str | None, Query(max_length=255, description="Only the topic with this key")] = None,
    name: Annotated[str | None, Query(max_length=255, description="Only topics with this name")] = None,
) -> dict[str, Any]:
    page = await service.list_topics_v2(session, principal, cursor, key=key, name=name)
    return page.answer([service.topic_v2(topic) for topic in page.items])


@v2.get("/{topicKey}", response_model=DataResponse[TopicV2], summary="Get a topic")
async def get_topic_v2(topicKey: TopicKeyPath, session: SessionDep, principal: PrincipalDep) -> DataResponse[TopicV2]:
    return DataResponse(data=service.topic_v2(await service.require_topic(session, principal, topicKey)))


@v2.patch("/{topicKey}", response_model=DataResponse[TopicV2], summary="Rename a topic")
async def update_topic_v2(
    topicKey: TopicKeyPath, body: UpdateTopicRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[TopicV2]:
    return DataResponse(data=service.topic_v2(await service.update_topic_v2(session, principal, topicKey, body.name)))


@v2.delete("/{topicKey}", response_model=DataResponse[DeleteTopicResponse], summary="Delete a topic")
async def delete_topic_v2(
    topicKey: TopicKeyPath, session: SessionDep, principal: PrincipalDep
) -> DataResponse[DeleteTopicResponse]:
    """Deletes the topic with its subscriptions."""
    await service.delete_topic_v2(session, principal, topicKey)
    return DataResponse(data=DeleteTopicResponse(acknowledged=True))


@v2.post(
    "/{topicKey}/subscriptions",
    status_code=201,
    response_model=DataResponse[SubscriptionsResult],
    summary="Subscribe subscribers to a topic",
)
async def create_topic_subscriptions(
    topicKey: TopicKeyPath, body: CreateTopicSubscriptionsRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[SubscriptionsResult]:
    """Creates the topic when missing; unknown subscribers are listed in ``errors``."""
    return DataResponse(data=await service.create_subscriptions(session, principal, topicKey, body))


@v2.get("/{topicKey}/subscriptions", response_model=TopicSubscriptionList, summary="List a topic's subscriptions")
async def list_topic_subscriptions(
    topicKey: TopicKeyPath,
    cursor: CursorDep,
    session: SessionDep,
    principal: PrincipalDep,
    subscriberId: Annotated[str | None, Query(max_length=255, description="Only this subscriber's")] = None,
) -> dict[str, Any]:
    page, data = await service.list_subscriptions(session, principal, topicKey, cursor, subscriber_id=subscriberId)
    return page.answer(data)


@v2.delete(
    "/{topicKey}/subscriptions",
    response_model=DataResponse[SubscriptionsResult],
    summary="Unsubscribe subscribers from a topic",
)
async def delete_topic_subscriptions(
    topicKey: TopicKeyPath, body: DeleteTopicSubscriptionsRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[SubscriptionsResult]:
    return DataResponse(data=await service.delete_subscriptions(session, principal, topicKey, body))


@v2.get(
    "/{topicKey}/subscriptions/{identifier}",
    response_model=DataResponse[SubscriptionDetails],
    summary="Get a topic subscription",
)
async def get_topic_subscription(
    topicKey: TopicKeyPath, identifier: IdentifierPath, session: SessionDep, principal: PrincipalDep
) -> DataResponse[SubscriptionDetails]:
    return DataResponse(data=await service.get_subscription(session, principal, topicKey, identifier))


@v2.patch(
    "/{topicKey}/subscriptions/{identifier}",
    response_model=DataResponse[Subscription],
    summary="Update a topic subscription",
)
async def update_topic_subscription(
    topicKey: TopicKeyPath,
    identifier: IdentifierPath,
    body: UpdateTopicSubscriptionRequest,
    session: SessionDep,
    principal: PrincipalDep,
) -> DataResponse[Subscription]:
    return DataResponse(data=await service.update_subscription(session, principal, topicKey, identifier, body))


@subscriber_v2.get(
    "/{subscriberId}/subscriptions", response_model=TopicSubscriptionList, summary="List a subscriber's topic subscriptions"
)
async def list_subscriber_topic_subscriptions(
    subscriberId: Annotated[str, Path(description="The subscriber's identifier")],
    cursor: CursorDep,
    session: SessionDep,
    principal: PrincipalDep,
    key: Annotated[str | None, Query(max_length=255, description="Only the subscription to this topic")] = None,
) -> dict[str, Any]:
    page, data = await service.list_subscriber_subscriptions(session, principal, subscriberId, cursor, key=key)
    return page.answer(data)


router = APIRouter()
router.include_router(v1)
router.include_router(v2)
router.include_router(subscriber_v2)
