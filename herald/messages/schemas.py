"""Message models, named as in the spec (§2.2), and the inbox request bodies."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from herald.kit.schemas import RequestSchema, Schema, optional_field

Channel = Literal["in_app", "email", "sms", "chat", "push"]
MessageStatus = Literal["sent", "error", "warning"]
MarkAs = Literal["read", "seen", "unread", "unseen"]
ButtonType = Literal["primary", "secondary"]
ActionStatus = Literal["pending", "done"]

# A bulk mark-as names at most this many messages; more is refused, not truncated.
MAX_MARK_AS_IDS = 1000
_OBJECT_ID = re.compile(r"^[0-9a-fA-F]{24}$")


class EmailBlockStyles(Schema):
    textAlign: Literal["center", "left", "right"]


class EmailBlock(Schema):
    type: Literal["button", "text"]
    content: str
    url: str = optional_field()
    styles: EmailBlockStyles = optional_field()


class MessageCTAData(Schema):
    url: str = optional_field()


class MessageButton(Schema):
    type: ButtonType
    content: str
    resultContent: str = optional_field()


class MessageActionResult(Schema):
    payload: dict[str, Any] = optional_field()
    type: ButtonType = optional_field()


class MessageAction(Schema):
    status: ActionStatus = optional_field()
    buttons: list[MessageButton] = optional_field()
    result: MessageActionResult = optional_field()


class MessageCTA(Schema):
    """Call to action; every field optional, so an empty object is a valid CTA."""

    type: Literal["redirect"] = optional_field()
    data: MessageCTAData = optional_field()
    action: MessageAction = optional_field()


class Message(Schema):
    """The Message response object (spec §2.2), plus ``updatedAt``.

    ``subscriber`` and ``template`` (optional in the spec) are not embedded.
    ``_jobId`` and ``archived`` are added for Novu's feed clients.
    ``_templateId``, ``_messageTemplateId`` and ``_feedId`` are the fields the
    spec types as "string or null": they are always present, null when unset.
    Other optional fields are left out when unset.
    """

    id: str = Field(alias="_id")
    template_id: str | None = Field(default=None, alias="_templateId")
    environment_id: str = Field(alias="_environmentId")
    message_template_id: str | None = Field(default=None, alias="_messageTemplateId")
    organization_id: str = Field(alias="_organizationId")
    notification_id: str = Field(alias="_notificationId")
    subscriber_id: str = Field(alias="_subscriberId")
    templateIdentifier: str = optional_field()
    createdAt: str
    deliveredAt: list[str] = optional_field()
    lastSeenDate: str = optional_field()
    lastReadDate: str = optional_field()
    content: list[EmailBlock] | str = optional_field()
    transactionId: str
    subject: str = optional_field()
    channel: Channel
    read: bool
    seen: bool
    snoozedUntil: str = optional_field()
    email: str = optional_field()
    phone: str = optional_field()
    directWebhookUrl: str = optional_field()
    providerId: str = optional_field()
    deviceTokens: list[str] = optional_field()
    title: str = optional_field()
    cta: MessageCTA
    feed_id: str | None = Field(default=None, alias="_feedId")
    status: MessageStatus
    errorId: str = optional_field()
    errorText: str = optional_field()
    payload: dict[str, Any] = optional_field()
    overrides: dict[str, Any] = optional_field()
    contextKeys: list[str] = optional_field()
    updatedAt: str
    # Fields Novu's inbox clients read on feed items: the job that made the
    # message, and whether it is archived (by the Inbox API, herald/inbox).
    job_id: str = optional_field(alias="_jobId")
    archived: bool = False
    # What the provider reported became of the message, once it has (herald/deliveries):
    # delivered, bounced, dropped, complained, opened or clicked, and when.
    deliveryStatus: str = optional_field()
    deliveryStatusAt: str = optional_field()


class UnseenCount(Schema):
    count: int


class DeleteMessageResponse(Schema):
    acknowledged: bool
    status: Literal["deleted"]


def _invalid_message_ids() -> PydanticCustomError:
    return PydanticCustomError(
        "message_ids",
        "must be a message id or a non-empty array of message ids (at most {limit})",
        {"limit": MAX_MARK_AS_IDS},
    )


class MarkMessagesAsRequest(RequestSchema):
    """Body of ``POST /v1/subscribers/{subscriberId}/messages/mark-as`` (spec §4.3)."""

    messageId: str | list[str] = Field(
        description=f"A message id, or an array of 1 to {MAX_MARK_AS_IDS} message ids",
        json_schema_extra={"examples": ["65f1c0ffee0000000000abcd"]},
    )
    markAs: MarkAs

    @field_validator("messageId", mode="before")
    @classmethod
    def _message_ids(cls, value: Any) -> Any:
        # Ids are ObjectIds (24 hex characters), as in Novu: a malformed id is
        # a caller's mistake worth reporting, not a message to skip silently.
        ids = value if isinstance(value, list) else [value]
        if not ids or len(ids) > MAX_MARK_AS_IDS:
            raise _invalid_message_ids()
        if not all(isinstance(item, str) and _OBJECT_ID.match(item) for item in ids):
            raise _invalid_message_ids()
        return value

    def message_ids(self) -> list[str]:
        """The ids in the order given, each once."""
        ids = [self.messageId] if isinstance(self.messageId, str) else self.messageId
        return list(dict.fromkeys(ids))


class MarkAllMessagesAsRequest(RequestSchema):
    """Body of ``POST /v1/subscribers/{subscriberId}/messages/mark-all``."""

    markAs: MarkAs
    feedIdentifier: str | list[str] | None = Field(
        default=None, description="Only messages of these feeds (matched against the message's _feedId)"
    )

    def feed_ids(self) -> list[str] | None:
        if self.feedIdentifier is None:
            return None
        return [self.feedIdentifier] if isinstance(self.feedIdentifier, str) else list(self.feedIdentifier)


class MessageActionRequest(RequestSchema):
    """Body of ``POST .../messages/{messageId}/actions/{type}``: the result of a CTA button."""

    status: ActionStatus
    payload: dict[str, Any] | None = None
