from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String, false
from sqlalchemy.orm import Mapped, mapped_column

from herald.kit.time import utcnow
from herald.models.base import ID, Base, EnvironmentScopedMixin, IdMixin, TimestampMixin

# PostgreSQL's alone, made by migration 0031 (lowered expressions with text_pattern_ops, for the console's
# search by the start of a subscriberId, email, phone or name): not declared on the model, which both stores share.
POSTGRESQL_SEARCH_INDEXES = frozenset(
    {
        "ix_subscribers_search_subscriber_id",
        "ix_subscribers_search_email",
        "ix_subscribers_search_phone",
        "ix_subscribers_search_last_name",
        "ix_subscribers_search_full_name",
    }
)


class Subscriber(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    __tablename__ = "subscribers"
    __table_args__ = (
        Index("uq_subscribers_environment_subscriber", "environment_id", "subscriber_id", unique=True),
        # The console's Activity search finds a subscriber by email or phone (migration 0027).
        Index("ix_subscribers_environment_email", "environment_id", "email"),
        Index("ix_subscribers_environment_phone", "environment_id", "phone"),
        # The console's list and search, newest first a page at a time (migration 0029).
        Index("ix_subscribers_environment_id", "environment_id", "id"),
    )

    # The caller's identifier; ``id`` is Herald's internal one.
    subscriber_id: Mapped[str] = mapped_column(String(255))
    first_name: Mapped[str | None] = mapped_column(String(255), default=None)
    last_name: Mapped[str | None] = mapped_column(String(255), default=None)
    email: Mapped[str | None] = mapped_column(String(320), default=None)
    phone: Mapped[str | None] = mapped_column(String(64), default=None)
    avatar: Mapped[str | None] = mapped_column(String(2048), default=None)
    locale: Mapped[str | None] = mapped_column(String(32), default=None)
    timezone: Mapped[str | None] = mapped_column(String(64), default=None)
    data: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    channels: Mapped[list[Any]] = mapped_column(default=list)
    is_online: Mapped[bool | None] = mapped_column(default=None)
    last_online_at: Mapped[datetime | None] = mapped_column(default=None)
    deleted: Mapped[bool] = mapped_column(default=False, server_default=false())
    version: Mapped[int] = mapped_column(default=0)


class Topic(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    __tablename__ = "topics"
    __table_args__ = (Index("uq_topics_environment_key", "environment_id", "key", unique=True),)

    key: Mapped[str] = mapped_column(String(255))
    name: Mapped[str | None] = mapped_column(String(255), default=None)


class TopicSubscriber(IdMixin, Base):
    """Membership of a subscriber in a topic."""

    __tablename__ = "topic_subscribers"
    __table_args__ = (
        Index("uq_topic_subscribers_topic_subscriber", "topic_id", "subscriber_id", unique=True),
        Index("ix_topic_subscribers_subscriber", "subscriber_id"),
        Index("uq_topic_subscribers_topic_identifier", "topic_id", "identifier", unique=True),
    )

    topic_id: Mapped[str] = mapped_column(ID)
    environment_id: Mapped[str] = mapped_column(ID)
    organization_id: Mapped[str] = mapped_column(ID)
    subscriber_id: Mapped[str] = mapped_column(ID)
    external_subscriber_id: Mapped[str] = mapped_column(String(255))
    topic_key: Mapped[str] = mapped_column(String(255))
    # Novu's v2 subscription fields. The identifier names the subscription in
    # /v2/topics/{key}/subscriptions/{identifier}; ``preferences`` is the list of
    # workflow rules as given ({workflowId | filter, enabled, condition}).
    identifier: Mapped[str | None] = mapped_column(String(255), default=None)
    name: Mapped[str | None] = mapped_column(String(255), default=None)
    preferences: Mapped[list[Any] | None] = mapped_column(default=None)
    context_keys: Mapped[list[Any] | None] = mapped_column(default=None)
    created_at: Mapped[datetime | None] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime | None] = mapped_column(default=utcnow)


class Tenant(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    __tablename__ = "tenants"
    __table_args__ = (Index("uq_tenants_environment_identifier", "environment_id", "identifier", unique=True),)

    identifier: Mapped[str] = mapped_column(String(255))
    name: Mapped[str | None] = mapped_column(String(255), default=None)
    data: Mapped[dict[str, Any] | None] = mapped_column(default=None)
