"""Subscriber models, named as in the spec (§2.3) and Novu's subscriber DTOs."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import Field, StrictBool, field_validator
from pydantic_core import PydanticCustomError

from herald.kit.schemas import RequestSchema, Schema, optional_field
from herald.kit.text import is_valid_identifier

# Novu's ChatProviderIdEnum and PushProviderIdEnum: the providers a subscriber
# keeps its own credentials for (a webhook address, device tokens...).
ChatProviderId = Literal[
    "slack",
    "discord",
    "msteams",
    "mattermost",
    "ryver",
    "zulip",
    "grafana-on-call",
    "getstream",
    "rocket-chat",
    "whatsapp-business",
    "chat-webhook",
    "novu-slack",
]
PushProviderId = Literal["fcm", "apns", "expo", "one-signal", "pushpad", "push-webhook", "pusher-beams", "appio"]
ChatOrPushProviderId = Literal[ChatProviderId, PushProviderId]
CHAT_OR_PUSH_PROVIDER_IDS: tuple[str, ...] = (*get_args(ChatProviderId), *get_args(PushProviderId))

# Novu's per-channel limit (SYSTEM_LIMITS.SUBSCRIBER_DEVICE_TOKENS).
MAX_DEVICE_TOKENS = 100

# class-validator's IsEmail is stricter than this, but a missing "@" or domain
# is what a typo produces; the provider is the final judge of deliverability.
_EMAIL = re.compile(r"^[^\s@]+@[^\s@]+\.[^\s@]+$")
# A BCP 47 / POSIX-style tag: "en", "en-US", "en_US", "zh-Hant-TW".
_LOCALE = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")


@lru_cache(maxsize=1)
def _known_timezones() -> frozenset[str]:
    return frozenset(available_timezones())


# The shape of an IANA zone name, for systems without a time zone database.
_ZONE_NAME = re.compile(r"^(?:UTC|[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)+)$")


def is_valid_timezone(value: str) -> bool:
    known = _known_timezones()
    if known:
        return value in known
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        # No database to ask (neither the system's nor the tzdata package):
        # refusing every zone would be worse than checking the name's shape.
        return bool(_ZONE_NAME.match(value))
    return True


class ChannelCredentials(Schema):
    """The credentials a subscriber holds for one chat or push provider (all optional)."""

    webhookUrl: str = optional_field()
    channel: str = optional_field()
    deviceTokens: list[str] = optional_field()
    alertUid: str = optional_field()
    title: str = optional_field()
    imageUrl: str = optional_field()
    state: str = optional_field()
    externalUrl: str = optional_field()


class ChannelSettings(Schema):
    """A subscriber's entry for one provider integration (spec §2.3)."""

    providerId: ChatOrPushProviderId
    integrationIdentifier: str = optional_field()
    credentials: ChannelCredentials
    integration_id: str = Field(alias="_integrationId")


class Subscriber(Schema):
    """The Subscriber response object (spec §2.3)."""

    id: str = Field(alias="_id")
    firstName: str | None = None
    lastName: str | None = None
    email: str | None = None
    phone: str | None = None
    avatar: str | None = None
    locale: str | None = None
    channels: list[ChannelSettings] = Field(default_factory=list)
    # Deprecated in Novu; sent only when asked for with ``includeTopics=true``.
    topics: list[str] = optional_field()
    isOnline: bool | None = None
    lastOnlineAt: str | None = None
    version: int = Field(default=0, alias="__v")
    data: dict[str, Any] | None = None
    timezone: str | None = None
    subscriberId: str
    organization_id: str = Field(alias="_organizationId")
    environment_id: str = Field(alias="_environmentId")
    deleted: bool
    createdAt: str
    updatedAt: str


class ListSubscribersResponse(Schema):
    """``GET /v2/subscribers``: a page of a search, with the cursors of the pages either side (null at an end)."""

    data: list[Subscriber]
    next: str | None
    previous: str | None
    totalCount: int
    totalCountCapped: bool


