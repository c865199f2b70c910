"""How an integration has fared lately: the circuit breaker every worker shares."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from herald.kit.time import utcnow
from herald.models.base import ID, Base


class IntegrationHealth(Base):
    """One row per integration that has failed since it last succeeded (none for a healthy one).

    Kept apart from ``integrations`` so that workers recording failures never
    write the rows the API edits, and a healthy integration costs no row.
    Every change is one atomic statement (``EngineRepository``), so workers
    on SQLite and PostgreSQL agree on the count, the cool-down and who probes.
    """

    __tablename__ = "integration_health"

    integration_id: Mapped[str] = mapped_column(ID, primary_key=True)
    environment_id: Mapped[str] = mapped_column(ID)
    # Transient failures since ``window_started_at``; the breaker opens when they reach the threshold.
    failures: Mapped[int] = mapped_column(default=0)
    window_started_at: Mapped[datetime | None] = mapped_column(default=None)
    # Failures since the last success (shown; the window's count is what opens the breaker).
    consecutive_failures: Mapped[int] = mapped_column(default=0)
    failing_since: Mapped[datetime | None] = mapped_column(default=None)
    # Open: skipped until then. Past it, one message probes (half-open).
    skipped_until: Mapped[datetime | None] = mapped_column(default=None)
    # The probe's claim: no other message probes before it runs out.
    probe_until: Mapped[datetime | None] = mapped_column(default=None)
    last_error: Mapped[str | None] = mapped_column(String(1000), default=None)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
