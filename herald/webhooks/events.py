"""Emitting webhook events: one delivery job per listening endpoint, in the transaction of the change.

A change that an application may hear about (a message sent or read, a
workflow or a preference updated) calls :func:`emit` with the session that
makes it; each enabled endpoint of the environment that takes the event type
gets a job of kind ``webhook`` in that same transaction, so an event is sent
if and only if its change commits, and a crash between the two loses neither.
The job carries the event's body, its stable id (``webhook-id``, the same on
every retry, for the receiver to drop duplicates) and its endpoint; the
workers' webhook senders send it (herald/webhooks/sender.py), from a queue of
their own (herald/webhooks/queue.py).

Which endpoints listen is asked of the store at most once a second per
environment and process (:class:`ListeningEndpoints`): the engine emits for
every message it sends, and most environments have no endpoint. An endpoint
made or deleted in another process is heard of within that second.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine import queue
from herald.kit.ids import new_id
from herald.kit.time import isoformat, utcnow
from herald.models import Job, Message, Subscriber
from herald.webhooks.repository import WebhookEndpointRepository

JOB_KIND = "webhook"
# The state changes of an in-app message that are events, by the action that makes them.
STATE_EVENTS = {"read": "message.read", "seen": "message.seen", "archive": "message.archived"}
# Retried for at least a day (delivery.py gives up by time, not by count); the count only bounds a job whose
# workers keep dying.
MAX_ATTEMPTS = 1000


class ListeningEndpoints:
    """Per environment: the enabled endpoints and their event types, read at most once a second."""

    TTL_SECONDS = 1.0

    def __init__(self) -> None:
        self._known: dict[str, tuple[float, list[tuple[str, list[str]]]]] = {}

    async def of(self, session: AsyncSession, environment_id: str) -> list[tuple[str, list[str]]]:
        now = time.monotonic()
        known = self._known.get(environment_id)
        if known is not None and known[0] > now:
            return known[1]
        listening = await WebhookEndpointRepository(session, environment_id).listening()
        if len(self._known) > 10_000:
            self._known.clear()
        self._known[environment_id] = (now + self.TTL_SECONDS, listening)
        return listening

    def forget(self, environment_id: str) -> None:
        self._known.pop(environment_id, None)


LISTENING = ListeningEndpoints()


async def emit(
    session: AsyncSession, environment_id: str, organization_id: str, event_type: str, items: Iterable[Mapping[str, Any]]
) -> int:
    """Queue ``event_type`` with each of ``items`` as its ``data`` to every endpoint that takes it; how many jobs."""
    endpoints = [endpoint_id for endpoint_id, types in await LISTENING.of(session, environment_id) if event_type in types]
    if not endpoints:
        return 0
    now = utcnow()
    jobs = []
    for data in items:
        for endpoint_id in endpoints:
            job_id = new_id()
            webhook_id = f"msg_{job_id}"
            body = json.dumps({"type": event_type, "timestamp": isoformat(now), "data": dict(data)}, separators=(",", ":"), default=str)
            jobs.append(
                Job(
                    id=job_id,
                    kind=JOB_KIND,
                    status="queued",
                    environment_id=environment_id,
                    organization_id=organization_id,
                    # No trigger event: the job's own id, so no event's history or retention takes it in.
                    event_id=job_id,
                    transaction_id=webhook_id,
                    step_type=event_type,
                    run_at=now,
                    attempts=0,
                    max_attempts=MAX_ATTEMPTS,
                    endpoint_id=endpoint_id,
                    data={"endpointId": endpoint_id, "webhookId": webhook_id, "body": body},
                )
            )
    if jobs:
        session.add_all(jobs)
        await queue.wake_webhook_senders(session)
    return len(jobs)


def message_data(message: Mapping[str, Any], subscriber_ids: Mapping[str, str]) -> dict[str, Any]:
    """What a message event says about its message (a row as the engine stores it, or a loaded message's columns)."""
    return {
        "messageId": message["id"],
        "transactionId": message.get("transaction_id"),
        "workflowId": message.get("template_identifier"),
        "subscriberId": subscriber_ids.get(message.get("subscriber_id") or ""),
        "_subscriberId": message.get("subscriber_id"),
        "channel": message.get("channel"),
        "status": message.get("status"),
        "providerId": message.get("provider_id"),
        "errorText": message.get("error_text"),
    }


async def _external_ids(session: AsyncSession, internal_ids: Iterable[str]) -> dict[str, str]:
    ids = list(dict.fromkeys(i for i in internal_ids if i))
    if not ids:
        return {}
    result = await session.execute(select(Subscriber.id, Subscriber.subscriber_id).where(Subscriber.id.in_(ids)))
    return dict(result.tuples().all())


async def emit_messages(session: AsyncSession, event_type: str, rows: Sequence[Mapping[str, Any]]) -> int:
    """Emit ``event_type`` for each message row (dicts of Message columns), grouped by environment."""
    by_environment: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        by_environment.setdefault((row["environment_id"], row["organization_id"]), []).append(row)
    queued = 0
    for (environment_id, organization_id), group in by_environment.items():
        if not any(event_type in types for _, types in await LISTENING.of(session, environment_id)):
            continue
        external = await _external_ids(session, (row.get("subscriber_id") or "" for row in group))
        queued += await emit(session, environment_id, organization_id, event_type, [message_data(row, external) for row in group])
    return queued


def columns_of(message: Message) -> dict[str, Any]:
    """A loaded message as the row :func:`emit_messages` takes."""
    return {column.key: getattr(message, column.key) for column in Message.__table__.columns}


async def emit_for_messages(session: AsyncSession, environment_id: str, event_type: str, message_ids: Sequence[str]) -> int:
    """Emit ``event_type`` for messages named by id (read from the store only when an endpoint takes it)."""
    if not message_ids or not any(event_type in types for _, types in await LISTENING.of(session, environment_id)):
        return 0
    result = await session.execute(
        select(Message).where(Message.environment_id == environment_id, Message.id.in_(list(message_ids)))
    )
    return await emit_messages(session, event_type, [columns_of(message) for message in result.scalars()])
