from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, false
from sqlalchemy.orm import Mapped, mapped_column

from herald.kit.time import utcnow
from herald.models.base import ID, Base, EnvironmentScopedMixin, IdMixin


class Organization(IdMixin, Base):
    __tablename__ = "organizations"

    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Environment(IdMixin, Base):
    __tablename__ = "environments"
    __table_args__ = (Index("uq_environments_organization_name", "organization_id", "name", unique=True),)

    organization_id: Mapped[str] = mapped_column(ID, ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    # The public identifier an inbox client names the environment by.
    identifier: Mapped[str] = mapped_column(String(64), unique=True)
    # Takes changes only from its own API keys (herald/environments/protection.py).
    protected: Mapped[bool] = mapped_column(default=False, server_default=false())
    # Where the environment's code-first workflows are served (the last ``novu sync``; migration 0034).
    bridge_url: Mapped[str | None] = mapped_column(String(2048), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiKey(IdMixin, Base):
    """An API key: its sha256 finds it; the key itself is kept only sealed (herald.kit.crypto).

    The sealed key is what checks an inbox session's ``subscriberHash`` (an
    HMAC keyed by the API key, herald/inbox). Keys made before migration 0009
    have none and cannot serve that check.
    """

    __tablename__ = "api_keys"
    # API processes look up the keys revoked since their last look (herald.kit.auth).
    __table_args__ = (Index("ix_api_keys_revoked_at", "revoked_at"),)

    environment_id: Mapped[str] = mapped_column(ID, ForeignKey("environments.id", ondelete="CASCADE"))
    organization_id: Mapped[str] = mapped_column(ID)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    sealed_key: Mapped[str | None] = mapped_column(String(255), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class NotificationGroup(IdMixin, EnvironmentScopedMixin, Base):
    __tablename__ = "notification_groups"
    __table_args__ = (Index("ix_notification_groups_environment", "environment_id", "name"),)

    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
