"""Topic models, named as Novu's v1 topic DTOs."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from herald.kit.schemas import RequestSchema, Schema, optional_field
from herald.kit.text import is_valid_identifier

INVALID_KEY = (
    "must contain only letters (a-z, A-Z), digits, hyphens (-), underscores (_), colons (:) "
    "and dots (.), or be an email address"
)


def _strip(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


class Topic(Schema):
    id: str = Field(alias="_id")
    organization_id: str = Field(alias="_organizationId")
    environment_id: str = Field(alias="_environmentId")
    key: str
    name: str = optional_field()
    subscribers: list[str] = Field(default_factory=list, description="subscriberIds of the topic's members")
    createdAt: str = optional_field()
    updatedAt: str = optional_field()


class CreatedTopic(Schema):
    id: str = Field(alias="_id")
    key: str


class FailedAssignments(Schema):
    notFound: list[str] = optional_field()


class AssignSubscribersResult(Schema):
    succeeded: list[str]
    failed: FailedAssignments = optional_field()


class TopicSubscriber(Schema):
    """One subscriber's membership of one topic."""

    organization_id: str = Field(alias="_organizationId")
    environment_id: str = Field(alias="_environmentId")
    subscriber_id: str = Field(alias="_subscriberId")
    topic_id: str = Field(alias="_topicId")
    topicKey: str
    externalSubscriberId: str


class CreateTopicRequest(RequestSchema):
    key: str = Field(min_length=1, max_length=255)
    name: str = Field(min_length=1, max_length=255)

    _strip_strings = field_validator("key", "name", mode="before")(_strip)

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        if not is_valid_identifier(value):
            raise PydanticCustomError("topic_key", INVALID_KEY)
        return value


class RenameTopicRequest(RequestSchema):
    name: str = Field(min_length=1, max_length=255)

    _strip_name = field_validator("name", mode="before")(_strip)


class TopicSubscribersRequest(RequestSchema):
    """``{subscribers: [subscriberId, ...]}``."""

    subscribers: list[str]


# --- Novu's v2 topic and subscription DTOs -------------------------------------------------


class TopicV2(Schema):
    """``TopicResponseDto``."""

    id: str = Field(alias="_id")
    key: str
    name: str = optional_field()
    createdAt: str = optional_field()
    updatedAt: str = optional_field()


class DeleteTopicResponse(Schema):
    acknowledged: bool


class CreateUpdateTopicRequest(CreateTopicRequest):
    """``{key, name?}``: the name of a new topic defaults to its key."""

    name: str = Field(default=None, min_length=1, max_length=255)  # type: ignore[assignment]


class UpdateTopicRequest(RenameTopicRequest):
    pass


class SubscriberSummary(Schema):
    id: str = Field(alias="_id")
    subscriberId: str
    avatar: str | None = None
    firstName: str | None = None
    lastName: str | None = None
    email: str | None = None


class TopicSummary(Schema):
    id: str = Field(alias="_id")
    key: str
    name: str = optional_field()


class PreferenceWorkflow(Schema):
    id: str
    identifier: str
    name: str
    critical: bool
    severity: str
    tags: list[str] = Field(default_factory=list)


class SubscriptionPreference(Schema):
    """``SubscriptionPreferenceDto``: one stored workflow rule of a subscription."""

    subscriptionId: str
    enabled: bool
    workflow: PreferenceWorkflow | None = None
    condition: dict[str, Any] = optional_field()


class Subscription(Schema):
    """``SubscriptionResponseDto`` (create, update and delete answers)."""

    id: str = Field(alias="_id")
    topic: TopicSummary
    subscriber: SubscriberSummary | None
    createdAt: str
    updatedAt: str
    identifier: str
    name: str = optional_field()
    preferences: list[SubscriptionPreference] = Field(default_factory=list)
    contextKeys: list[str] = Field(default_factory=list)


class TopicSubscription(Schema):
    """``TopicSubscriptionResponseDto`` (the lists)."""

    id: str = Field(alias="_id")
    identifier: str
    createdAt: str
    topic: TopicV2
    subscriber: SubscriberSummary
    contextKeys: list[str] = Field(default_factory=list)
    preferences: list[SubscriptionPreference] = Field(default_factory=list)


class SubscriptionDetails(Schema):
    """``SubscriptionDetailsResponseDto`` (one subscription)."""

    id: str
    identifier: str
    name: str = optional_field()
    preferences: list[SubscriptionPreference] = Field(default_factory=list)
    contextKeys: list[str] = Field(default_factory=list)


class SubscriptionMeta(Schema):
    totalCount: int
    successful: int
    failed: int


class SubscriptionError(Schema):
    subscriberId: str
    code: str
    message: str


class SubscriptionsResult(Schema):
    """``CreateSubscriptionsResponseDto`` and ``DeleteTopicSubscriptionsResponseDto``."""

    data: list[Subscription]
    meta: SubscriptionMeta
    errors: list[SubscriptionError] = optional_field()


class CursorList(Schema):
    """The envelope of Novu's v2 lists."""

    next: str | None
    previous: str | None
    totalCount: int
    totalCountCapped: bool


class TopicList(CursorList):
    data: list[TopicV2]


class TopicSubscriptionList(CursorList):
    data: list[TopicSubscription]


# A subscriberId as a request names one: never empty.
SubscriberIdText = Annotated[str, Field(min_length=1, max_length=255)]


class SubscriberIdentifier(RequestSchema):
    """One subscription to make: its subscriber, and the identifier and name it gets."""

    subscriberId: str = Field(min_length=1, max_length=255)
    identifier: str | None = Field(default=None, min_length=1, max_length=255)
    name: str | None = Field(default=None, max_length=255)


class SubscriptionToRemove(RequestSchema):
    identifier: str | None = Field(default=None, min_length=1, max_length=255)
    subscriberId: str | None = Field(default=None, min_length=1, max_length=255)


class PreferenceFilter(RequestSchema):
    workflowIds: list[str] = Field(default_factory=list, max_length=100)
    tags: list[str] = Field(default_factory=list, max_length=100)


class WorkflowPreferenceRule(RequestSchema):
    """``{workflowId, enabled?, condition?}`` or ``{filter: {workflowIds, tags}, enabled?, condition?}``."""

    workflowId: str | None = Field(default=None, min_length=1, max_length=300)
    filter: PreferenceFilter | None = None
    enabled: bool = True
    condition: dict[str, Any] | None = None


PreferenceRule = Annotated[str, Field(min_length=1, max_length=300)] | WorkflowPreferenceRule


class ContextReference(RequestSchema):
    id: str = Field(min_length=1, max_length=100)
    data: dict[str, Any] | None = None


ContextValue = str | ContextReference


class CreateTopicSubscriptionsRequest(RequestSchema):
    subscriberIds: list[SubscriberIdText] = Field(default_factory=list, max_length=100)
    subscriptions: list[SubscriberIdText | SubscriberIdentifier] = Field(default_factory=list, max_length=100)
    name: str | None = Field(default=None, max_length=255)
    context: dict[str, ContextValue] | None = None
    preferences: list[PreferenceRule] | None = Field(default=None, max_length=100)


class DeleteTopicSubscriptionsRequest(RequestSchema):
    subscriberIds: list[SubscriberIdText] = Field(default_factory=list, max_length=100)
    subscriptions: list[SubscriberIdText | SubscriptionToRemove] = Field(default_factory=list, max_length=100)


class UpdateTopicSubscriptionRequest(RequestSchema):
    name: str | None = Field(default=None, max_length=255)
    preferences: list[PreferenceRule] | None = Field(default=None, max_length=100)
