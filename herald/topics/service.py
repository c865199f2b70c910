"""Topic use cases (Novu's v1 topics).

Adding subscribers to a topic that does not exist creates it, as Novu does.
A topic is deleted only once it has no members.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.auth import Principal
from herald.kit.errors import ConflictError, NotFoundError, ValidationFailed
from herald.kit.schemas import compact
from herald.kit.text import is_valid_identifier
from herald.kit.time import isoformat, utcnow
from herald.models import Topic
from herald.models import TopicSubscriber as Membership
from herald.subscribers.repository import SubscriberRepository
from herald.topics.repository import TopicRepository
from herald.topics.schemas import INVALID_KEY, CreateTopicRequest
from herald.topics.schemas import Topic as TopicSchema
from herald.topics.schemas import TopicSubscriber as TopicSubscriberSchema

# Members listed per topic by GET /v1/topics; GET /v1/topics/{key} lists them all.
LISTED_MEMBERS = 100


@dataclass
class Assignment:
    succeeded: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)


def to_schema(topic: Topic, subscribers: list[str]) -> TopicSchema:
    return TopicSchema.model_validate(
        compact({
            "_id": topic.id,
            "_organizationId": topic.organization_id,
            "_environmentId": topic.environment_id,
            "key": topic.key,
            "name": topic.name,
            "subscribers": subscribers,
            "createdAt": isoformat(topic.created_at),
            "updatedAt": isoformat(topic.updated_at),
        })
    )


def membership_schema(membership: Membership) -> TopicSubscriberSchema:
    return TopicSubscriberSchema.model_validate(
        {
            "_organizationId": membership.organization_id,
            "_environmentId": membership.environment_id,
            "_subscriberId": membership.subscriber_id,
            "_topicId": membership.topic_id,
            "topicKey": membership.topic_key,
            "externalSubscriberId": membership.external_subscriber_id,
        }
    )


def _exists_message(principal: Principal, key: str) -> str:
    return (
        f"Topic exists with key {key} in the environment {principal.environment_id} "
        f"of the organization {principal.organization_id}"
    )


async def require_topic(session: AsyncSession, principal: Principal, key: str) -> Topic:
    topic = await TopicRepository(session).get_by_key(principal.environment_id, key)
    if topic is None:
        raise NotFoundError(f"Topic not found for id {key} in the environment {principal.environment_id}")
    return topic


def _new_topic(principal: Principal, key: str, name: str) -> Topic:
    now = utcnow()
    return Topic(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        key=key,
        name=name,
        created_at=now,
        updated_at=now,
    )


async def create_topic(session: AsyncSession, principal: Principal, request: CreateTopicRequest) -> Topic:
    repository = TopicRepository(session)
    if await repository.get_by_key(principal.environment_id, request.key) is not None:
        raise ConflictError(_exists_message(principal, request.key))
    topic = _new_topic(principal, request.key, request.name)
    if not await repository.insert(topic):
        raise ConflictError(_exists_message(principal, request.key))
    return topic


async def list_topics(
    session: AsyncSession,
    principal: Principal,
    *,
    offset: int,
    limit: int,
    key: str | None = None,
    name: str | None = None,
) -> tuple[list[TopicSchema], int]:
    """A page of topics, each with up to ``LISTED_MEMBERS`` member subscriberIds."""
    repository = TopicRepository(session)
    topics, total = await repository.list_page(principal.environment_id, offset=offset, limit=limit, key=key, name=name)
    members = await repository.first_member_subscriber_ids(topics, LISTED_MEMBERS)
    return [to_schema(topic, members[topic.id]) for topic in topics], total


async def get_topic(session: AsyncSession, principal: Principal, key: str) -> TopicSchema:
    topic = await require_topic(session, principal, key)
    return to_schema(topic, await TopicRepository(session).member_subscriber_ids(topic))


async def rename_topic(session: AsyncSession, principal: Principal, key: str, name: str) -> TopicSchema:
    topic = await require_topic(session, principal, key)
    if topic.name != name:
        topic.name = name
        topic.updated_at = utcnow()
        await session.flush()
    return to_schema(topic, await TopicRepository(session).member_subscriber_ids(topic))


async def delete_topic(session: AsyncSession, principal: Principal, key: str) -> None:
    repository = TopicRepository(session)
    topic = await require_topic(session, principal, key)
    if await repository.has_members(topic):
        raise ConflictError(
            f"Topic with key {key} in the environment {principal.environment_id} can't be deleted "
            "as it still has subscribers assigned"
        )
    await repository.delete(topic)


async def add_subscribers(
    session: AsyncSession, principal: Principal, key: str, subscriber_ids: Sequence[str]
) -> Assignment:
    """Add the subscribers to the topic (created when missing); unknown subscriberIds are reported."""
    if not is_valid_identifier(key):
        raise ValidationFailed.field("topicKey", f"topicKey: {INVALID_KEY}", key)
    repository = TopicRepository(session)
    topic = await repository.get_by_key(principal.environment_id, key)
    if topic is None:
        topic = _new_topic(principal, key, f"Autogenerated-{key}")
        if not await repository.insert(topic):
            # Created by a concurrent request since the lookup.
            topic = await require_topic(session, principal, key)
    requested = list(dict.fromkeys(subscriber_ids))
    found = await SubscriberRepository(session).find_by_subscriber_ids(principal.environment_id, requested)
    order = {subscriber_id: index for index, subscriber_id in enumerate(requested)}
    # Members join in the order they were named.
    await repository.add_members(topic, sorted(found, key=lambda subscriber: order[subscriber.subscriber_id]))
    known = {subscriber.subscriber_id for subscriber in found}
    return Assignment(
        succeeded=[item for item in requested if item in known],
        not_found=[item for item in requested if item not in known],
    )


async def remove_subscribers(
    session: AsyncSession, principal: Principal, key: str, subscriber_ids: Sequence[str]
) -> None:
    """Remove the subscribers from the topic; a missing topic or non-member is nothing to remove."""
    repository = TopicRepository(session)
    topic = await repository.get_by_key(principal.environment_id, key)
    if topic is not None:
        await repository.remove_members(topic, subscriber_ids)


async def get_membership(session: AsyncSession, principal: Principal, key: str, subscriber_id: str) -> Membership:
    not_found = NotFoundError(
        f"Subscriber {subscriber_id} not found for topic {key} in the environment {principal.environment_id}"
    )
    topic = await TopicRepository(session).get_by_key(principal.environment_id, key)
    if topic is None:
        raise not_found
    subscriber = await SubscriberRepository(session).get_by_subscriber_id(principal.environment_id, subscriber_id)
    if subscriber is None:
        raise not_found
    membership = await TopicRepository(session).get_membership(topic, subscriber)
    if membership is None:
        raise not_found
    return membership
