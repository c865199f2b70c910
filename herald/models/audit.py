"""The audit log's table (herald/audit): who changed what, append-only."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from herald.kit.time import utcnow
from herald.models.base import ID, Base, IdMixin


class AuditEntry(IdMixin, Base):
    """One change, by a member, an API key, the ``herald`` command or Herald itself.

    Rows are only ever inserted: a trigger of the store (migration 0024)
    refuses every UPDATE, and every DELETE while the entry's organization
    exists, so neither a bug nor a hand in the database rewrites history.
    ``organization_id`` has no foreign key for that reason: deleting an
    organization is the one way its entries go, after it.

    ``environment_id`` is null for an organization-wide change (a member
    invited); ``actor_environment_id`` is the environment of the API key that
    acted. ``changes`` is what was asked for, secrets masked
    (herald.audit.service.mask).
    """

    __tablename__ = "audit_entries"
    # Newest first, per organization: the log's page and GET /v1/audit-logs read it backwards.
    __table_args__ = (Index("ix_audit_entries_organization_created", "organization_id", "created_at", "id"),)

    organization_id: Mapped[str] = mapped_column(ID)
    environment_id: Mapped[str | None] = mapped_column(ID, default=None)
    action: Mapped[str] = mapped_column(String(100))
    actor_type: Mapped[str] = mapped_column(String(16))
    actor_email: Mapped[str | None] = mapped_column(String(320), default=None)
    actor_id: Mapped[str | None] = mapped_column(String(64), default=None)
    actor_environment_id: Mapped[str | None] = mapped_column(ID, default=None)
    resource_type: Mapped[str] = mapped_column(String(64))
    resource_id: Mapped[str | None] = mapped_column(String(200), default=None)
    changes: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
