"""Retention: history and messages older than their settings are deleted by the workers.

Without it every table grows for ever: a trigger with one in-app step keeps
about 4.5 KB on PostgreSQL, so a million messages a day is 4.5 GB a day. As Novu
does, rows expire by age, and two ages apply:

- the activity (events, notifications, jobs, execution details) goes after
  ``notification_days`` (HERALD_NOTIFICATION_RETENTION_DAYS, 30), an event with
  all of it, and only once every job of the event has finished: a delay or a
  digest still waiting keeps its event whatever its age;
- messages (the inbox and the record of every email, SMS, chat and push) go
  after ``message_days`` (HERALD_MESSAGE_RETENTION_DAYS, 365).

The keys of the providers' delivery events already recorded
(``delivery_event_keys``: a copy of an event is recorded once) go with the
activity, ``notification_days`` after their arrival: providers stop retrying
within days, and a key outliving its execution detail would only refuse a copy
whose record is gone anyway.

0 keeps them for ever. Each worker purges every PURGE_SECONDS (worker.py) in
transactions of bounded size (an event fanned out to 100,000 subscribers goes
over several), so a purge never holds locks for long and workers purging
at once only find less to do. A transactionId can be used again once its event
has gone.

The tokens of providers' signatures that do not cover the body
(``spent_signature_tokens``: Mailgun's, each taken once) go as soon as their
signature's timestamp is out of the tolerance, whatever the settings: a
request with the token is refused from then on by its timestamp alone.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.engine.repository import HistoryRepository
from herald.kit.ids import id_floor
from herald.kit.time import utcnow

logger = logging.getLogger("herald.retention")

# Events deleted per transaction, with their notifications, jobs and details,
# at most ROWS_PER_TRANSACTION jobs and as many notifications (a large fan-out
# is deleted over several transactions).
EVENTS_PER_TRANSACTION = 200
ROWS_PER_TRANSACTION = 5000
MESSAGES_PER_TRANSACTION = 2000
DELIVERY_EVENT_KEYS_PER_TRANSACTION = 5000
# A purge stops after this many transactions or rows, whichever comes first;
# what is left waits for the next. A worker purges between rounds of jobs, so
# this bounds the pause in delivery (50,000 rows: about 1.5 s on PostgreSQL).
TRANSACTIONS_PER_PURGE = 25
ROWS_PER_PURGE = 50_000


@dataclass(frozen=True)
class Retention:
    notification_days: float = 30.0
    message_days: float = 365.0

    def describe(self) -> str:
        """What this retention keeps, for the worker's start-up log."""

        def kept(days: float, setting: str) -> str:
            return f"for ever ({setting}=0)" if days <= 0 else f"{days:g} days ({setting})"

        return (
            f"the activity is kept {kept(self.notification_days, 'HERALD_NOTIFICATION_RETENTION_DAYS')}, "
            f"messages {kept(self.message_days, 'HERALD_MESSAGE_RETENTION_DAYS')}"
        )


@dataclass
class Purged:
    events: int = 0
    notifications: int = 0
    jobs: int = 0
    execution_details: int = 0
    messages: int = 0
    throttle_windows: int = 0
    delivery_event_keys: int = 0
    signature_tokens: int = 0

    @property
    def rows(self) -> int:
        return (
            self.events
            + self.notifications
            + self.jobs
            + self.execution_details
            + self.messages
            + self.throttle_windows
            + self.delivery_event_keys
            + self.signature_tokens
        )

    def __bool__(self) -> bool:
        return self.rows > 0


