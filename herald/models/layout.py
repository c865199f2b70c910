from __future__ import annotations

from typing import Any

from sqlalchemy import Index, String, Text, false, text
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import Base, EnvironmentScopedMixin, IdMixin, TimestampMixin


class Layout(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    """An email layout: HTML that wraps the emails of an environment's workflows.

    One row serves Novu's v1 routes (``identifier``, ``content``) and its v2
    routes (``layoutId``, ``controls.values.email.body``). ``identifier`` is the
    stable key a workflow step names and environment promotion matches on.
    At most one layout of an environment is its default (the partial unique
    index), which wraps the emails whose step names none.
    """

    __tablename__ = "layouts"
    __table_args__ = (
        Index("uq_layouts_environment_identifier", "environment_id", "identifier", unique=True),
        Index(
            "uq_layouts_environment_default",
            "environment_id",
            unique=True,
            sqlite_where=text("is_default = 1"),
            postgresql_where=text("is_default = true"),
        ),
    )

    identifier: Mapped[str] = mapped_column(String(300))
    name: Mapped[str] = mapped_column(String(300))
    description: Mapped[str] = mapped_column(Text, default="")
    content: Mapped[str] = mapped_column(Text, default="")
    # html, or block (Novu's editor document; Herald renders html layouts only).
    editor_type: Mapped[str] = mapped_column(String(16), default="html")
    variables: Mapped[list[Any]] = mapped_column(default=list)
    is_default: Mapped[bool] = mapped_column(default=False, server_default=false())
    is_translation_enabled: Mapped[bool] = mapped_column(default=False, server_default=false())
    # novu-cloud-v1 for a layout made through /v1/layouts, novu-cloud through /v2/layouts.
    origin: Mapped[str] = mapped_column(String(32), default="novu-cloud")
    creator_id: Mapped[str] = mapped_column(String(100), default="")
