"""A snooze that ends by itself: the notification is delivered again when its time comes.

Snoozing writes, in the snooze's own transaction, a job of the durable queue
(herald.engine.queue) due at ``snoozedUntil``; a restart loses nothing, and
the worker that claims it once the time has come:

- re-reads the message, and does nothing unless it is still snoozed until
  that very time (an unsnooze, a new snooze or a delete since made the job
  moot; unsnooze and a new snooze also delete the job while it waits);
- ends the snooze and adds a ``deliveredAt`` entry, as an unsnooze does;
- tells the subscriber's sockets, once that commits, ``notification_received``
  and both counts, as for a message the engine has just created (herald.realtime);
- deletes its own job in the same transaction, guarded by its lease, so a
  worker that lost the job to another changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.engine import queue
from herald.inbox.repository import InboxRepository
from herald.kit.time import isoformat, utcnow
from herald.models import Job, Message
from herald.realtime.signals import RECEIVED, Change, announce

logger = logging.getLogger("herald.inbox")

# Two times closer than this are the same snooze (a store may keep less than microseconds).
SAME_TIME = timedelta(milliseconds=1)


async def schedule_return(repository: InboxRepository, message: Message, until: datetime) -> None:
    """Replace the message's waiting return with one due at ``until``, and wake the workers for it."""
    await repository.drop_return_jobs(message)
    repository.add_return_job(message, until, {"messageId": message.id, "snoozedUntil": until.isoformat()})
    await queue.wake_workers(repository.session)


async def cancel_return(repository: InboxRepository, message: Message) -> None:
    await repository.drop_return_jobs(message)


async def bring_back(session: AsyncSession, job: Job) -> bool:
    """The job's work, in the caller's transaction; whether the notification came back."""
    data = job.data or {}
    message_id, until_text = data.get("messageId"), data.get("snoozedUntil")
    if not isinstance(message_id, str) or not isinstance(until_text, str) or job.subscriber_id is None:
        return False
    until = datetime.fromisoformat(until_text)
    repository = InboxRepository(session, job.environment_id, job.subscriber_id)
    message = await repository.get(message_id)
    if message is None or message.snoozed_until is None or abs(message.snoozed_until - until) >= SAME_TIME:
        return False
    now = utcnow()
    delivered = [*(message.delivered_at or []), isoformat(now)]
    changed = await repository.update_if_snoozed_until(
        message_id, message.snoozed_until, {"snoozed_until": None, "delivered_at": delivered, "updated_at": now}
    )
    if changed:
        await announce(session, [Change(job.environment_id, job.subscriber_id, RECEIVED, message_id)])
    return bool(changed)


async def run_returns(sessionmaker: async_sessionmaker[AsyncSession], jobs: Sequence[Job], worker_id: str) -> None:
    """Run claimed return jobs, each in a transaction of its own.

    A job that fails is left to its lease: it runs again (the queue's retries) and, after its
    last attempt, is failed with why by the worker's sweep.
    """
    for job in jobs:
        try:
            async with sessionmaker() as session, session.begin():
                back = await bring_back(session, job)
                if not await queue.delete_owned_job(session, job.id, worker_id):
                    raise queue.JobLost(job.id)
            if back:
                logger.info("snoozed notification %s is back", (job.data or {}).get("messageId"))
        except queue.JobLost:
            logger.info("job %s was taken over by another worker", job.id)
        except Exception:
            logger.exception("job %s (a snooze's return) failed; it runs again once its lease ends", job.id)
