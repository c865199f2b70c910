from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import ID, Base, UTCDateTime


class ThrottleWindow(Base):
    """The open window of one throttle: how many runs reached the step since it opened, and when it closes.

    ``scope`` is a digest of what the throttle counts per (workflow, step,
    subscriber, the value at the step's ``throttleKey``): one row per scope and
    environment, counted up by a single upsert, so concurrent runs on any
    number of workers each see their own exact count. A window that has
    closed is opened again by the next run; closed windows are swept by
    retention.
    """

    __tablename__ = "throttle_windows"
    __table_args__ = (Index("ix_throttle_windows_window_ends_at", "window_ends_at"),)

    environment_id: Mapped[str] = mapped_column(ID, primary_key=True)
    scope: Mapped[str] = mapped_column(String(64), primary_key=True)
    window_ends_at: Mapped[datetime] = mapped_column(UTCDateTime())
    count: Mapped[int] = mapped_column(Integer)
