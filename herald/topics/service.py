"""Topic use cases (Novu's v1 topics).

Adding subscribers to a topic that does not exist creates it, as Novu does.
A topic is deleted only once it has no members.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.contexts import service as contexts
from herald.contexts.service import context_keys, parse_context
from herald.kit.auth import Principal
from herald.kit.cursor import CursorPage, CursorParams
from herald.kit.errors import ConflictError, NotFoundError, ValidationFailed
from herald.kit.ids import new_id
from herald.kit.schemas import compact
from herald.kit.text import is_valid_identifier
from herald.kit.time import isoformat, utcnow
from herald.models import Subscriber, Topic, Workflow
from herald.models import TopicSubscriber as Membership
from herald.subscribers.repository import SubscriberRepository
from herald.topics.repository import TopicRepository, default_identifier
from herald.topics.schemas import (
    INVALID_KEY,
    CreateTopicRequest,
    CreateTopicSubscriptionsRequest,
    CreateUpdateTopicRequest,
    DeleteTopicSubscriptionsRequest,
    SubscriberIdentifier,
    SubscriberSummary,
    Subscription,
    SubscriptionDetails,
    SubscriptionError,
    SubscriptionMeta,
    SubscriptionPreference,
    SubscriptionsResult,
    SubscriptionToRemove,
    TopicSubscription,
    TopicV2,
    UpdateTopicSubscriptionRequest,
    WorkflowPreferenceRule,
)
from herald.topics.schemas import Topic as TopicSchema
from herald.topics.schemas import TopicSubscriber as TopicSubscriberSchema

# Members listed per topic by GET /v1/topics; GET /v1/topics/{key} lists them all.
LISTED_MEMBERS = 100
# Subscriptions made or removed by one v2 request, as Novu allows.
MAX_SUBSCRIPTIONS = 100


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


# --- The console's Topics pages ----------------------------------------------------------


@dataclass
class TopicsPage:
    topics: list[Topic]
    members: dict[str, int]
    total: int


@dataclass
class MembersPage:
    topic: Topic
    members: list[Membership]
    # The membership to read the next page after; None on the last page.
    next: str | None


async def topics_with_counts(session: AsyncSession, principal: Principal, *, offset: int, limit: int) -> TopicsPage:
    """A page of the environment's topics (oldest first) with how many members each has."""
    repository = TopicRepository(session)
    topics, total = await repository.list_page(principal.environment_id, offset=offset, limit=limit)
    return TopicsPage(list(topics), await repository.member_counts(topics), total)


async def members_page(session: AsyncSession, principal: Principal, key: str, *, after: str | None, limit: int) -> MembersPage:
    """A page of the topic's members, in the order they joined (keyset on the membership)."""
    topic = await require_topic(session, principal, key)
    rows = await TopicRepository(session).member_page(topic, after_id=after, limit=limit + 1)
    return MembersPage(topic, rows[:limit], rows[limit - 1].id if len(rows) > limit else None)


# --- Novu's v2 topics and subscriptions ----------------------------------------------------
#
# The same rows as v1: a v1 member is a v2 subscription (with the default
# identifier) and the other way round.


def topic_v2(topic: Topic) -> TopicV2:
    return TopicV2.model_validate(
        compact({
            "_id": topic.id,
            "key": topic.key,
            "name": topic.name,
            "createdAt": isoformat(topic.created_at),
            "updatedAt": isoformat(topic.updated_at),
        })
    )


async def upsert_topic(
    session: AsyncSession, principal: Principal, request: CreateUpdateTopicRequest, *, fail_if_exists: bool
) -> tuple[Topic, bool]:
    """The topic with this key, created when missing (named as asked, or after its key) or renamed
    when a name is given; True when it was created. ``fail_if_exists`` makes an existing key a 409."""
    repository = TopicRepository(session)
    topic = await repository.get_by_key(principal.environment_id, request.key)
    if topic is None:
        topic = _new_topic(principal, request.key, request.name or request.key)
        if await repository.insert(topic):
            return topic, True
        topic = await require_topic(session, principal, request.key)
    if fail_if_exists:
        # novu-py reads the existing topic from the 409's body (TopicResponseDtoError.data).
        raise ConflictError(_exists_message(principal, request.key), **topic_v2(topic).model_dump(by_alias=True, exclude_none=True))
    if request.name is not None and request.name != topic.name:
        topic.name = request.name
        topic.updated_at = utcnow()
        await session.flush()
    return topic, False


async def list_topics_v2(
    session: AsyncSession, principal: Principal, params: CursorParams, *, key: str | None, name: str | None
) -> CursorPage:
    return await TopicRepository(session).topic_page(principal.environment_id, params, key=key, name=name)


