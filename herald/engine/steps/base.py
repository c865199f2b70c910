"""What a step is given and what it answers.

A step reads its context, may talk to a provider, and answers a
``StepOutcome``; the runner writes the outcome (messages, execution details,
the job's new status, the next step released) in one transaction. Steps that
talk to providers therefore hold no transaction open while the network is slow;
the one write they make themselves is a delivery the provider accepted, stored
at once (see ``steps.delivery``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.engine.breaker import BreakerSettings
from herald.engine.preferences import StepPreferences
from herald.kit.crypto import SecretBox
from herald.models import Event, Job, Message, Subscriber

if TYPE_CHECKING:
    from herald.engine.steps.batch import StepBatch
    from herald.engine.steps.bridged import BridgeOutputs


@dataclass(frozen=True)
class EngineSettings:
    retry_base_seconds: float = 2.0
    lease_seconds: float = 60.0
    breaker: BreakerSettings = field(default_factory=BreakerSettings)


def subscriber_variables(subscriber: Subscriber) -> dict[str, Any]:
    """The subscriber as templates and step conditions see it (``{{subscriber.firstName}}``)."""
    return {
        "_id": subscriber.id,
        "subscriberId": subscriber.subscriber_id,
        "firstName": subscriber.first_name,
        "lastName": subscriber.last_name,
        "email": subscriber.email,
        "phone": subscriber.phone,
        "avatar": subscriber.avatar,
        "locale": subscriber.locale,
        "timezone": subscriber.timezone,
        "data": subscriber.data or {},
        "channels": subscriber.channels or [],
        "isOnline": subscriber.is_online,
    }


@dataclass
class StepContext:
    job: Job
    event: Event
    step: dict[str, Any]
    subscriber: Subscriber
    tenant: dict[str, Any] | None
    digest: dict[str, Any] | None
    now: datetime
    sessionmaker: async_sessionmaker[AsyncSession]
    http: httpx.AsyncClient
    box: SecretBox
    settings: EngineSettings
    # The worker running the step: a provider's answer is stored only while it holds the job's lease.
    worker_id: str = ""
    # The subscriber's preferences that bear on this step, read by the runner
    # for a channel step of a workflow that is not critical (None otherwise).
    preferences: StepPreferences | None = None
    # The environment variables a step that reads ``env`` sees, by key, opened
    # (read by the runner only for such steps: see steps_reading_env).
    env: dict[str, str] | None = None
    # Why the step's template cannot be made (its translations past a limit): the step fails with it.
    template_error: str | None = None
    # What the channel steps of the runner's batch share (steps/batch.py); None for a step run alone.
    batch: StepBatch | None = None
    # A step of a code-first workflow: what its bridge answered (steps/bridged.py) for a channel or
    # custom step, and the settings it gave a digest or delay step (kept on the job for its resumption).
    bridge_outputs: BridgeOutputs | None = None
    bridge_metadata: dict[str, Any] | None = None

    @property
    def template(self) -> dict[str, Any]:
        return self.step.get("template") or {}

    @property
    def metadata(self) -> dict[str, Any]:
        return self.step.get("metadata") or {}

    @property
    def payload(self) -> dict[str, Any]:
        return self.event.payload or {}

    def subscriber_fields(self) -> dict[str, Any]:
        return subscriber_variables(self.subscriber)

    def variables(self) -> dict[str, Any]:
        """What templates see: subscriber, payload, step (digest), tenant, actor, env."""
        digest = self.digest or {}
        return {
            "subscriber": self.subscriber_fields(),
            "payload": self.payload,
            "step": {
                "digest": bool(self.digest),
                "events": digest.get("events", []),
                "total_count": digest.get("total_count", 0),
            },
            "tenant": self.tenant or {},
            "actor": self.event.actor or {},
            "env": self.env or {},
        }

    def new_message(self, channel: str, **fields: Any) -> Message:
        """A new message of this step, not yet stored (EngineRepository.save_messages stores it).

        Built as a loaded row is built, its values placed in the instance
        without an attribute event each (``Message(**values)`` fires one per
        column: the largest cost of an in-app step). It is never added to a
        session: it is stored as a row, and changed (a delivery's outcome)
        before that as any object is.
        """
        message = _new_message()
        message.__dict__.update(
            environment_id=self.job.environment_id,
            organization_id=self.job.organization_id,
            notification_id=self.job.notification_id,
            subscriber_id=self.subscriber.id,
            job_id=self.job.id,
            workflow_id=self.job.workflow_id,
            message_template_id=self.step.get("_templateId"),
            template_identifier=self.event.trigger_identifier,
            transaction_id=self.job.transaction_id,
            channel=channel,
            payload=self.payload,
            overrides=self.event.overrides or {},
            # The trigger's context, as Novu lists it on a message: "type:id", in the order of the
            # types (the stored object keeps none on PostgreSQL; contexts.service.context_keys).
            context_keys=sorted(f"{type_}:{key}" for type_, key in self.event.context.items())
            if self.event.context
            else [],
            cta=fields.pop("cta", {}) or {},
            # Set now, not left to the column default: a retried step looks its
            # earlier message up by (job, delivery_key), and "" is what is stored.
            delivery_key=fields.pop("delivery_key", "") or "",
            **fields,
        )
        return message


_new_message = Message.__mapper__.class_manager.new_instance


def _mentions_env(step: dict[str, Any]) -> bool:
    # One pass over the step's repr, in C: walking its strings in Python cost every message of every
    # step several microseconds. A key or value that merely contains the text reads the variables for
    # nothing; a step that may read one is never left without them.
    text = repr(step)
    return "env." in text or "env[" in text


def steps_reading_env(contexts: list[StepContext]) -> list[StepContext]:
    """The steps whose texts name ``env.`` or ``env[`` somewhere: only for them are the variables read."""
    return [ctx for ctx in contexts if _mentions_env(ctx.step)]


@dataclass
class Detail:
    status: str  # Success | Warning | Failed | Pending | Queued
    detail: str
    provider_id: str | None = None
    raw: dict[str, Any] | None = None


@dataclass
class StepOutcome:
    """``status`` is the job's next status: completed, skipped, failed, delayed or merged."""

    status: str
    details: list[Detail] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    result: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    run_at: datetime | None = None
    digest_key: str | None = None
    merged_into: str | None = None
    # A transient failure: try the step again (if attempts remain).
    retryable: bool = False
    error_text: str | None = None
    # Stop the workflow here: the steps after this one are canceled (a throttled run).
    halt: bool = False
    # An in-app message created in the subscriber's quiet hours: its socket event waits until then (herald.realtime.held).
    received_held_until: datetime | None = None

    @classmethod
    def done(cls, detail: str, **kwargs: Any) -> StepOutcome:
        return cls("completed", details=[Detail("Success", detail)], **kwargs)

    @classmethod
    def failed(cls, detail: str, **kwargs: Any) -> StepOutcome:
        return cls("failed", details=[Detail("Failed", detail)], error_text=detail, **kwargs)
