"""A new in-app message's ``notification_received``, held by the subscriber's quiet hours until their next open hour.

An in-app message the engine creates outside the subscriber's delivery
schedule (herald.engine.quiet_hours) is stored at once, so it is in the inbox
the moment the subscriber opens it; only the socket's real-time event, the
interruption the schedule is about, waits. The transaction that stores the
message also writes a job of the durable queue (herald.engine.queue), of kind
``quiet_received``, due at the next open hour, so a restart loses nothing. The
worker that claims it once the time has come:

- re-reads the message and tells the subscriber's sockets, once that commits,
  ``notification_received`` and both counts, as for a message just created;
- deletes its own job in the same transaction, guarded by its lease, so a
  worker that lost the job to another tells nothing.

The job is due at the open hour found when the message was stored; unlike a
held email it does not read the schedule again when due (the message is in
the inbox already; the event only says so), so hours changed meanwhile do not
move it.

The counts are not held: they are true from the moment the message is stored,
and the engine sends them then.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.engine import queue
from herald.models import Job, Message
from herald.realtime.signals import RECEIVED, Change, announce

logger = logging.getLogger("herald.realtime")

# Job.kind is 16 characters at most.
HELD_RECEIVED_JOB = "quiet_received"


def held_received_job(message: dict[str, Any], until: datetime) -> Job:
    """The job that tells the sockets of ``message`` (an in-app message's row being inserted) at ``until``.

    As a snooze's return: ``event_id`` holds the message's id, the job stays
    "queued" (a trigger's cancel touches delayed and merged jobs only: the
    message is stored already, and so is owed its event) and has no
    notification, so no chain or activity feed reads it.
    """
    return Job(
        kind=HELD_RECEIVED_JOB,
        status="queued",
        environment_id=message["environment_id"],
        organization_id=message["organization_id"],
        event_id=message["id"],
        transaction_id=message["transaction_id"],
        workflow_id=message.get("workflow_id"),
        subscriber_id=message["subscriber_id"],
        run_at=until,
        data={"messageId": message["id"], "heldUntil": until.isoformat()},
    )


def _still_owed(message: Message | None) -> bool:
    """Whether the held event is still news to the subscriber.

    Nothing is sent for a message that is gone (deleted, or its subscriber
    was), read or archived: the subscriber has dealt with it in their inbox
    meanwhile, and an alert for it now would only interrupt them for nothing.
    Nor for one snoozed (or back from a snooze): the snooze's return tells the
    sockets itself when it ends (herald.inbox.snooze), and a message delivered
    more than once has been told already.
    """
    if message is None or message.read or message.archived:
        return False
    return message.snoozed_until is None and len(message.delivered_at or []) <= 1


async def tell_held(session: AsyncSession, job: Job) -> bool:
    """The job's work, in the caller's transaction; whether ``notification_received`` was announced."""
    message_id = (job.data or {}).get("messageId")
    if not isinstance(message_id, str) or job.subscriber_id is None:
        return False
    message = (
        await session.execute(
            select(Message).where(
                Message.id == message_id,
                Message.environment_id == job.environment_id,
                Message.subscriber_id == job.subscriber_id,
                Message.channel == "in_app",
            )
        )
    ).scalar_one_or_none()
    if not _still_owed(message):
        return False
    await announce(session, [Change(job.environment_id, job.subscriber_id, RECEIVED, message_id)])
    return True


async def run_held(sessionmaker: async_sessionmaker[AsyncSession], jobs: Sequence[Job], worker_id: str) -> None:
    """Run claimed held events, each in a transaction of its own.

    A job that fails is left to its lease: it runs again (the queue's retries)
    and, after its last attempt, is failed with why by the worker's sweep.
    """
    for job in jobs:
        try:
            async with sessionmaker() as session, session.begin():
                told = await tell_held(session, job)
                if not await queue.delete_owned_job(session, job.id, worker_id):
                    raise queue.JobLost(job.id)
            logger.info(
                "in-app message %s: %s", (job.data or {}).get("messageId"),
                "its held notification_received is sent" if told else "read, archived, snoozed or deleted meanwhile: nothing sent",
            )
        except queue.JobLost:
            logger.info("job %s was taken over by another worker", job.id)
        except Exception:
            logger.exception("job %s (a held notification_received) failed; it runs again once its lease ends", job.id)
