"""Whether a subscriber's preferences let a channel step through (Novu's ``evaluateChannelPreference``).

A pure function of what the workflow says (``critical``, ``preferenceSettings``)
and what the subscriber chose (their global preference and their preference
for the workflow), so the engine, the preference routes and an inbox read the
same rules:

1. a step that is not a channel step, or a step of a ``critical`` workflow, is
   always sent;
2. the subscriber's global preference with ``enabled: false``, or with the
   channel false, turns the channel off in every workflow;
3. otherwise the workflow's channels are merged in priority order: the
   workflow's ``preferenceSettings`` (a channel it does not name is on), then
   the subscriber's own preference for the workflow (``enabled: false`` turns
   every channel of the workflow off; a channel it names overrides).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CHANNELS = ("email", "sms", "in_app", "chat", "push")

# Where a workflow-level channel value came from (Novu's PreferenceOverrideSourceEnum).
SOURCE_WORKFLOW = "template"
SOURCE_SUBSCRIBER = "subscriber"


@dataclass(frozen=True)
class Preference:
    """One level of a subscriber's preferences: ``channels`` holds only the channels they set."""

    enabled: bool = True
    channels: Mapping[str, bool] = field(default_factory=dict)
    # The global preference's delivery schedule (engine.quiet_hours), as stored.
    schedule: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class StepPreferences:
    """What a subscriber chose that bears on one step: their global preference and the one for its workflow."""

    global_preference: Preference | None = None
    workflow_preference: Preference | None = None


def needs_preferences(step_type: str | None, critical: bool | None) -> bool:
    """Whether a step's delivery depends on the subscriber's preferences (else they are not read)."""
    return step_type in CHANNELS and not critical


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    # Why the step is not sent (None when it is): the execution detail's text.
    reason: str | None = None


ALLOWED = Verdict(True)


@dataclass(frozen=True)
class WorkflowChannels:
    """A workflow's channels for one subscriber: enabled, each channel's value, and which level set it."""

    enabled: bool
    channels: dict[str, bool]
    sources: dict[str, str]


def workflow_channels(preference_settings: Mapping[str, Any] | None, mine: Preference | None) -> WorkflowChannels:
    """The workflow level merged: its ``preferenceSettings`` (all on by default), then the subscriber's own."""
    settings = preference_settings or {}
    channels = {channel: settings.get(channel) is not False for channel in CHANNELS}
    sources = dict.fromkeys(CHANNELS, SOURCE_WORKFLOW)
    enabled = True
    if mine is not None:
        enabled = mine.enabled
        for channel, value in mine.channels.items():
            if channel in channels and isinstance(value, bool):
                channels[channel] = value
                sources[channel] = SOURCE_SUBSCRIBER
    return WorkflowChannels(enabled, channels, sources)


def global_channels(mine: Preference | None) -> dict[str, bool]:
    """The global level: every channel on unless the subscriber turned it off."""
    set_ = mine.channels if mine is not None else {}
    return {channel: set_.get(channel) is not False for channel in CHANNELS}


def evaluate(
    channel: str,
    workflow_identifier: str,
    *,
    critical: bool,
    preference_settings: Mapping[str, Any] | None,
    global_preference: Preference | None,
    workflow_preference: Preference | None,
) -> Verdict:
    """Whether a ``channel`` step of the workflow is sent to the subscriber, and if not, why."""
    if channel not in CHANNELS or critical:
        return ALLOWED
    if global_preference is not None:
        if not global_preference.enabled:
            return Verdict(False, f"preferences: channel {channel} disabled by the subscriber's global preference (all channels off)")
        if global_preference.channels.get(channel) is False:
            return Verdict(False, f"preferences: channel {channel} disabled by the subscriber's global preference")
    if workflow_preference is not None and not workflow_preference.enabled:
        return Verdict(False, f"preferences: channel {channel} disabled by the subscriber for workflow {workflow_identifier} (all channels off)")
    merged = workflow_channels(preference_settings, workflow_preference)
    if merged.channels[channel]:
        return ALLOWED
    if merged.sources[channel] == SOURCE_SUBSCRIBER:
        return Verdict(False, f"preferences: channel {channel} disabled by the subscriber for workflow {workflow_identifier}")
    return Verdict(False, f"preferences: channel {channel} disabled by the workflow's preferenceSettings")
