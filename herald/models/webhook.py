from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import Base, EnvironmentScopedMixin, IdMixin, TimestampMixin


class WebhookEndpoint(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    """Where an environment's application hears about its messages (herald/webhooks).

    ``secret`` is the Standard Webhooks signing secret (``whsec_...``),
    sealed under HERALD_SECRET_KEY: shown once, when the endpoint is made.
    ``failing_since`` is the first failed delivery since the last success; an
    endpoint whose deliveries kept failing for the whole retry period is
    ``disabled``, with the reason, and is sent nothing more. While it fails it
    is paused until ``paused_until``, then tried with one delivery
    (herald/webhooks/delivery.py).
    """

    __tablename__ = "webhook_endpoints"
    __table_args__ = (Index("ix_webhook_endpoints_environment_id", "environment_id"),)

    url: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="")
    event_types: Mapped[list[Any]] = mapped_column(default=list)
    secret: Mapped[str] = mapped_column(String(255))
    disabled: Mapped[bool] = mapped_column(default=False, server_default=false())
    disabled_reason: Mapped[str | None] = mapped_column(Text, default=None)
    disabled_at: Mapped[datetime | None] = mapped_column(default=None)
    failing_since: Mapped[datetime | None] = mapped_column(default=None)
    paused_until: Mapped[datetime | None] = mapped_column(default=None)
