from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column, query_expression

from herald.kit.time import utcnow
from herald.models.base import ID, Base, EnvironmentScopedMixin, IdMixin, TimestampMixin


class Event(IdMixin, EnvironmentScopedMixin, Base):
    """A trigger as accepted: what the caller sent, recorded before the answer.

    The unique index on (environment, transactionId) is what makes a repeated
    transactionId run once, even when two requests race.
    """

    __tablename__ = "events"
    __table_args__ = (
        Index("uq_events_environment_transaction", "environment_id", "transaction_id", unique=True),
    )

    transaction_id: Mapped[str] = mapped_column(String(255))
    workflow_id: Mapped[str] = mapped_column(ID)
    trigger_identifier: Mapped[str] = mapped_column(String(300))
    # "trigger" addresses ``recipients``; "broadcast" every subscriber.
    kind: Mapped[str] = mapped_column(String(16), default="trigger")
    # The workflow's steps as they were when the trigger was accepted: later
    # edits of the workflow do not change a run already under way.
    steps: Mapped[list[Any]] = mapped_column(default=list)
    recipients: Mapped[list[Any]] = mapped_column(default=list)
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    overrides: Mapped[dict[str, Any]] = mapped_column(default=dict)
    actor: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    tenant: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    context: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    # Recipients refused at acceptance, with why: kept, never silently dropped.
    rejected_recipients: Mapped[list[Any]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(32), default="accepted")
    error_text: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The workflow's ``critical`` and ``preferenceSettings`` as they are when a
    # step runs, not as they were at the trigger: preferences are read when a
    # step runs, as in Novu. Loaded only by the engine's read of events
    # (engine/repository.py); None elsewhere.
    workflow_critical: Mapped[bool | None] = query_expression()
    workflow_preference_settings: Mapped[dict[str, Any] | None] = query_expression()
    # The workflow's isTranslationEnabled, read with the event likewise (herald/translations/render.py).
    workflow_translation_enabled: Mapped[bool | None] = query_expression()


