"""What changed in a subscriber's inbox, told to the processes that hold that subscriber's sockets.

A change is written where it is made, in the transaction that makes it
(:func:`announce`), and reaches the sockets only once that transaction
commits:

- on PostgreSQL as a ``NOTIFY herald_realtime`` (one ``pg_notify`` statement
  for all the changes it names), which PostgreSQL delivers on commit to every
  API process that LISTENs, on any machine (herald.realtime.server);
- on SQLite (one process, with its in-process worker) as a note on the
  session, handed to this process's sockets by the sessionmaker's
  ``after_commit`` hook (:func:`deliver_on_commit`): no statement at all.

A payload is four short ids, far below PostgreSQL's 8,000-byte limit; the
process holding the sockets reads what it sends (the message, the counts)
itself, and only when it holds a socket of that subscriber.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson
from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session
from sqlalchemy.types import ARRAY, String

CHANNEL = "herald_realtime"
# A new in-app message (notification_received, then both counts).
RECEIVED = "received"
# Read, unread, seen, archived, unarchived, snoozed or deleted: both counts.
COUNTS = "counts"

_NOTES = "realtime_changes"

_NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', payload) FROM unnest(CAST(:payloads AS text[])) AS payload").bindparams(
    bindparam("payloads", type_=ARRAY(String()))
)


@dataclass(frozen=True)
class Change:
    environment_id: str
    # The subscriber's internal id (subscribers.id, messages.subscriber_id).
    subscriber_id: str
    kind: str
    message_id: str | None = None

    def encode(self) -> str:
        return orjson.dumps([self.environment_id, self.subscriber_id, self.kind, self.message_id]).decode()

    @classmethod
    def decode(cls, payload: str) -> Change | None:
        try:
            environment_id, subscriber_id, kind, message_id = orjson.loads(payload)
        except (ValueError, TypeError):
            return None
        if not (isinstance(environment_id, str) and isinstance(subscriber_id, str) and kind in (RECEIVED, COUNTS)):
            return None
        return cls(environment_id, subscriber_id, kind, message_id if isinstance(message_id, str) else None)


async def announce(session: AsyncSession, changes: Sequence[Change]) -> None:
    """Tell the sockets of these changes once the session's transaction commits (nothing if it rolls back)."""
    if not changes:
        return
    if session.get_bind().dialect.name == "postgresql":
        # Several changes of one subscriber (a bulk read) are one event each; one is enough.
        payloads = list(dict.fromkeys(change.encode() for change in changes))
        await session.execute(_NOTIFY, {"payloads": payloads})
        return
    session.info.setdefault(_NOTES, []).extend(changes)


def deliver_on_commit(deliver: Callable[[Sequence[Change]], None]) -> Callable[[Session], None]:
    """An ``after_commit`` hook (kit.db.create_sessionmaker): hand the session's committed changes to ``deliver``."""

    def hand_over(session: Session) -> None:
        changes = session.info.pop(_NOTES, None)
        if changes:
            deliver(changes)

    return hand_over


def forget_on_rollback(session: Session) -> None:
    """Changes of a transaction that rolled back never happened."""
    session.info.pop(_NOTES, None)
