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


class SpentSignatureToken(Base):
    """A token of a provider's signature that does not cover the body, spent (herald/providers/inbound.py).

    Mailgun signs only its timestamp and a random token, so a captured request's
    signature would carry any other body within the timestamp's tolerance.
    Each such token is inserted here (``INSERT ... ON CONFLICT DO NOTHING``)
    before the request's events are recorded, in the same transaction, and a
    request whose token was already here is refused: durable, so a second API
    process refuses it too, and rolled back with the request, so a provider's
    retry of a request that failed is taken. ``token`` is an HMAC of the
    token keyed by the signing key (a fixed width, and one token under one key
    whichever integration it is posted to: two integrations sharing a
    provider's account key share its tokens). A row is needed only until the
    signature's timestamp leaves the tolerance (``expires_at``), after which
    the signature is refused anyway; retention deletes it then, so the table
    holds at most the last 10 minutes of signed requests.
    """

    __tablename__ = "spent_signature_tokens"
    __table_args__ = (Index("ix_spent_signature_tokens_expires_at", "expires_at"),)

    token: Mapped[str] = mapped_column(String(64), primary_key=True)
    environment_id: Mapped[str] = mapped_column(ID)
    integration_id: Mapped[str] = mapped_column(ID)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
