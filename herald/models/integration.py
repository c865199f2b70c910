from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String, false, text
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import Base, EnvironmentScopedMixin, IdMixin, TimestampMixin


class Integration(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    __tablename__ = "integrations"
    __table_args__ = (
        # Identifiers are unique among the live integrations of an environment;
        # a soft-deleted one frees its identifier.
        Index(
            "uq_integrations_environment_identifier",
            "environment_id",
            "identifier",
            unique=True,
            sqlite_where=text("deleted = 0"),
            postgresql_where=text("deleted = false"),
        ),
        # One primary per channel among the live integrations of an environment.
        Index(
            "uq_integrations_one_primary",
            "environment_id",
            "channel",
            unique=True,
            sqlite_where=text('"primary" = 1 AND deleted = 0'),
            postgresql_where=text('"primary" = true AND deleted = false'),
        ),
        Index("ix_integrations_organization_active", "organization_id", "active"),
        Index("ix_integrations_environment_channel", "environment_id", "channel"),
    )

    provider_id: Mapped[str] = mapped_column(String(100))
    channel: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(200))
    identifier: Mapped[str] = mapped_column(String(200))
    # Secret fields are sealed by herald.kit.crypto before they reach this column.
    credentials: Mapped[dict[str, Any]] = mapped_column(default=dict)
    configurations: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    conditions: Mapped[list[Any]] = mapped_column(default=list)
    active: Mapped[bool] = mapped_column(default=False, server_default=false())
    primary: Mapped[bool] = mapped_column(default=False, server_default=false())
    priority: Mapped[int] = mapped_column(default=0)
    deleted: Mapped[bool] = mapped_column(default=False, server_default=false())
    deleted_at: Mapped[datetime | None] = mapped_column(default=None)
    deleted_by: Mapped[str | None] = mapped_column(String(100), default=None)
