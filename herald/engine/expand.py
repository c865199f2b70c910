"""Expansion of an accepted trigger into notifications and step jobs.

One notification per subscriber (topics resolved to their members, duplicates
collapsed, the actor left out of topic fan-out, inline subscriber objects
upserted with only the fields given) and one job per active step, chained in
step order: the first is queued, the others wait (pending) for the one before.

Large audiences are expanded in batches, each its own transaction: the event
job remembers where it stopped (``data.phase``/``data.cursor``) and is queued
again, so a 100k-member topic never holds one transaction for minutes, and a
crash resumes where the last batch committed. The unique index on
(event, subscriber) makes a replayed batch harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.repository import EngineRepository
from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.models import Event, ExecutionDetail, Job

BATCH_SIZE = 1000


@dataclass
class ExpansionProgress:
    """Whether the event is fully expanded, and how many notifications this batch made."""

    done: bool
    created: int


def active_steps(event: Event) -> list[dict[str, Any]]:
    return [step for step in event.steps or [] if step.get("active", True)]


def _step_jobs(event: Event, notification_id: str, subscriber_id: str, now: Any) -> list[dict[str, Any]]:
    rows = []
    for index, step in enumerate(active_steps(event)):
        template = step.get("template") or {}
        rows.append(
            {
                "id": new_id(),
                "environment_id": event.environment_id,
                "organization_id": event.organization_id,
                "kind": "step",
                "status": "queued" if index == 0 else "pending",
                "event_id": event.id,
                "transaction_id": event.transaction_id,
                "workflow_id": event.workflow_id,
                "notification_id": notification_id,
                "subscriber_id": subscriber_id,
                "parent_id": None,
                "step_id": step.get("_id") or step.get("uuid") or str(index),
                "step_type": template.get("type") or step.get("type"),
                "step_index": index,
                "run_at": now,
                "attempts": 0,
                "max_attempts": 5,
                "data": {},
                "digest_key": None,
                "merged_into": None,
                "created_at": now,
                "updated_at": now,
            }
        )
    # Chain each job to the one before it.
    for previous, current in zip(rows, rows[1:], strict=False):
        current["parent_id"] = previous["id"]
    return rows


async def _create_notifications(
    repository: EngineRepository, event: Event, subscribers: list[tuple[str, str]]
) -> int:
    """Notifications and step jobs for (internal id, subscriberId) pairs; returns how many were new."""
    if not subscribers:
        return 0
    now = utcnow()
    channels = sorted({(step.get("template") or {}).get("type") for step in active_steps(event)} & {"in_app", "email", "sms", "chat", "push"})
    rows = [
        {
            "id": new_id(),
            "environment_id": event.environment_id,
            "organization_id": event.organization_id,
            "event_id": event.id,
            "workflow_id": event.workflow_id,
            "subscriber_id": internal_id,
            "transaction_id": event.transaction_id,
            "channels": channels,
            "to": {"subscriberId": subscriber_id},
            "payload": event.payload,
            "created_at": now,
        }
        for internal_id, subscriber_id in subscribers
    ]
    inserted = await repository.insert_notifications(rows)
    jobs: list[dict[str, Any]] = []
    for notification_id, internal_id in inserted:
        jobs.extend(_step_jobs(event, notification_id, internal_id, now))
    for start in range(0, len(jobs), BATCH_SIZE):
        await repository.insert_jobs(jobs[start : start + BATCH_SIZE])
    return len(inserted)


async def expand_event(session: AsyncSession, job: Job) -> ExpansionProgress:
    """Run one batch of the expansion of ``job``'s event (see the module docstring)."""
    repository = EngineRepository(session)
    event = await repository.get_event(job.event_id)
    if event is None:
        raise LookupError(f"event {job.event_id} of job {job.id} does not exist")
    data = dict(job.data or {})
    phase = data.get("phase", "direct")
    actor_id = (event.actor or {}).get("subscriberId")
    created = 0

    if phase == "direct":
        if event.tenant:
            await repository.upsert_tenant(event.environment_id, event.organization_id, event.tenant)
        if event.actor:
            await repository.upsert_subscribers(event.environment_id, event.organization_id, [event.actor])
        direct = _collapse([r for r in event.recipients if r.get("type") == "Subscriber"])
        ids = await repository.upsert_subscribers(event.environment_id, event.organization_id, direct)
        created += await _create_notifications(
            repository, event, [(ids[entry["subscriberId"]], entry["subscriberId"]) for entry in direct]
        )
        topics = [r for r in event.recipients if r.get("type") == "Topic"]
        phase = "broadcast" if event.kind == "broadcast" else ("topics" if topics else "done")
        data.update(phase=phase, cursor="")
        if phase == "done":
            return _finish(job, data, created)

    if phase == "topics":
        topics = [r for r in event.recipients if r.get("type") == "Topic"]
        topic_ids = await repository.topic_ids(event.environment_id, [t["topicKey"] for t in topics])
        excluded = {value for topic in topics for value in topic.get("exclude") or []}
        if actor_id:
            excluded.add(actor_id)
        members = await repository.topic_members_after(topic_ids, data.get("cursor", ""), BATCH_SIZE)
        created += await _create_notifications(
            repository, event, [(internal, external) for internal, external in members if external not in excluded]
        )
        return _advance(job, data, members, created)

    if phase == "broadcast":
        members = await repository.environment_subscribers_after(event.environment_id, data.get("cursor", ""), BATCH_SIZE)
        created += await _create_notifications(
            repository, event, [(internal, external) for internal, external in members if external != actor_id]
        )
        return _advance(job, data, members, created)

    return _finish(job, data, created)


def _collapse(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per subscriberId; fields given in later entries add to earlier ones."""
    merged: dict[str, dict[str, Any]] = {}
    for entry in entries:
        fields = {key: value for key, value in entry.items() if key != "type"}
        merged.setdefault(entry["subscriberId"], {}).update(fields)
    return list(merged.values())


def _advance(job: Job, data: dict[str, Any], members: list[tuple[str, str]], created: int) -> ExpansionProgress:
    if len(members) < BATCH_SIZE:
        return _finish(job, data, created)
    data["cursor"] = members[-1][0]
    data["created"] = data.get("created", 0) + created
    job.data = data
    return ExpansionProgress(done=False, created=created)


def _finish(job: Job, data: dict[str, Any], created: int) -> ExpansionProgress:
    data["phase"] = "done"
    data["created"] = data.get("created", 0) + created
    job.data = data
    return ExpansionProgress(done=True, created=created)


def expansion_detail(job: Job, progress: ExpansionProgress) -> ExecutionDetail:
    total = (job.data or {}).get("created", 0)
    return ExecutionDetail(
        environment_id=job.environment_id,
        organization_id=job.organization_id,
        job_id=job.id,
        transaction_id=job.transaction_id,
        status="Success" if progress.done else "Pending",
        detail=(
            f"Trigger expanded into {total} notifications"
            if progress.done
            else f"Trigger expansion in progress: {total} notifications so far"
        ),
    )