class Notification(IdMixin, EnvironmentScopedMixin, Base):
    """One run of a workflow for one subscriber."""

    __tablename__ = "notifications"
    __table_args__ = (
        Index("ix_notifications_environment_created", "environment_id", "created_at"),
        Index("ix_notifications_environment_transaction", "environment_id", "transaction_id"),
        # The console's Activity: a subscriber's runs and a workflow's runs, newest first (migration 0027).
        Index("ix_notifications_environment_subscriber_created", "environment_id", "subscriber_id", "created_at"),
        Index("ix_notifications_environment_workflow_created", "environment_id", "workflow_id", "created_at"),
        Index("uq_notifications_event_subscriber", "event_id", "subscriber_id", unique=True),
    )

    event_id: Mapped[str] = mapped_column(ID)
    workflow_id: Mapped[str] = mapped_column(ID)
    subscriber_id: Mapped[str] = mapped_column(ID)
    transaction_id: Mapped[str] = mapped_column(String(255))
    channels: Mapped[list[Any]] = mapped_column(default=list)
    to: Mapped[dict[str, Any]] = mapped_column(default=dict)
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Job(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    """A unit of work for the engine, claimed with a lease.

    ``kind`` is "event" (expand an accepted trigger into notifications),
    "step" (run one workflow step for one subscriber), "unsnooze" (bring a
    snoozed inbox notification back at its time: herald.inbox.snooze) or
    "quiet_received" (tell a subscriber's sockets of an in-app message once
    their quiet hours are over: herald.realtime.held) or "webhook" (send one
    event to one of the application's endpoints: herald.webhooks.delivery).
    """

    __tablename__ = "jobs"
    __table_args__ = (
        # Partial indexes hold only the rows the queue asks about (migration 0003).
        # Webhook deliveries wait apart (migration 0025): a backlog of them for
        # a slow endpoint never stands between a workflow's job and its claim.
        Index(
            "ix_jobs_due",
            "run_at",
            sqlite_where=text("status IN ('queued', 'delayed') AND kind <> 'webhook'"),
            postgresql_where=text("status IN ('queued', 'delayed') AND kind <> 'webhook'"),
        ),
        # Webhook deliveries waiting, by endpoint and then due time: each
        # endpoint's queue is a range of it (herald/webhooks/queue.py).
        Index(
            "ix_jobs_webhook_due",
            "endpoint_id",
            "run_at",
            sqlite_where=text("kind = 'webhook' AND status IN ('queued', 'delayed')"),
            postgresql_where=text("kind = 'webhook' AND status IN ('queued', 'delayed')"),
        ),
        Index(
            "ix_jobs_leased",
            "locked_until",
            sqlite_where=text("status = 'running'"),
            postgresql_where=text("status = 'running'"),
        ),
        Index("ix_jobs_environment_transaction", "environment_id", "transaction_id"),
        # Only jobs with a notification: the writes of expansions' own jobs
        # leave it alone (migration 0007).
        Index(
            "ix_jobs_notification",
            "notification_id",
            sqlite_where=text("notification_id IS NOT NULL"),
            postgresql_where=text("notification_id IS NOT NULL"),
        ),
        # One open digest per workflow step, subscriber and digest key: a second
        # event racing to open one becomes a merge instead.
        Index(
            "uq_jobs_open_digest",
            "workflow_id",
            "step_id",
            "subscriber_id",
            "digest_key",
            unique=True,
            sqlite_where=text("status = 'delayed' AND step_type = 'digest'"),
            postgresql_where=text("status = 'delayed' AND step_type = 'digest'"),
        ),
        # Only the events merged into a digest (migration 0007).
        Index(
            "ix_jobs_merged_into",
            "merged_into",
            sqlite_where=text("merged_into IS NOT NULL"),
            postgresql_where=text("merged_into IS NOT NULL"),
        ),
        # Events on their way to a digest that is about to close (migration 0006).
        Index(
            "ix_jobs_digest_arriving",
            "workflow_id",
            "step_id",
            "subscriber_id",
            sqlite_where=text("step_type = 'digest' AND status IN ('queued', 'running')"),
            postgresql_where=text("step_type = 'digest' AND status IN ('queued', 'running')"),
        ),
        # Webhook deliveries by age, for retention (migration 0021): without it each purge read the whole table.
        Index(
            "ix_jobs_webhook_updated",
            "updated_at",
            sqlite_where=text("kind = 'webhook'"),
            postgresql_where=text("kind = 'webhook'"),
        ),
    )

    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    event_id: Mapped[str] = mapped_column(ID)
    transaction_id: Mapped[str] = mapped_column(String(255))
    workflow_id: Mapped[str | None] = mapped_column(ID, default=None)
    notification_id: Mapped[str | None] = mapped_column(ID, default=None)
    subscriber_id: Mapped[str | None] = mapped_column(ID, default=None)
    parent_id: Mapped[str | None] = mapped_column(ID, default=None)
    step_id: Mapped[str | None] = mapped_column(String(64), default=None)
    step_type: Mapped[str | None] = mapped_column(String(32), default=None)
    step_index: Mapped[int | None] = mapped_column(Integer, default=None)
    run_at: Mapped[datetime] = mapped_column(default=utcnow)
    attempts: Mapped[int] = mapped_column(default=0)
    max_attempts: Mapped[int] = mapped_column(default=5)
    digest_key: Mapped[str | None] = mapped_column(String(255), default=None)
    merged_into: Mapped[str | None] = mapped_column(ID, default=None)
    locked_until: Mapped[datetime | None] = mapped_column(default=None)
    locked_by: Mapped[str | None] = mapped_column(String(100), default=None)
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    result: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    error_text: Mapped[str | None] = mapped_column(Text, default=None)
    # A webhook delivery's endpoint (kind "webhook"); None for every other job.
    endpoint_id: Mapped[str | None] = mapped_column(ID, default=None)
    # The attempt that began sending the step's email to an SMTP server (written before the send) and got
    # no answer recorded: a later attempt knows the server may have it (steps.delivery, migration 0026).
    handed_over: Mapped[int | None] = mapped_column(default=None)
    # The trace this job belongs to, as a W3C traceparent: the trigger's request span, written with the
    # job while traces are on (herald/kit/tracing.py, migration 0033); None when they are off.
    trace_context: Mapped[str | None] = mapped_column(String(64), default=None)


class ExecutionDetail(IdMixin, EnvironmentScopedMixin, Base):
    """What happened to a job, step by step: the activity feed's evidence."""

    __tablename__ = "execution_details"
    __table_args__ = (
        Index("ix_execution_details_notification", "notification_id"),
        Index("ix_execution_details_job", "job_id"),
    )

    job_id: Mapped[str | None] = mapped_column(ID, default=None)
    notification_id: Mapped[str | None] = mapped_column(ID, default=None)
    subscriber_id: Mapped[str | None] = mapped_column(ID, default=None)
    transaction_id: Mapped[str] = mapped_column(String(255))
    channel: Mapped[str | None] = mapped_column(String(32), default=None)
    provider_id: Mapped[str | None] = mapped_column(String(100), default=None)
    status: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(16), default="Internal")
    raw: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    is_retry: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
