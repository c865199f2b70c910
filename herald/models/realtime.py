from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import ID, Base

# "<hostname>:<pid>:<random>", as long as a host name may make it.
PROCESS_ID = String(120)


class RealtimeProcess(Base):
    """An API process that holds Inbox sockets, alive while its heartbeat keeps ``expires_at`` ahead.

    Each process writes its own row when it starts and refreshes it every
    heartbeat (herald/realtime/presence.py). A row past ``expires_at`` is a
    process that died without closing: any live process, or a worker's sweep,
    deletes it with its presence. ``announced`` is false on a row a connect
    had to put back after a sweep took it, so the heartbeat knows to write the
    process's presence again.
    """

    __tablename__ = "realtime_processes"
    __table_args__ = (Index("ix_realtime_processes_expires_at", "expires_at"),)

    id: Mapped[str] = mapped_column(PROCESS_ID, primary_key=True)
    seen_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    announced: Mapped[bool] = mapped_column(default=True)


class RealtimePresence(Base):
    """One process holds at least one socket of one subscriber.

    Written when the subscriber's count of sockets on that process goes 0→1,
    deleted when it goes 1→0: the per-socket count stays in the process's
    memory. A subscriber is online while a row of a live process names them.
    """

    __tablename__ = "realtime_presence"
    __table_args__ = (Index("ix_realtime_presence_subscriber", "environment_id", "subscriber_id"),)

    process_id: Mapped[str] = mapped_column(PROCESS_ID, primary_key=True)
    environment_id: Mapped[str] = mapped_column(ID, primary_key=True)
    # Herald's internal id of the subscriber (subscribers.id).
    subscriber_id: Mapped[str] = mapped_column(ID, primary_key=True)
