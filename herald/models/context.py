"""Novu's contexts: typed records (``tenant:acme``, ``app:jira``) a trigger can name."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import Base, EnvironmentScopedMixin, IdMixin, TimestampMixin


class Context(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    """One context, named by ``type`` and ``key`` (Novu's ``id``) within an environment."""

    __tablename__ = "contexts"
    __table_args__ = (Index("uq_contexts_environment_type_key", "environment_id", "type", "key", unique=True),)

    type: Mapped[str] = mapped_column(String(100))
    key: Mapped[str] = mapped_column(String(100))
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
