from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String, Text, false, text
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import ID, Base, EnvironmentScopedMixin, IdMixin, TimestampMixin


class Workflow(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    """A workflow (Novu's notification template) with its steps.

    Steps are kept as one JSON array in the row: they are always read and
    written with their workflow, and the engine takes a snapshot of them per
    trigger, so later edits never change a run already under way.
    """

    __tablename__ = "workflows"
    __table_args__ = (
        Index(
            "uq_workflows_environment_trigger",
            "environment_id",
            "trigger_identifier",
            unique=True,
            sqlite_where=text("deleted = 0"),
            postgresql_where=text("deleted = false"),
        ),
    )

    notification_group_id: Mapped[str] = mapped_column(ID)
    creator_id: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(300))
    description: Mapped[str] = mapped_column(Text, default="")
    trigger_identifier: Mapped[str] = mapped_column(String(300))
    active: Mapped[bool] = mapped_column(default=False, server_default=false())
    draft: Mapped[bool] = mapped_column(default=True)
    critical: Mapped[bool] = mapped_column(default=False, server_default=false())
    # Novu's severity: high | medium | low | none (migration 0009).
    severity: Mapped[str] = mapped_column(String(16), default="none", server_default="none")
    tags: Mapped[list[Any]] = mapped_column(default=list)
    preference_settings: Mapped[dict[str, Any]] = mapped_column(default=dict)
    data: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    steps: Mapped[list[Any]] = mapped_column(default=list)
    # Variables found in the step templates, as Novu's triggers[0].variables.
    variables: Mapped[list[Any]] = mapped_column(default=list)
    subscriber_variables: Mapped[list[Any]] = mapped_column(default=list)
    # Novu v2 (migration 0012): a trigger's payload is checked against
    # payload_schema only when validate_payload is on.
    validate_payload: Mapped[bool] = mapped_column(default=False, server_default=false())
    payload_schema: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    # Novu's isTranslationEnabled: steps render with the subscriber's locale's keys ({{t.key}}) (migration 0011).
    is_translation_enabled: Mapped[bool] = mapped_column(default=False, server_default=false())
    # Where the workflow is written (migration 0034): "novu-cloud" for Herald's own, "external" for a
    # workflow written in code with Novu's framework and synced from its bridge (herald/bridge), which the
    # engine calls to render each step.
    origin: Mapped[str] = mapped_column(String(32), default="novu-cloud", server_default="novu-cloud")
    deleted: Mapped[bool] = mapped_column(default=False, server_default=false())
    deleted_at: Mapped[datetime | None] = mapped_column(default=None)
    deleted_by: Mapped[str | None] = mapped_column(String(100), default=None)
