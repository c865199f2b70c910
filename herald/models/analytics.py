"""Messages counted by ten minutes and by day, for the console's Analytics page (herald/analytics)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import ID, Base


class AnalyticsProgress(Base):
    """How far an environment's messages are counted: every message before ``counted_until`` is in the tables below.

    Counting reads messages; ten minutes are counted once, when no retry can
    change them any more (herald/analytics/service.py), so the page reads
    kept counts for the month and the messages of the last half hour or so.
    """

    __tablename__ = "analytics_progress"

    environment_id: Mapped[str] = mapped_column(ID, primary_key=True)
    organization_id: Mapped[str] = mapped_column(ID)
    counted_until: Mapped[datetime] = mapped_column()


class AnalyticsCount(Base):
    """How many messages of ten minutes or of a day (UTC) had this workflow, channel, provider and status."""

    __tablename__ = "analytics_counts"

    environment_id: Mapped[str] = mapped_column(ID, primary_key=True)
    # "2026-11-29 07:1" (07:10 to 07:20), or a day that ended: "2026-11-29" (it sorts before its slots).
    period: Mapped[str] = mapped_column(String(16), primary_key=True)
    workflow_id: Mapped[str] = mapped_column(ID, primary_key=True)  # "" for none
    channel: Mapped[str] = mapped_column(String(16), primary_key=True)
    provider_id: Mapped[str] = mapped_column(String(100), primary_key=True)  # "" for none
    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    messages: Mapped[int] = mapped_column(default=0)


class AnalyticsDay(Base):
    """The subscribers sent at least one message on a day (UTC) that ended: counted once, with its last minutes."""

    __tablename__ = "analytics_days"

    environment_id: Mapped[str] = mapped_column(ID, primary_key=True)
    day: Mapped[str] = mapped_column(String(10), primary_key=True)  # "2026-11-29"
    subscribers: Mapped[int] = mapped_column(default=0)