class RemoveSubscriberResponse(Schema):
    acknowledged: bool
    status: str


class ChannelCredentialsInput(RequestSchema):
    webhookUrl: str | None = Field(default=None, max_length=2048)
    channel: str | None = Field(default=None, max_length=255)
    deviceTokens: list[str] | None = None
    alertUid: str | None = Field(default=None, max_length=255)
    title: str | None = Field(default=None, max_length=255)
    imageUrl: str | None = Field(default=None, max_length=2048)
    state: str | None = Field(default=None, max_length=255)
    externalUrl: str | None = Field(default=None, max_length=2048)

    @field_validator("deviceTokens")
    @classmethod
    def _tokens_are_not_blank(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not token.strip() for token in value):
            raise PydanticCustomError("device_token", "must be non-empty strings")
        return value

    def given(self) -> dict[str, Any]:
        """The credential fields the caller sent with a value."""
        return self.model_dump(exclude_none=True)


class UpdateSubscriberChannelRequest(RequestSchema):
    """``{providerId, integrationIdentifier?, credentials}``: one provider's credentials."""

    providerId: ChatOrPushProviderId
    integrationIdentifier: str | None = Field(default=None, min_length=1, max_length=200)
    credentials: ChannelCredentialsInput


class SubscriberFieldsRequest(RequestSchema):
    """The subscriber attributes a caller may set; every one nullable, only the given ones change."""

    firstName: str | None = Field(default=None, max_length=255)
    lastName: str | None = Field(default=None, max_length=255)
    email: str | None = Field(default=None, max_length=320)
    phone: str | None = Field(default=None, max_length=64)
    avatar: str | None = Field(default=None, max_length=2048)
    locale: str | None = Field(default=None, max_length=32)
    timezone: str | None = Field(default=None, max_length=64)
    data: dict[str, Any] | None = None
    channels: list[UpdateSubscriberChannelRequest] | None = None

    @field_validator("email")
    @classmethod
    def _email(cls, value: str | None) -> str | None:
        if value is not None and not _EMAIL.match(value):
            raise PydanticCustomError("email", "must be an email address")
        return value

    @field_validator("locale")
    @classmethod
    def _locale(cls, value: str | None) -> str | None:
        if value is not None and not _LOCALE.match(value):
            raise PydanticCustomError("locale", "must be a locale such as en or en-US")
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        if value is not None and not is_valid_timezone(value):
            raise PydanticCustomError("timezone", "must be an IANA time zone such as Europe/Paris")
        return value


class CreateSubscriberRequest(SubscriberFieldsRequest):
    subscriberId: str = Field(max_length=255)

    @field_validator("subscriberId")
    @classmethod
    def _subscriber_id(cls, value: str) -> str:
        if not value:
            raise PydanticCustomError("subscriber_id", "SubscriberId is required")
        if not is_valid_identifier(value):
            raise PydanticCustomError(
                "subscriber_id",
                "must contain only letters, digits, hyphens (-), underscores (_), colons (:) and dots (.), "
                "or be an email address",
            )
        return value


class BulkCreateSubscribersRequest(RequestSchema):
    """Body of ``POST /v1/subscribers/bulk``: up to 500 subscribers, each created or updated as ``POST /v1/subscribers`` does."""

    subscribers: list[CreateSubscriberRequest] = Field(max_length=500)


class ChangedSubscriber(Schema):
    subscriberId: str


class FailedSubscriber(Schema):
    message: str
    subscriberId: str | None = None


class BulkCreateSubscribersResponse(Schema):
    """What became of each subscriber sent, in the order sent (a subscriberId sent twice is created, then updated)."""

    updated: list[ChangedSubscriber]
    created: list[ChangedSubscriber]
    failed: list[FailedSubscriber]


class UpdateSubscriberRequest(SubscriberFieldsRequest):
    """Body of ``PUT /v1/subscribers/{subscriberId}`` and ``PATCH /v2/subscribers/{subscriberId}``."""


class UpdateSubscriberOnlineStatusRequest(RequestSchema):
    isOnline: StrictBool
