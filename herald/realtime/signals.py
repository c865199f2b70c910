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

A second kind of signal feeds the console's live pages (herald/console/sse.py):
"the activity of environment E changed" (:func:`announce_activity`), announced
where notifications and the execution details of job outcomes are stored
(herald.engine.repository), coalesced to one per environment per
transaction: ``NOTIFY herald_activity`` with the environment's id on
PostgreSQL (one statement per transaction, whatever the number of rows, and
none more for an environment already announced in it), a note on the
session on SQLite (:func:`deliver_activity_on_commit`). The listeners read the
fresh rows themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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
ACTIVITY_CHANNEL = "herald_activity"
_ACTIVITY_NOTES = "activity_changes"
# On PostgreSQL: (the transaction, the environments it announced), so a transaction announces each once.
_ACTIVITY_ANNOUNCED = "activity_announced"

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


_NOTIFY_ACTIVITY = text(
    f"SELECT pg_notify('{ACTIVITY_CHANNEL}', payload) FROM unnest(CAST(:payloads AS text[])) AS payload"
).bindparams(bindparam("payloads", type_=ARRAY(String())))


async def announce_activity(session: AsyncSession, environment_ids: Iterable[str]) -> None:
    """Tell the console's live pages that these environments' activity changed, once the transaction commits."""
    # The transaction begins here if it has not yet (the callers have written in it already): its
    # commit or rollback is what delivers or forgets the announcement, and on PostgreSQL it is told apart.
    await session.connection()
    if session.get_bind().dialect.name != "postgresql":
        session.info.setdefault(_ACTIVITY_NOTES, set()).update(environment_ids)
        return
    transaction = session.sync_session.get_transaction()
    announced = session.info.get(_ACTIVITY_ANNOUNCED)
    if announced is None or announced[0] is not transaction:
        announced = (transaction, set())
        session.info[_ACTIVITY_ANNOUNCED] = announced
    fresh = set(environment_ids) - announced[1]
    if not fresh:
        return
    announced[1].update(fresh)
    await session.execute(_NOTIFY_ACTIVITY, {"payloads": sorted(fresh)})


def deliver_activity_on_commit(deliver: Callable[[set[str]], None]) -> Callable[[Session], None]:
    """An ``after_commit`` hook: hand the environments whose activity the session changed to ``deliver`` (SQLite)."""

    def hand_over(session: Session) -> None:
        environments = session.info.pop(_ACTIVITY_NOTES, None)
        if environments:
            deliver(environments)

    return hand_over


def forget_on_rollback(session: Session) -> None:
    """Changes of a transaction that rolled back never happened."""
    session.info.pop(_NOTES, None)
    session.info.pop(_ACTIVITY_NOTES, None)
