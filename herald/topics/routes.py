from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.pagination import MAX_PAGE_SIZE, PageParams, paginated
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, PaginatedResponse
from herald.topics import service
from herald.topics.schemas import (
    AssignSubscribersResult,
    CreatedTopic,
    CreateTopicRequest,
    FailedAssignments,
    RenameTopicRequest,
    Topic,
    TopicSubscriber,
    TopicSubscribersRequest,
)

TopicKeyPath = Annotated[str, Path(description="The topic's key")]

router = APIRouter(prefix="/v1/topics", tags=["Topics"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, response_model=DataResponse[CreatedTopic], summary="Create a topic")
async def create_topic(body: CreateTopicRequest, session: SessionDep, principal: PrincipalDep) -> DataResponse[CreatedTopic]:
    topic = await service.create_topic(session, principal, body)
    return DataResponse(data=CreatedTopic(id=topic.id, key=topic.key))


@router.get("", response_model=PaginatedResponse[Topic], summary="List topics")
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


@router.get("/{topicKey}", response_model=DataResponse[Topic], summary="Get a topic")
async def get_topic(topicKey: TopicKeyPath, session: SessionDep, principal: PrincipalDep) -> DataResponse[Topic]:
    """The topic with the subscriberIds of all its members, in joining order."""
    return DataResponse(data=await service.get_topic(session, principal, topicKey))


@router.patch("/{topicKey}", response_model=DataResponse[Topic], summary="Rename a topic")
async def rename_topic(
    topicKey: TopicKeyPath, body: RenameTopicRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[Topic]:
    return DataResponse(data=await service.rename_topic(session, principal, topicKey, body.name))


@router.delete("/{topicKey}", status_code=204, response_class=Response, summary="Delete a topic")
async def delete_topic(topicKey: TopicKeyPath, session: SessionDep, principal: PrincipalDep) -> Response:
    """Deletes a topic that has no members; one that still has members answers 409."""
    await service.delete_topic(session, principal, topicKey)
    return Response(status_code=204)


@router.post(
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


@router.post(
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


@router.get(
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
