from __future__ import annotations

from typing import Any

from sqlalchemy import Index, text
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import ID, Base, EnvironmentScopedMixin, IdMixin, TimestampMixin


class SubscriberPreference(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    """What a subscriber chose: globally (``workflow_id`` null) or for one workflow.

    ``channels`` holds only the channels the subscriber set (email, sms,
    in_app, chat, push); a channel left out follows the level below it (the
    workflow's ``preferenceSettings``, then on). ``schedule`` is the global
    preference's delivery schedule (Novu's ``{isEnabled, weeklySchedule}``),
    kept and answered as given. Rows go with their subscriber.
    """

    __tablename__ = "subscriber_preferences"
    __table_args__ = (
        # One row per (subscriber, workflow), and one global row per subscriber
        # (a unique index does not compare NULLs, so the global one has its own).
        Index("uq_subscriber_preferences_subscriber_workflow", "subscriber_id", "workflow_id", unique=True),
        Index(
            "uq_subscriber_preferences_subscriber_global",
            "subscriber_id",
            unique=True,
            sqlite_where=text("workflow_id IS NULL"),
            postgresql_where=text("workflow_id IS NULL"),
        ),
    )

    # Herald's internal id of the subscriber (subscribers.id), as messages and jobs hold it.
    subscriber_id: Mapped[str] = mapped_column(ID)
    workflow_id: Mapped[str | None] = mapped_column(ID, default=None)
    enabled: Mapped[bool] = mapped_column(default=True)
    channels: Mapped[dict[str, Any]] = mapped_column(default=dict)
    schedule: Mapped[dict[str, Any] | None] = mapped_column(default=None)
