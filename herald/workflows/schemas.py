"""Workflow models, named as in the spec (§2.4), and the Novu v1 request bodies."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PlainValidator,
    TypeAdapter,
    WithJsonSchema,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError

from herald.integrations.schemas import StepFilter
from herald.kit.schemas import RequestSchema, Schema, optional_field

# Step types Herald runs. ``trigger`` is the implicit first step of every
# workflow, so it is refused rather than stored and skipped. A ``custom`` step
# of a workflow made through the API passes its controls on (engine/steps/custom.py).
STEP_TYPES: tuple[str, ...] = (
    "in_app", "email", "sms", "chat", "push", "digest", "delay", "throttle", "http_request", "custom",
)
CHANNEL_STEP_TYPES = frozenset({"in_app", "email", "sms", "chat", "push"})
Severity = Literal["high", "medium", "low", "none"]
ACTION_STEP_TYPES = frozenset({"digest", "delay", "throttle"})
UNSUPPORTED_STEP_TYPES = frozenset({"trigger"})

TimeUnit = Literal["seconds", "minutes", "hours", "days", "weeks", "months"]
WeekDay = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
Ordinal = Literal["1", "2", "3", "4", "5", "last"]
OrdinalValue = Literal[
    "day", "weekday", "weekend", "sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"
]

# Herald's trigger identifiers: what slugify() makes, plus the separators SDKs
# commonly use in hand-written identifiers.
TRIGGER_IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
_AT_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


def _number(value: Any, *, positive: bool) -> float | int:
    # bool is an int in Python but never an amount; strings are refused as Novu's @IsNumber does.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PydanticCustomError("number_type", "must be a number")
    if value != value or value in (float("inf"), float("-inf")):
        raise PydanticCustomError("number_type", "must be a finite number")
    if positive and value <= 0:
        raise PydanticCustomError("greater_than", "must be greater than 0")
    if not positive and value < 0:
        raise PydanticCustomError("greater_than_equal", "must be greater than or equal to 0")
    return value


PositiveNumber = Annotated[
    float | int,
    PlainValidator(lambda value: _number(value, positive=True)),
    WithJsonSchema({"type": "number", "exclusiveMinimum": 0}),
]
def _interval(value: Any) -> int:
    """A timed digest's ``amount``: how many ``unit``s between two runs, so a whole number."""
    number = _number(value, positive=False)
    if isinstance(number, float):
        if not number.is_integer():
            raise PydanticCustomError("whole_number", "must be a whole number of at least 1")
        number = int(number)
    if number < 1:
        raise PydanticCustomError("whole_number", "must be a whole number of at least 1")
    return number


Interval = Annotated[int, PlainValidator(_interval), WithJsonSchema({"type": "integer", "minimum": 1})]