async def update_topic_v2(session: AsyncSession, principal: Principal, key: str, name: str) -> Topic:
    topic = await require_topic(session, principal, key)
    if topic.name != name:
        topic.name = name
        topic.updated_at = utcnow()
        await session.flush()
    return topic


async def delete_topic_v2(session: AsyncSession, principal: Principal, key: str) -> None:
    """Deletes the topic and its subscriptions (v1's delete refuses a topic with members)."""
    topic = await require_topic(session, principal, key)
    await TopicRepository(session).delete_with_subscriptions(topic)


def _stored_rules(rules: Sequence[str | WorkflowPreferenceRule] | None) -> list[dict[str, Any]] | None:
    """Preferences as kept: ``{workflowId | filter, enabled, condition}``; a bare string names a workflow."""
    if rules is None:
        return None
    stored: list[dict[str, Any]] = []
    for index, rule in enumerate(rules):
        if isinstance(rule, str):
            stored.append({"workflowId": rule, "enabled": True})
            continue
        if rule.workflowId is None and rule.filter is None:
            raise ValidationFailed.field(
                f"preferences[{index}]", f"preferences[{index}] needs a workflowId or a filter", None
            )
        entry: dict[str, Any] = {"enabled": rule.enabled}
        if rule.workflowId is not None:
            entry["workflowId"] = rule.workflowId
        else:
            assert rule.filter is not None
            entry["filter"] = rule.filter.model_dump()
        if rule.condition is not None:
            entry["condition"] = rule.condition
        stored.append(entry)
    return stored


class _Answers:
    """Shapes subscriptions as answers, with what they refer to read once for the lot."""

    def __init__(self, session: AsyncSession, principal: Principal) -> None:
        self.session = session
        self.principal = principal
        self.workflows: dict[str, Workflow] = {}
        self.subscribers: dict[str, Subscriber] = {}
        self.topics: dict[str, Topic] = {}

    async def load(self, rows: Sequence[Membership], topics: Sequence[Topic] = ()) -> _Answers:
        environment_id = self.principal.environment_id
        self.topics.update((topic.id, topic) for topic in topics)
        missing_topics = [row.topic_id for row in rows if row.topic_id not in self.topics]
        self.topics.update(await TopicRepository(self.session).topics_by_ids(environment_id, missing_topics))
        subscriber_ids = list({row.subscriber_id for row in rows})
        found = await SubscriberRepository(self.session).get_by_ids(environment_id, subscriber_ids)
        self.subscribers.update((subscriber.id, subscriber) for subscriber in found)
        names = [rule["workflowId"] for row in rows for rule in row.preferences or [] if rule.get("workflowId")]
        self.workflows = await TopicRepository(self.session).workflows_named(environment_id, names)
        return self

    def preferences(self, row: Membership) -> list[SubscriptionPreference]:
        answers = []
        for rule in row.preferences or []:
            workflow = self.workflows.get(rule.get("workflowId") or "")
            answers.append(
                SubscriptionPreference.model_validate(
                    compact({
                        "subscriptionId": row.id,
                        "enabled": bool(rule.get("enabled", True)),
                        "workflow": None
                        if workflow is None
                        else {
                            "id": workflow.id,
                            "identifier": workflow.trigger_identifier,
                            "name": workflow.name,
                            "critical": workflow.critical,
                            "severity": workflow.severity,
                            "tags": list(workflow.tags or []),
                        },
                        "condition": rule.get("condition"),
                    })
                )
            )
        return answers

    def subscriber(self, row: Membership) -> SubscriberSummary:
        subscriber = self.subscribers.get(row.subscriber_id)
        if subscriber is None:  # removed since; the membership still names it
            return SubscriberSummary.model_validate({"_id": row.subscriber_id, "subscriberId": row.external_subscriber_id})
        return SubscriberSummary.model_validate({
            "_id": subscriber.id,
            "subscriberId": subscriber.subscriber_id,
            "avatar": subscriber.avatar,
            "firstName": subscriber.first_name,
            "lastName": subscriber.last_name,
            "email": subscriber.email,
        })

    def _times(self, row: Membership) -> tuple[str, str]:
        topic = self.topics.get(row.topic_id)
        fallback = topic.created_at if topic is not None else utcnow()
        return isoformat(row.created_at or fallback) or "", isoformat(row.updated_at or row.created_at or fallback) or ""

    def _identifier(self, row: Membership) -> str:
        return row.identifier or default_identifier(row.topic_key, row.external_subscriber_id)

    def subscription(self, row: Membership) -> Subscription:
        topic = self.topics.get(row.topic_id)
        created, updated = self._times(row)
        return Subscription.model_validate(
            compact({
                "_id": row.id,
                "topic": compact({"_id": row.topic_id, "key": row.topic_key, "name": topic.name if topic else None}),
                "subscriber": self.subscriber(row),
                "createdAt": created,
                "updatedAt": updated,
                "identifier": self._identifier(row),
                "name": row.name,
                "preferences": self.preferences(row),
                "contextKeys": list(row.context_keys or []),
            })
        )

    def topic_subscription(self, row: Membership) -> TopicSubscription:
        topic = self.topics[row.topic_id]
        created, _ = self._times(row)
        return TopicSubscription.model_validate({
            "_id": row.id,
            "identifier": self._identifier(row),
            "createdAt": created,
            "topic": topic_v2(topic),
            "subscriber": self.subscriber(row),
            "contextKeys": list(row.context_keys or []),
            "preferences": self.preferences(row),
        })

    def details(self, row: Membership) -> SubscriptionDetails:
        return SubscriptionDetails.model_validate(
            compact({
                "id": row.id,
                "identifier": self._identifier(row),
                "name": row.name,
                "preferences": self.preferences(row),
                "contextKeys": list(row.context_keys or []),
            })
        )


