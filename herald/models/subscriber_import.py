"""A CSV import of subscribers (herald/subscribers/imports.py): the file, its progress and its outcome."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import Base, EnvironmentScopedMixin, IdMixin, TimestampMixin


class SubscriberImport(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    """One file being imported, or imported.

    ``source`` is the file's text while the import runs (so any process can
    take it up again) and is cleared when it ends. ``status`` goes
    ``queued`` -> ``running`` -> ``completed`` or ``failed``. ``refused`` is the
    list of lines not imported, ``[{line, subscriberId, reason}]``, bounded
    (herald.subscribers.imports.MAX_REFUSED_LISTED); ``refused_count`` counts them all.
    ``updated_at`` is the heartbeat: a running import whose heartbeat stopped
    has lost its process.
    """

    __tablename__ = "subscriber_imports"
    # The import page lists an environment's newest imports.
    __table_args__ = (Index("ix_subscriber_imports_environment_created", "environment_id", "created_at"),)

    member_email: Mapped[str | None] = mapped_column(String(320), default=None)
    filename: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    source: Mapped[str | None] = mapped_column(Text, default=None)
    size_bytes: Mapped[int] = mapped_column(default=0)
    total_rows: Mapped[int] = mapped_column(default=0)
    processed_rows: Mapped[int] = mapped_column(default=0)
    created_count: Mapped[int] = mapped_column(default=0)
    updated_count: Mapped[int] = mapped_column(default=0)
    refused_count: Mapped[int] = mapped_column(default=0)
    refused: Mapped[list[Any]] = mapped_column(default=list)
    error: Mapped[str | None] = mapped_column(String(1000), default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