class _Strict(Schema):
    """Metadata drives scheduling: an unknown key is refused, never stored and ignored."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True, extra="forbid")


class TimedConfig(_Strict):
    atTime: str | None = Field(
        default=None,
        description=(
            'Time of day, "HH:MM" (24-hour), in the subscriber\'s timezone (UTC when the subscriber has none)'
        ),
    )
    weekDays: list[WeekDay] | None = None
    monthDays: list[str] | None = Field(
        default=None, description='Days of the month, "1" to "31", or "-1" for the last day of each month'
    )
    ordinal: Ordinal | None = None
    ordinalValue: OrdinalValue | None = None
    monthlyType: Literal["each", "on"] | None = None

    @field_validator("atTime")
    @classmethod
    def _at_time(cls, value: str | None) -> str | None:
        if value is not None and not _AT_TIME.match(value):
            raise PydanticCustomError("at_time", 'must be a time of day as "HH:MM", from "00:00" to "23:59"')
        return value

    @field_validator("monthDays", mode="before")
    @classmethod
    def _month_days(cls, value: Any) -> Any:
        """Novu's dashboard sends numbers, the spec types them as strings: both are taken, strings are kept."""
        if not isinstance(value, list):
            return value
        days: list[Any] = []
        for item in value:
            day = str(item) if isinstance(item, int) and not isinstance(item, bool) else item
            if not isinstance(day, str) or not re.fullmatch(r"-?\d{1,2}", day) or not (1 <= int(day) <= 31 or day == "-1"):
                raise PydanticCustomError("month_day", 'each day must be "1" to "31", or "-1" for the last day')
            days.append(str(int(day)))
        return days

    @field_validator("ordinal", mode="before")
    @classmethod
    def _ordinal(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value


class DigestRegularMetadata(_Strict):
    type: Literal["regular", "backoff"]
    amount: PositiveNumber
    unit: TimeUnit
    digestKey: str | None = None
    backoff: bool | None = None
    backoffAmount: PositiveNumber | None = None
    backoffUnit: TimeUnit | None = None
    updateMode: bool | None = None


class DigestTimedMetadata(_Strict):
    type: Literal["timed"]
    amount: Interval | None = Field(default=None, description="Run every amount units (default 1)")
    unit: TimeUnit | None = None
    digestKey: str | None = None
    timed: TimedConfig | None = None


class DelayRegularMetadata(_Strict):
    type: Literal["regular"]
    amount: PositiveNumber
    unit: TimeUnit


class DelayScheduledMetadata(_Strict):
    type: Literal["scheduled"]
    delayPath: str = Field(min_length=1, description="Payload key holding the ISO 8601 time to wait for")


class ThrottleFixedMetadata(_Strict):
    type: Literal["fixed"]
    amount: PositiveNumber
    unit: TimeUnit
    threshold: int = Field(default=1, ge=1, description="Runs let through per window (default 1)")
    throttleKey: str | None = Field(default=None, description="Payload path whose value is counted apart")


class ThrottleDynamicMetadata(_Strict):
    type: Literal["dynamic"]
    dynamicKey: str = Field(min_length=1, description="Payload path holding the window: seconds, or {amount, unit}")
    threshold: int = Field(default=1, ge=1, description="Runs let through per window (default 1)")
    throttleKey: str | None = Field(default=None, description="Payload path whose value is counted apart")


# The spec's four kinds: the OpenAPI document shows these. A throttle step's metadata (ThrottleFixedMetadata,
# ThrottleDynamicMetadata) is checked by the service as the others are (docs/delivery.md#throttle).
StepMetadata = DigestRegularMetadata | DigestTimedMetadata | DelayRegularMetadata | DelayScheduledMetadata


class DocumentedAs:
    """Document a field as ``documented`` while it is validated as its own (looser) type.

    Step metadata is checked by the service against the step's type (a digest
    takes regular, backoff or timed; a delay regular or scheduled), with
    messages that name the step; pydantic alone cannot know the step's type.
    The OpenAPI document still shows the four kinds the spec lists.
    """

    def __init__(self, documented: Any) -> None:
        self._adapter: TypeAdapter[Any] = TypeAdapter(documented)

    def __get_pydantic_json_schema__(self, _core_schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return handler(self._adapter.core_schema)


MetadataField = Annotated[dict[str, Any], DocumentedAs(StepMetadata)]


class ReplyCallback(Schema):
    active: bool = False
    url: str | None = optional_field()


class PreferenceSettings(Schema):
    """Channels a subscriber receives this workflow on by default; unspecified channels are on."""

    email: bool = True
    sms: bool = True
    in_app: bool = True
    chat: bool = True
    push: bool = True


class _Open(Schema):
    """Template parts: known fields are checked, any other key is kept as sent; null means absent."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)


class TemplateEmailBlockStyles(_Open):
    textAlign: Literal["center", "left", "right"]


class TemplateEmailBlock(_Open):
    type: Literal["button", "text"]
    content: str
    url: str | None = None
    styles: TemplateEmailBlockStyles | None = None


class TemplateVariable(_Open):
    name: str = Field(min_length=1)
    type: Literal["String", "Array", "Boolean"] | None = None
    required: bool | None = None
    defaultValue: Any = None


class TemplateMessageCtaData(_Open):
    url: str | None = None


class TemplateMessageButton(_Open):
    type: Literal["primary", "secondary"]
    content: str
    resultContent: str | None = None


class TemplateMessageCtaAction(_Open):
    status: Literal["pending", "done"] | None = None
    buttons: list[TemplateMessageButton] | None = None


class TemplateMessageCta(_Open):
    type: Literal["redirect"] | None = None
    data: TemplateMessageCtaData | None = None
    action: TemplateMessageCtaAction | None = None


class MessageTemplate(_Open):
    """A step's message template (free-form in the spec)."""

    type: str = Field(description="One of in_app, email, sms, chat, push, digest, delay")
    name: str | None = None
    subject: str | None = None
    content: str | list[TemplateEmailBlock] | None = Field(
        default=None, description="A string; for email also an array of blocks (contentType editor)"
    )
    contentType: Literal["editor", "customHtml"] | None = None
    cta: TemplateMessageCta | None = None
    title: str | None = None
    senderName: str | None = None
    preheader: str | None = None
    layoutId: str | None = None
    variables: list[TemplateVariable] | None = None
    data: dict[str, Any] | None = Field(
        default=None, description="in_app: the notification's data object as the Inbox reads it (strings rendered)"
    )
    avatar: str | None = Field(
        default=None, description="in_app: the avatar URL the Inbox shows (rendered); else the actor's, as Novu's actor"
    )

    @field_validator("type")
    @classmethod
    def _supported_type(cls, value: str) -> str:
        if value in STEP_TYPES:
            return value
        if value in UNSUPPORTED_STEP_TYPES:
            raise PydanticCustomError(
                "step_type_unsupported",
                "{type} steps are not supported by Herald; use one of {allowed}",
                {"type": value, "allowed": ", ".join(STEP_TYPES)},
            )
        raise PydanticCustomError("step_type", "must be one of {allowed}", {"allowed": ", ".join(STEP_TYPES)})


class StepVariantRequest(RequestSchema):
    """A step as sent by the caller; ids are kept when given, made otherwise."""

    id: str | None = Field(default=None, alias="_id", min_length=1, max_length=64)
    uuid: str | None = Field(default=None, min_length=1, max_length=100)
    template_id: str | None = Field(default=None, alias="_templateId", min_length=1, max_length=64)
    name: str | None = Field(default=None, max_length=300, description="Defaults to the template's name or type")
    active: bool | None = Field(default=None, description="Default true")
    shouldStopOnFail: bool | None = Field(default=None, description="Default false")
    template: MessageTemplate
    filters: list[StepFilter] | None = None
    metadata: MetadataField | None = Field(
        default=None,
        description=(
            "Required for digest steps ({type: regular|backoff|timed, amount, unit, ...}) and delay steps "
            "({type: regular, amount, unit} or {type: scheduled, delayPath}); empty for other steps"
        ),
    )
    replyCallback: ReplyCallback | None = None


class StepRequest(StepVariantRequest):
    variants: list[StepVariantRequest] | None = None


def _check_name(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise PydanticCustomError("name_blank", "must not be empty")
    return value


class _WorkflowFields(RequestSchema):
    description: str | None = None
    tags: list[str] | None = None
    critical: bool | None = None
    severity: Severity | None = Field(default=None, description="Novu's severity: high, medium, low or none (default)")
    preferenceSettings: PreferenceSettings | None = None
    data: dict[str, Any] | None = None
    notificationGroupId: str | None = Field(default=None, min_length=1, max_length=64)
    # Novu's update body calls it ``identifier``; both names are taken.
    triggerIdentifier: str | None = Field(
        default=None,
        min_length=1,
        max_length=300,
        validation_alias=AliasChoices("triggerIdentifier", "identifier"),
        description="Herald extension: the identifier to trigger the workflow by; defaults to slugify(name)",
    )

    @field_validator("triggerIdentifier")
    @classmethod
    def _identifier_shape(cls, value: str | None) -> str | None:
        if value is not None and not TRIGGER_IDENTIFIER.match(value):
            raise PydanticCustomError(
                "trigger_identifier",
                "must start with a letter or digit and hold only letters, digits, '-', '_', '.' and ':'",
            )
        return value


class CreateWorkflowRequest(_WorkflowFields):
    name: str = Field(min_length=1, max_length=300)
    active: bool = False
    steps: list[StepRequest] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        return _check_name(value) or value


class UpdateWorkflowRequest(_WorkflowFields):
    """Every field optional: what is sent replaces what is stored; ``steps`` replaces all steps.

    Renaming keeps the trigger identifier: triggers in callers' code depend on it.
    """

    name: str | None = Field(default=None, min_length=1, max_length=300)
    active: bool | None = None
    steps: list[StepRequest] | None = None

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str | None) -> str | None:
        return _check_name(value)


class UpdateWorkflowStatusRequest(RequestSchema):
    active: bool


class NotificationTriggerVariable(Schema):
    name: str


class NotificationTrigger(Schema):
    type: Literal["event"]
    identifier: str
    variables: list[NotificationTriggerVariable]
    subscriberVariables: list[NotificationTriggerVariable] = Field(default_factory=list)


class NotificationStepVariant(Schema):
    """A stored step, as the spec's NotificationStep (variants have no variants of their own)."""

    id: str = Field(alias="_id")
    uuid: str
    name: str
    template_id: str = Field(alias="_templateId")
    active: bool
    shouldStopOnFail: bool
    template: dict[str, Any]
    filters: list[StepFilter] = Field(default_factory=list)
    parent_id: str = optional_field(alias="_parentId")
    metadata: MetadataField = optional_field()
    replyCallback: ReplyCallback = optional_field()


class NotificationStep(NotificationStepVariant):
    variants: list[NotificationStepVariant] = Field(default_factory=list)


class NotificationGroup(Schema):
    id: str = Field(alias="_id")
    name: str
    environment_id: str = Field(alias="_environmentId")
    organization_id: str = Field(alias="_organizationId")
    parent_id: str = optional_field(alias="_parentId")


class Workflow(Schema):
    """The Workflow object (spec §2.4).

    ``deletedAt`` and ``deletedBy`` are required strings in the spec (and in
    Novu's SDK models), so they are always present: empty strings until the
    workflow is deleted, then the ISO time and the deleting API key's id.
    """

    id: str = Field(alias="_id")
    name: str
    description: str
    active: bool
    draft: bool
    preferenceSettings: PreferenceSettings
    critical: bool
    severity: Severity = "none"
    tags: list[str]
    steps: list[NotificationStep]
    organization_id: str = Field(alias="_organizationId")
    creator_id: str = Field(alias="_creatorId")
    environment_id: str = Field(alias="_environmentId")
    notification_group_id: str = Field(alias="_notificationGroupId")
    triggers: list[NotificationTrigger]
    deleted: bool
    deletedAt: str
    deletedBy: str
    notificationGroup: NotificationGroup = optional_field()
    data: dict[str, Any] = optional_field()
    createdAt: str
    updatedAt: str