async def create_subscriptions(
    session: AsyncSession, principal: Principal, key: str, request: CreateTopicSubscriptionsRequest
) -> SubscriptionsResult:
    """Subscribe the named subscribers (the topic is created when missing, named ``request.name``).

    A subscriber already subscribed keeps its subscription, updated with the
    name, preferences and context given. Unknown subscribers are reported in
    ``errors`` (SUBSCRIBER_NOT_FOUND), the others succeed.
    """
    if not is_valid_identifier(key):
        raise ValidationFailed.field("topicKey", f"topicKey: {INVALID_KEY}", key)
    wanted: dict[str, SubscriberIdentifier] = {}
    for item in [*request.subscriberIds, *request.subscriptions]:
        entry = SubscriberIdentifier(subscriberId=item) if isinstance(item, str) else item
        wanted.setdefault(entry.subscriberId, entry)
    if not wanted:
        raise ValidationFailed.field("subscriptions", "subscriptions must name at least one subscriber", [])
    if len(wanted) > MAX_SUBSCRIPTIONS:
        raise ValidationFailed.field("subscriptions", f"at most {MAX_SUBSCRIPTIONS} subscriptions at once", len(wanted))
    entries = parse_context(request.context or {})
    keys = context_keys(entries)
    preferences = _stored_rules(request.preferences)

    repository = TopicRepository(session)
    topic = await repository.get_by_key(principal.environment_id, key)
    if topic is None:
        topic = _new_topic(principal, key, request.name or key)
        if not await repository.insert(topic):
            topic = await require_topic(session, principal, key)
    await contexts.resolve(session, principal.environment_id, principal.organization_id, entries)

    found = await SubscriberRepository(session).find_by_subscriber_ids(principal.environment_id, list(wanted))
    by_external = {subscriber.subscriber_id: subscriber for subscriber in found}
    existing = await repository.subscriptions_of(topic, [subscriber.id for subscriber in found])
    now = utcnow()
    rows: list[Membership] = []
    errors: list[SubscriptionError] = []
    for subscriber_id, entry in wanted.items():
        subscriber = by_external.get(subscriber_id)
        if subscriber is None:
            errors.append(
                SubscriptionError(
                    subscriberId=subscriber_id,
                    code="SUBSCRIBER_NOT_FOUND",
                    message=f"Subscriber with id '{subscriber_id}' not found",
                )
            )
            continue
        row = existing.get(subscriber.id)
        identifier = entry.identifier or (row.identifier if row is not None else None) or default_identifier(key, subscriber_id)
        if await repository.identifier_taken(topic, identifier, excluding_id=row.id if row is not None else None):
            errors.append(
                SubscriptionError(
                    subscriberId=subscriber_id,
                    code="SUBSCRIPTION_IDENTIFIER_TAKEN",
                    message=f"Another subscription of topic '{key}' has the identifier '{identifier}'",
                )
            )
            continue
        if row is None:
            row = Membership(
                id=new_id(),
                topic_id=topic.id,
                environment_id=topic.environment_id,
                organization_id=topic.organization_id,
                subscriber_id=subscriber.id,
                external_subscriber_id=subscriber.subscriber_id,
                topic_key=topic.key,
                created_at=now,
            )
            repository.add_subscription(row)
        row.identifier = identifier
        if entry.name is not None:
            row.name = entry.name
        if preferences is not None:
            row.preferences = preferences
        if request.context is not None:
            row.context_keys = keys
        row.updated_at = now
        rows.append(row)
    await session.flush()
    answers = await _Answers(session, principal).load(rows, [topic])
    return SubscriptionsResult(
        data=[answers.subscription(row) for row in rows],
        meta=SubscriptionMeta(totalCount=len(wanted), successful=len(rows), failed=len(errors)),
        errors=errors,
    )