@dataclass
class _History:
    """Events past their retention and the ids of their history not yet deleted.

    Read once a purge, then deleted over as many of its transactions as it
    takes: an event fanned out to 100,000 subscribers has 100,000
    notifications and as many jobs, and reading them again for every
    transaction of 5,000 took its longest purge to 2.7-3.2 s (2.4 s at most
    now, bench.retention --fan-out 100000 on PostgreSQL). A finished
    event gains no rows, so the ids stay true; rows another worker deleted
    meanwhile are counted by neither. Each event goes in the transaction that
    deletes the last of its history, so a purge that stops half-way leaves
    the event to be found again by the next.
    """

    events: list[tuple[str, str, str]]
    jobs: list[str]
    notifications: list[str]
    done: bool = False

    async def delete_part(self, repository: HistoryRepository, rows: int) -> dict[str, int]:
        """Delete up to ``rows`` jobs and as many notifications, and the events when nothing is left."""
        jobs, self.jobs = self.jobs[:rows], self.jobs[rows:]
        notifications, self.notifications = self.notifications[:rows], self.notifications[rows:]
        counts = await repository.delete_history(jobs, notifications)
        counts["events"] = 0
        if not self.jobs and not self.notifications:
            counts["events"] = await repository.delete_events([event_id for event_id, _, _ in self.events])
            self.done = True
        return counts


async def purge_history(
    sessionmaker: async_sessionmaker[AsyncSession], retention: Retention, now: datetime | None = None
) -> Purged:
    """Delete what is older than ``retention`` allows, within TRANSACTIONS_PER_PURGE and ROWS_PER_PURGE."""
    now = now or utcnow()
    purged = Purged()
    transactions = 0

    def within_budget() -> bool:
        return transactions < TRANSACTIONS_PER_PURGE and purged.rows < ROWS_PER_PURGE

    if retention.notification_days > 0:
        floor = id_floor(now - timedelta(days=retention.notification_days))
        # Events whose history one transaction could not delete whole, with what is left of it.
        left: _History | None = None
        while within_budget():
            transactions += 1
            async with sessionmaker() as session, session.begin():
                repository = HistoryRepository(session)
                if left is None:
                    events = await repository.finished_events_before(floor, EVENTS_PER_TRANSACTION)
                    if events:
                        left = _History(events, *await repository.history_of(events))
                if left is not None:
                    counts = await left.delete_part(repository, ROWS_PER_TRANSACTION)
            if left is None:
                break
            await asyncio.sleep(0)  # SQLite runs on the API's event loop: requests go between transactions
            purged.events += counts["events"]
            purged.notifications += counts["notifications"]
            purged.jobs += counts["jobs"]
            purged.execution_details += counts["executionDetails"]
            if left.done:
                if len(left.events) < EVENTS_PER_TRANSACTION:
                    break
                left = None
    if retention.message_days > 0:
        floor = id_floor(now - timedelta(days=retention.message_days))
        while within_budget():
            transactions += 1
            async with sessionmaker() as session, session.begin():
                deleted = await HistoryRepository(session).delete_messages_before(floor, MESSAGES_PER_TRANSACTION)
            purged.messages += deleted
            await asyncio.sleep(0)
            if deleted < MESSAGES_PER_TRANSACTION:
                break
    if retention.notification_days > 0:
        before = now - timedelta(days=retention.notification_days)
        while within_budget():
            transactions += 1
            async with sessionmaker() as session, session.begin():
                deleted = await HistoryRepository(session).delete_delivery_event_keys_before(
                    before, DELIVERY_EVENT_KEYS_PER_TRANSACTION
                )
            purged.delivery_event_keys += deleted
            await asyncio.sleep(0)
            if deleted < DELIVERY_EVENT_KEYS_PER_TRANSACTION:
                break
    # Closed throttle windows hold nothing a run needs; they go whatever the retention settings.
    async with sessionmaker() as session, session.begin():
        purged.throttle_windows = await HistoryRepository(session).delete_closed_throttle_windows(now)
        # At most the last 10 minutes of signed requests: one statement.
        purged.signature_tokens = await HistoryRepository(session).delete_expired_signature_tokens(now)
        # Webhook deliveries belong to no trigger: they are kept as long as the activity is.
        if retention.notification_days > 0:
            purged.jobs += await HistoryRepository(session).delete_finished_webhook_jobs(
                now - timedelta(days=retention.notification_days)
            )
    if purged:
        logger.info(
            "retention: deleted %d events (%d notifications, %d jobs, %d execution details), %d messages, "
            "%d closed throttle windows, %d delivery event keys and %d spent signature tokens",
            purged.events,
            purged.notifications,
            purged.jobs,
            purged.execution_details,
            purged.messages,
            purged.throttle_windows,
            purged.delivery_event_keys,
            purged.signature_tokens,
        )
    return purged
