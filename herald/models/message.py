from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import ID, Base, EnvironmentScopedMixin, IdMixin, JSONType, TimestampMixin

# PostgreSQL's alone, made by migration 0032 (not declared on the model, which both stores share): an
# environment's messages of one channel, newest first, for GET /v1/messages?channel= on a large store. SQLite,
# which has no statistics to choose by, took it for a subscriber's inbox over the subscriber's own index.
POSTGRESQL_MESSAGE_INDEXES = frozenset({"ix_messages_environment_channel_created"})


class Message(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    """A message produced by a channel step (the in-app inbox entry, an email...)."""

    __tablename__ = "messages"
    __table_args__ = (
        # A subscriber's inbox in the feed's order (migration 0005).
        Index("ix_messages_subscriber_channel_created", "subscriber_id", "channel", "created_at", "id"),
        Index("ix_messages_environment_transaction", "environment_id", "transaction_id"),
        # GET /v1/messages: an environment's messages, newest first (migration 0005).
        Index("ix_messages_environment_created", "environment_id", "created_at", "id"),
        # A retried step finds the message it already made instead of making another
        # (chat and push make one message per subscriber channel, told apart by delivery_key).
        Index("uq_messages_job_delivery", "job_id", "delivery_key", unique=True),
    )
    # Not a column: set once steps.delivery has stored the row of a delivery the provider accepted,
    # so the step's final write does not insert it again (and read it back to find it there).
    stored_on_acceptance = False

    notification_id: Mapped[str] = mapped_column(ID)
    subscriber_id: Mapped[str] = mapped_column(ID)
    job_id: Mapped[str | None] = mapped_column(ID, default=None)
    delivery_key: Mapped[str] = mapped_column(String(255), default="")
    workflow_id: Mapped[str | None] = mapped_column(ID, default=None)
    message_template_id: Mapped[str | None] = mapped_column(String(64), default=None)
    template_identifier: Mapped[str | None] = mapped_column(String(300), default=None)
    transaction_id: Mapped[str] = mapped_column(String(255))
    channel: Mapped[str] = mapped_column(String(16))
    subject: Mapped[str | None] = mapped_column(Text, default=None)
    title: Mapped[str | None] = mapped_column(Text, default=None)
    # A string, or a list of EmailBlock objects.
    content: Mapped[Any] = mapped_column(JSONType, nullable=True, default=None)
    cta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    overrides: Mapped[dict[str, Any]] = mapped_column(default=dict)
    email: Mapped[str | None] = mapped_column(String(320), default=None)
    phone: Mapped[str | None] = mapped_column(String(64), default=None)
    direct_webhook_url: Mapped[str | None] = mapped_column(String(2048), default=None)
    provider_id: Mapped[str | None] = mapped_column(String(100), default=None)
    device_tokens: Mapped[list[Any] | None] = mapped_column(default=None)
    feed_id: Mapped[str | None] = mapped_column(ID, default=None)
    status: Mapped[str] = mapped_column(String(16), default="sent")
    error_id: Mapped[str | None] = mapped_column(String(100), default=None)
    error_text: Mapped[str | None] = mapped_column(Text, default=None)
    seen: Mapped[bool] = mapped_column(default=False, server_default=false())
    read: Mapped[bool] = mapped_column(default=False, server_default=false())
    last_seen_date: Mapped[datetime | None] = mapped_column(default=None)
    last_read_date: Mapped[datetime | None] = mapped_column(default=None)
    delivered_at: Mapped[list[Any]] = mapped_column(default=list)
    snoozed_until: Mapped[datetime | None] = mapped_column(default=None)
    # Inbox state (herald/inbox, migration 0009): archived, when, and when first seen.
    archived: Mapped[bool] = mapped_column(default=False, server_default=false())
    archived_at: Mapped[datetime | None] = mapped_column(default=None)
    first_seen_date: Mapped[datetime | None] = mapped_column(default=None)
    # The step's data object, as the Inbox reads it (filtered by the inbox's ``data`` query).
    data: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    # The avatar the Inbox shows beside it (the step's avatar, or its actor's).
    avatar: Mapped[str | None] = mapped_column(String(2048), default=None)
    context_keys: Mapped[list[Any]] = mapped_column(default=list)
    # The provider's id for the sent message, once accepted.
    provider_message_id: Mapped[str | None] = mapped_column(String(255), default=None)
    # What the provider reported became of it (delivered, bounced, dropped, complained,
    # opened, clicked) and when, apart from ``status`` (migration 0019, herald/deliveries).
    delivery_status: Mapped[str | None] = mapped_column(String(16), default=None)
    delivery_status_at: Mapped[datetime | None] = mapped_column(default=None)


class IdempotencyRecord(Base):
    """A claimed idempotency key of one environment and, once done, the answer to replay.

    Keyed by environment, not by organization as Novu keys them: a key that
    Development used must not answer Production's request with Development's
    answer (migration 0023).
    """

    __tablename__ = "idempotency_records"

    environment_id: Mapped[str] = mapped_column(ID, primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    body_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))  # in_progress | done
    status_code: Mapped[int | None] = mapped_column(default=None)
    response_body: Mapped[str | None] = mapped_column(Text, default=None)
    content_type: Mapped[str | None] = mapped_column(String(100), default=None)
    created_at: Mapped[datetime] = mapped_column()
    expires_at: Mapped[datetime] = mapped_column(index=True)
