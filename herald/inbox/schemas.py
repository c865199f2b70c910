"""The Inbox API's bodies and answers, named as Novu (and @novu/js 3.19) name them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from herald.kit.schemas import RequestSchema, Schema, optional_field
from herald.preferences.schemas import (
    PatchPreferenceChannelsDto,
    PreferenceLevel,
    ScheduleDto,
    SubscriberPreferenceChannels,
    SubscriberPreferenceOverrideDto,
)

Severity = Literal["high", "medium", "low", "none"]
SEVERITIES: tuple[Severity, ...] = ("high", "medium", "low", "none")
ActionType = Literal["primary", "secondary"]


class SessionSubscriber(RequestSchema):
    """The subscriber object @novu/js sends: created, or updated with the fields given."""

    subscriberId: str = ""
    firstName: str | None = None
    lastName: str | None = None
    email: str | None = None
    phone: str | None = None
    avatar: str | None = None
    locale: str | None = None
    timezone: str | None = None
    data: dict[str, Any] | None = None


class SessionRequest(RequestSchema):
    applicationIdentifier: str | None = None
    subscriberId: str | None = None
    subscriber: SessionSubscriber | None = None
    subscriberHash: str | None = None


class SeverityCounts(Schema):
    high: int = 0
    medium: int = 0
    low: int = 0
    none: int = 0


class UnreadCount(Schema):
    total: int
    severity: SeverityCounts


class Session(Schema):
    token: str
    totalUnreadCount: int
    unreadCount: UnreadCount
    removeNovuBranding: bool = False
    isDevelopmentMode: bool
    maxSnoozeDurationHours: int
    applicationIdentifier: str
    contextKeys: list[str] = Field(default_factory=list)


class InboxRedirect(Schema):
    url: str
    target: str = optional_field()


class InboxAction(Schema):
    label: str
    isCompleted: bool
    redirect: InboxRedirect = optional_field()


class InboxSubscriber(Schema):
    """Names and avatar are left out when unset: Novu's clients type them as strings, not nullable."""

    id: str
    subscriberId: str
    firstName: str | None = optional_field()
    lastName: str | None = optional_field()
    avatar: str | None = optional_field()


class InboxWorkflow(Schema):
    id: str
    identifier: str
    name: str
    critical: bool
    tags: list[str]
    severity: Severity


class InboxNotification(Schema):
    """subject, avatar, the actions and redirect are left out when unset, not null: Novu's clients
    (@novu/api's zod models among them) type them optional but not nullable."""

    id: str
    transactionId: str
    subject: str | None = optional_field()
    body: str
    to: InboxSubscriber
    isRead: bool
    isSeen: bool
    isArchived: bool
    isSnoozed: bool
    snoozedUntil: str | None = None
    deliveredAt: list[str] = Field(default_factory=list)
    createdAt: str
    readAt: str | None = None
    firstSeenAt: str | None = None
    archivedAt: str | None = None
    avatar: str | None = optional_field()
    primaryAction: InboxAction | None = optional_field()
    secondaryAction: InboxAction | None = optional_field()
    channelType: str = "in_app"
    tags: list[str] = Field(default_factory=list)
    redirect: InboxRedirect | None = optional_field()
    data: dict[str, Any] = Field(default_factory=dict)
    workflow: InboxWorkflow = optional_field()
    severity: Severity = "none"


class NotificationFilter(Schema):
    """A filter as the answer echoes it (only what was given)."""

    tags: Any = None
    read: bool | None = None
    archived: bool | None = None
    snoozed: bool | None = None
    seen: bool | None = None
    data: dict[str, Any] | None = None
    severity: Any = None
    createdGte: float | None = None
    createdLte: float | None = None


class NotificationsResponse(Schema):
    data: list[InboxNotification]
    hasMore: bool
    filter: dict[str, Any]


class FilterCount(Schema):
    count: int
    filter: dict[str, Any]


class CountsResponse(Schema):
    data: list[FilterCount]


class SnoozeRequest(RequestSchema):
    snoozeUntil: str


class InboxActionRequest(RequestSchema):
    actionType: ActionType


class BulkRequest(RequestSchema):
    """Body of the bulk routes: which notifications (tags and data narrow; ids name them)."""

    tags: Any = None
    # @novu/js sends the data filter as a JSON string.
    data: str | dict[str, Any] | None = None
    notificationIds: list[str] | None = Field(default=None, max_length=1000)


# -- preferences ------------------------------------------------------------------------------


class InboxPreferenceWorkflow(Schema):
    """The workflow of a template-level preference, as @novu/js's ``Preference.workflow``."""

    id: str
    identifier: str
    name: str
    critical: bool
    tags: list[str] = Field(default_factory=list)
    severity: Severity = "none"
    data: dict[str, Any] = optional_field()


class InboxPreference(Schema):
    """One preference as @novu/js maps it into a ``Preference``: the global one (with its schedule, when set) or a
    workflow's (``level: template``, with the workflow and where each channel's value comes from)."""

    level: PreferenceLevel
    enabled: bool
    channels: SubscriberPreferenceChannels
    overrides: list[SubscriberPreferenceOverrideDto] = optional_field()
    workflow: InboxPreferenceWorkflow = optional_field()
    schedule: ScheduleDto = optional_field()


class UpdateInboxPreferenceRequest(PatchPreferenceChannelsDto):
    """``PATCH /v1/inbox/preferences/{workflowId}``: the channels, flat (``{"email": false}``); others keep their value."""


class UpdateInboxGlobalPreferenceRequest(PatchPreferenceChannelsDto):
    """``PATCH /v1/inbox/preferences``: the global channels, flat, and the delivery ``schedule``."""

    schedule: ScheduleDto | None = None


class BulkInboxPreferenceItem(PatchPreferenceChannelsDto):
    workflowId: str = Field(min_length=1)


class BulkUpdateInboxPreferencesRequest(RequestSchema):
    preferences: list[BulkInboxPreferenceItem] = Field(max_length=100)