async def list_subscriptions(
    session: AsyncSession, principal: Principal, key: str, params: CursorParams, *, subscriber_id: str | None
) -> tuple[CursorPage, list[TopicSubscription]]:
    topic = await require_topic(session, principal, key)
    page = await TopicRepository(session).subscription_page(
        principal.environment_id, params, topic=topic, external_subscriber_id=subscriber_id
    )
    answers = await _Answers(session, principal).load(page.items, [topic])
    return page, [answers.topic_subscription(row) for row in page.items]


async def list_subscriber_subscriptions(
    session: AsyncSession, principal: Principal, subscriber_id: str, params: CursorParams, *, key: str | None
) -> tuple[CursorPage, list[TopicSubscription]]:
    """The subscriber's subscriptions across topics (``GET /v2/subscribers/{id}/subscriptions``)."""
    subscriber = await SubscriberRepository(session).get_by_subscriber_id(principal.environment_id, subscriber_id)
    if subscriber is None:
        raise NotFoundError(f"Subscriber: {subscriber_id} was not found")
    page = await TopicRepository(session).subscription_page(
        principal.environment_id, params, subscriber=subscriber, topic_key=key
    )
    answers = await _Answers(session, principal).load(page.items)
    return page, [answers.topic_subscription(row) for row in page.items if row.topic_id in answers.topics]


async def _require_subscription(session: AsyncSession, principal: Principal, key: str, identifier: str) -> tuple[Topic, Membership]:
    topic = await require_topic(session, principal, key)
    row = await TopicRepository(session).subscription_by_identifier(topic, identifier)
    if row is None:
        raise NotFoundError(f"Subscription with identifier '{identifier}' not found for topic '{key}'")
    return topic, row


async def get_subscription(session: AsyncSession, principal: Principal, key: str, identifier: str) -> SubscriptionDetails:
    topic, row = await _require_subscription(session, principal, key, identifier)
    return (await _Answers(session, principal).load([row], [topic])).details(row)


async def update_subscription(
    session: AsyncSession, principal: Principal, key: str, identifier: str, request: UpdateTopicSubscriptionRequest
) -> Subscription:
    topic, row = await _require_subscription(session, principal, key, identifier)
    if request.name is not None:
        row.name = request.name
    preferences = _stored_rules(request.preferences)
    if preferences is not None:
        row.preferences = preferences
    row.updated_at = utcnow()
    await session.flush()
    return (await _Answers(session, principal).load([row], [topic])).subscription(row)


async def delete_subscriptions(
    session: AsyncSession, principal: Principal, key: str, request: DeleteTopicSubscriptionsRequest
) -> SubscriptionsResult:
    """Remove the named subscriptions: by identifier, or every one of a subscriber; what names
    nothing is reported in ``errors`` (SUBSCRIPTION_NOT_FOUND)."""
    topic = await require_topic(session, principal, key)
    repository = TopicRepository(session)
    named = [
        SubscriptionToRemove(subscriberId=item) if isinstance(item, str) else item
        for item in [*request.subscriberIds, *request.subscriptions]
    ]
    if not named:
        raise ValidationFailed.field("subscriptions", "subscriptions must name at least one subscription", [])
    subscriber_ids = [item.subscriberId for item in named if item.subscriberId]
    found = await SubscriberRepository(session).find_by_subscriber_ids(principal.environment_id, subscriber_ids)
    by_external = {subscriber.subscriber_id: subscriber for subscriber in found}
    of_subscribers = await repository.subscriptions_of(topic, [subscriber.id for subscriber in found])
    removed: dict[str, Membership] = {}
    errors: list[SubscriptionError] = []
    for item in named:
        row: Membership | None = None
        if item.identifier is not None:
            row = await repository.subscription_by_identifier(topic, item.identifier)
            if row is not None and item.subscriberId is not None and row.external_subscriber_id != item.subscriberId:
                row = None
        elif item.subscriberId is not None:
            subscriber = by_external.get(item.subscriberId)
            row = of_subscribers.get(subscriber.id) if subscriber is not None else None
        if row is None:
            name = item.subscriberId or item.identifier or ""
            errors.append(
                SubscriptionError(
                    subscriberId=name, code="SUBSCRIPTION_NOT_FOUND", message=f"No subscription of topic '{key}' for '{name}'"
                )
            )
            continue
        removed[row.id] = row
    answers = await _Answers(session, principal).load(list(removed.values()), [topic])
    data = [answers.subscription(row) for row in removed.values()]
    await repository.delete_subscriptions(list(removed.values()))
    return SubscriptionsResult(
        data=data, meta=SubscriptionMeta(totalCount=len(named), successful=len(data), failed=len(errors)), errors=errors
    )
