"""Preference models, named as Novu's DTOs: v1 (``/v1/subscribers/{id}/preferences``) and v2 (novu-py 3.19's models)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictBool, field_validator

from herald.kit.schemas import RequestSchema, Schema, optional_field

# Novu's ChannelTypeEnum as far as preferences go: the channels a step delivers on.
ChannelType = Literal["in_app", "email", "sms", "chat", "push"]
PreferenceLevel = Literal["global", "template"]
OverrideSource = Literal["subscriber", "template", "workflowOverride"]

_TIME = re.compile(r"^(?:[01]?\d|2[0-3]):[0-5]\d(?:\s?[AaPp][Mm])?$|^(?:0?[1-9]|1[0-2])(?::[0-5]\d)?\s?[AaPp][Mm]$")


class _Channels(RequestSchema):
    """Per-channel booleans; a channel left out is not changed. Unknown channels are refused."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    email: StrictBool | None = None
    sms: StrictBool | None = None
    in_app: StrictBool | None = None
    chat: StrictBool | None = None
    push: StrictBool | None = None

    def given(self) -> dict[str, bool]:
        return {name: value for name, value in self.model_dump(exclude_none=True).items() if isinstance(value, bool)}


# v1 -------------------------------------------------------------------------


class PreferenceChannels(Schema):
    email: bool = optional_field()
    sms: bool = optional_field()
    in_app: bool = optional_field()
    chat: bool = optional_field()
    push: bool = optional_field()


class Overrides(Schema):
    channel: ChannelType
    source: OverrideSource


class Preference(Schema):
    enabled: bool
    channels: PreferenceChannels
    overrides: list[Overrides]


class GlobalPreference(Schema):
    enabled: bool
    channels: PreferenceChannels


class PreferenceTrigger(Schema):
    type: str = "event"
    identifier: str
    variables: list[dict[str, Any]] = Field(default_factory=list)
    subscriberVariables: list[dict[str, Any]] = optional_field()


class TemplateResponse(Schema):
    id: str = Field(alias="_id")
    name: str
    critical: bool
    triggers: list[PreferenceTrigger]


class GetSubscriberPreferencesResponseDto(Schema):
    """One workflow's preference (v1): the workflow, and the channels merged from its settings and the subscriber's."""

    template: TemplateResponse
    preference: Preference


class GetSubscriberPreferencesByLevelResponseDto(Schema):
    """``GET /v1/subscribers/{id}/preferences/{level}``: a global entry has no template."""

    level: PreferenceLevel
    template: TemplateResponse = optional_field()
    preference: Preference | GlobalPreference


class UpdateSubscriberGlobalPreferenceResponseDto(Schema):
    preference: GlobalPreference


class ChannelPreference(RequestSchema):
    type: ChannelType
    enabled: StrictBool


class UpdateSubscriberPreferenceRequestDto(RequestSchema):
    """``{channel: {type, enabled}}`` sets one channel; ``{enabled}`` turns the workflow on or off for the subscriber."""

    channel: ChannelPreference | None = None
    enabled: StrictBool | None = None


class UpdateSubscriberGlobalPreferencesRequestDto(RequestSchema):
    enabled: StrictBool | None = None
    preferences: list[ChannelPreference] | None = Field(default=None, max_length=5)


# v2 -------------------------------------------------------------------------


class TimeRangeDto(RequestSchema):
    start: str
    end: str

    @field_validator("start", "end")
    @classmethod
    def _time(cls, value: str) -> str:
        if not _TIME.match(value.strip()):
            raise ValueError("must be a time of day, such as 09:00 or 9:00 AM")
        return value


class DaySchedule(RequestSchema):
    isEnabled: StrictBool
    hours: list[TimeRangeDto] = optional_field()


class WeeklySchedule(RequestSchema):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    monday: DaySchedule = optional_field()
    tuesday: DaySchedule = optional_field()
    wednesday: DaySchedule = optional_field()
    thursday: DaySchedule = optional_field()
    friday: DaySchedule = optional_field()
    saturday: DaySchedule = optional_field()
    sunday: DaySchedule = optional_field()


class ScheduleDto(RequestSchema):
    """The global delivery schedule: email, sms, chat and push wait for its open hours (herald.engine.quiet_hours)."""

    isEnabled: StrictBool
    weeklySchedule: WeeklySchedule = optional_field()


class SubscriberPreferenceChannels(PreferenceChannels):
    pass


class PatchPreferenceChannelsDto(_Channels):
    pass


class SubscriberGlobalPreferenceDto(Schema):
    enabled: bool
    channels: SubscriberPreferenceChannels
    schedule: ScheduleDto = optional_field()


class SubscriberPreferenceOverrideDto(Schema):
    channel: ChannelType
    source: OverrideSource


class SubscriberPreferencesWorkflowInfoDto(Schema):
    slug: str
    identifier: str
    name: str
    updatedAt: str = optional_field()


class SubscriberWorkflowPreferenceDto(Schema):
    enabled: bool
    channels: SubscriberPreferenceChannels
    overrides: list[SubscriberPreferenceOverrideDto]
    workflow: SubscriberPreferencesWorkflowInfoDto
    updatedAt: str = optional_field()


class GetSubscriberPreferencesDto(Schema):
    global_: SubscriberGlobalPreferenceDto = Field(alias="global")
    workflows: list[SubscriberWorkflowPreferenceDto]


class PatchSubscriberPreferencesDto(RequestSchema):
    """The global preference (no ``workflowId``: channels and schedule), or one workflow's (channels)."""

    channels: PatchPreferenceChannelsDto | None = None
    workflowId: str | None = Field(default=None, min_length=1)
    schedule: ScheduleDto | None = None


class BulkUpdateSubscriberPreferenceItemDto(RequestSchema):
    channels: PatchPreferenceChannelsDto
    workflowId: str = Field(min_length=1)


class BulkUpdateSubscriberPreferencesDto(RequestSchema):
    preferences: list[BulkUpdateSubscriberPreferenceItemDto] = Field(min_length=1, max_length=100)


class PreferenceWorkflowDto(Schema):
    id: str
    identifier: str
    name: str
    critical: bool
    severity: Literal["high", "medium", "low", "none"] = "none"
    tags: list[str] = Field(default_factory=list)
    data: dict[str, Any] = optional_field()


class GetPreferencesResponseDto(Schema):
    level: PreferenceLevel
    enabled: bool
    channels: SubscriberPreferenceChannels
    workflow: PreferenceWorkflowDto = optional_field()
