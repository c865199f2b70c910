"""Topic models, named as Novu's v1 topic DTOs."""

from __future__ import annotations

from typing import Any

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
