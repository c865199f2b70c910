from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import ID, Base, UTCDateTime


class DeliveryEventKey(Base):
    """One provider event already recorded: its identity, per integration (herald/deliveries/service.py).

    Providers deliver their webhooks at least once (a retry after a timeout, a
    signed request replayed within its tolerance), so each normalised event
    carries a key (``DeliveryEvent.key``, a 64-character digest: the
    provider's own event id where it has one, else the event's content) and is
    recorded only by the request whose ``INSERT ... ON CONFLICT DO NOTHING``
    of that key inserted it. A table of its own rather than a unique column on
    ``execution_details``: that table is written by every step of every run,
    and a further unique index there would be paid on each of those inserts
    for the sake of webhook events only; here only webhook events pay, with
    short rows. Keys are kept as long as the activity
    (``HERALD_NOTIFICATION_RETENTION_DAYS``), far longer than any provider
    retries, and swept by retention (herald/engine/retention.py) by
    ``created_at``. The key is the integration's (ids are unique across
    environments); ``environment_id`` leads the primary key so that deleting
    an environment, which deletes every table's rows of it, finds its keys by
    the index.
    """

    __tablename__ = "delivery_event_keys"
    __table_args__ = (Index("ix_delivery_event_keys_created_at", "created_at"),)

    environment_id: Mapped[str] = mapped_column(ID, primary_key=True)
    integration_id: Mapped[str] = mapped_column(ID, primary_key=True)
    event_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
