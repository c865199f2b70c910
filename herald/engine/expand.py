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

An audience of more than one batch is shared out: the event job reads where
each batch of members ends and queues one *part* per batch (an event job of
``phase`` "part" with the range it covers), which any worker takes. Expanded
by one job, a million-member topic was one worker's serial work while the
others waited for its steps. The parts and the cursor that moved past them
are written in one transaction, so a crash loses no range and expands none
twice. The last of the parts to finish (or the event job, should every part
finish before it) writes the trigger's "expanded into" detail.

The in-app first steps of a topic's or broadcast's members are run inside
their batch's transaction (``HandOff.settle``), as a direct recipient's are:
queued for a worker, each cost a claim, a read and a write more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine import topic_preferences
from herald.engine.queue import job_from_row
from herald.engine.repository import EngineRepository, detail_row
from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.models import Event, Job, Message

BATCH_SIZE = 1000
# Parts an event job queues in one round: its read of where they end is one
# index range of PARTS_PER_ROUND * BATCH_SIZE members.
PARTS_PER_ROUND = 20
# How long after its event job a part is due (_queue_parts).
PART_DELAY = timedelta(microseconds=1)
# Groups of expansions a worker runs side by side in a round (share_out).
GROUPS_AT_ONCE = 2
PART = "part"
# Set in the session's info when the expansion wrote steps that any worker may
# claim (first steps not handed off): only then are the other workers woken.
QUEUED_FOR_ANY_WORKER = "queued_for_any_worker"


@dataclass
class SettledSteps:
    """First steps run inside their expansion's transaction: which, and what they wrote."""

    job_ids: set[str] = field(default_factory=set)
    messages: list[Message] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    # In-app messages whose socket event waits for the subscriber's quiet hours to end: until when, by job id.
    held_received: dict[str, datetime] = field(default_factory=dict)


# Runs first steps before their jobs are written (JobRunner.settle_in_expansion):
# each (event, the notification's chain of job rows) it settles has its rows
# changed in place and is recorded in the SettledSteps.
SettleFirstSteps = Callable[[EngineRepository, list[tuple[Event, list[dict[str, Any]]]], SettledSteps], Awaitable[None]]


@dataclass
class HandOff:
    """First steps the expanding worker takes for itself, already claimed, to run at once.

    Without it a new notification's first step waits for the worker's next
    claim round; with it a trigger's in-app message is stored in the same
    round as its expansion. Only small expansions are handed off (``limit``):
    the steps of a large fan-out stay queued for every worker to share.
    """

    worker_id: str
    lease_seconds: float
    limit: int
    jobs: list[Job] = field(default_factory=list)
    # The events of those jobs, as the expansion read them: running the steps
    # needs them again, and reading them twice cost a query and their JSON.
    events: dict[str, Event] = field(default_factory=dict)
    # Steps that need nothing but the store (an in-app message) are run in the
    # expansion's own transaction instead, written with it as already finished:
    # the round trips of a claim's worth of work (read, BEGIN, the job's update,
    # its message, its details, the next step's release, COMMIT) become one
    # insert of messages inside a transaction that was open anyway.
    settle: SettleFirstSteps | None = None
    settled: SettledSteps = field(default_factory=SettledSteps)

    @property
    def room(self) -> int:
        return max(self.limit - len(self.jobs), 0)

    def take(self, row: dict[str, Any], now: Any, event: Event) -> None:
        if not self.room:
            return
        row.update(status="running", locked_by=self.worker_id, locked_until=now + timedelta(seconds=self.lease_seconds), attempts=1)
        self.jobs.append(job_from_row(row))
        self.events[event.id] = event

    async def settle_first_steps(
        self, repository: EngineRepository, chains: list[tuple[Event, list[dict[str, Any]]]], now: Any
    ) -> None:
        """Settle what can be settled now, and take the other first steps (up to ``limit``)."""
        chains = chains[: self.room]
        if self.settle is not None and chains:
            await self.settle(repository, chains, self.settled)
        for event, rows in chains:
            if rows[0]["id"] not in self.settled.job_ids:
                self.take(rows[0], now, event)

    def absorb(self, other: HandOff) -> None:
        """Add what another expansion of this batch handed off."""
        self.jobs += other.jobs
        self.events.update(other.events)


@dataclass
class ExpansionProgress:
    """Whether the event is fully expanded, and how many notifications this batch made."""

    done: bool
    created: int


# Where an event read for its expansion keeps its job's trace (kit/tracing.py) for the step jobs.
TRACE_CONTEXT = "_trace_context"


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
                "locked_by": None,
                "locked_until": None,
                "created_at": now,
                "updated_at": now,
            }
        )
    # Chain each job to the one before it.
    for previous, current in zip(rows, rows[1:], strict=False):
        current["parent_id"] = previous["id"]
    # The trigger's trace, carried from the event's job (expand_events) while traces are on.
    trace_context = event.__dict__.get(TRACE_CONTEXT)
    if trace_context is not None:
        for row in rows:
            row["trace_context"] = trace_context
    return rows


def _notification_row(event: Event, internal_id: str, subscriber_id: str, now: Any) -> dict[str, Any]:
    channels = sorted({(step.get("template") or {}).get("type") for step in active_steps(event)} & {"in_app", "email", "sms", "chat", "push"})
    return {
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


async def _create_notifications(
    repository: EngineRepository,
    events: dict[str, Event],
    audience: list[tuple[Event, str, str]],
    hand_off: HandOff | None = None,
    settle_only: bool = False,
) -> Counter[str]:
    """Notifications and step jobs for (event, internal id, subscriberId); returns how many were new per event.

    ``settle_only``: the hand-off settles the first steps it can (in-app) and
    takes none of the others, which stay queued for any worker: a batch of a
    large audience is more than one worker's claim.
    """
    created: Counter[str] = Counter()
    now = utcnow()
    if hand_off is not None and len(audience) > hand_off.room:
        settle_only = True  # more than this worker takes in a round: only what it settles in the transaction
    for start in range(0, len(audience), BATCH_SIZE):
        rows = [_notification_row(event, internal, external, now) for event, internal, external in audience[start : start + BATCH_SIZE]]
        inserted = await repository.insert_notifications(rows)
        jobs: list[dict[str, Any]] = []
        chains: list[tuple[Event, list[dict[str, Any]]]] = []
        for notification_id, internal_id, event_id in inserted:
            rows = _step_jobs(events[event_id], notification_id, internal_id, now)
            if rows:
                chains.append((events[event_id], rows))
            jobs.extend(rows)
            created[event_id] += 1
        if hand_off is not None and settle_only:
            if hand_off.settle is not None and chains:
                await hand_off.settle(repository, chains, hand_off.settled)
        elif hand_off is not None:
            await hand_off.settle_first_steps(repository, chains, now)
        for first in range(0, len(jobs), BATCH_SIZE):
            await repository.insert_jobs(jobs[first : first + BATCH_SIZE])
        if any(row["status"] == "queued" for row in jobs):
            repository.session.info[QUEUED_FOR_ANY_WORKER] = True
    return created


async def expand_event(session: AsyncSession, job: Job) -> ExpansionProgress:
    """Run one batch of the expansion of ``job``'s event (see the module docstring)."""
    return (await expand_events(session, [job]))[job.id]


async def expand_events(
    session: AsyncSession, jobs: list[Job], hand_off: HandOff | None = None
) -> dict[str, ExpansionProgress]:
    """Run one batch of the expansion of each job's event, in the session's transaction.

    The direct recipients of every event are expanded together (one upsert of
    subscribers per environment, one insert of notifications and of jobs per
    thousand rows), so a burst of single-recipient triggers costs a handful of
    statements, not a handful per trigger. Topics and broadcasts then go on
    event by event, a batch of members at a time.
    """
    repository = EngineRepository(session)
    events = await repository.get_events([job.event_id for job in jobs])
    for job in jobs:
        if job.event_id not in events:
            raise LookupError(f"event {job.event_id} of job {job.id} does not exist")
        if job.trace_context is not None:
            # Not a column of events: read by _step_jobs, for the step jobs of this event.
            events[job.event_id].__dict__[TRACE_CONTEXT] = job.trace_context
    direct = [job for job in jobs if (job.data or {}).get("phase", "direct") == "direct"]
    created = await _expand_direct(repository, events, direct, hand_off)
    return {
        job.id: await _expand_members(repository, job, events[job.event_id], created[job.event_id], hand_off)
        for job in jobs
    }


def share_out(jobs: list[Job], recipients: Mapping[str, int]) -> tuple[list[list[Job]], list[Job]]:
    """The expansions of a claim to run in this round, in groups, and those to give back.

    A claim takes every due job up to the worker's batch size, oldest first:
    the parts of a large fan-out, all due at their trigger's time, or a bulk
    trigger's events of a thousand recipients each. Expanded by the worker
    that claimed them, one after the other, they were its serial work while
    the other workers waited for steps. Each group is about one batch of
    recipients, expanded in a transaction of its own; single-recipient
    triggers still share one. The worker runs ``GROUPS_AT_ONCE`` groups side
    by side, so that one's statements run while the other renders.
    """
    groups: list[list[Job]] = []
    returned: list[Job] = []
    weight = 0
    for job in jobs:
        data = job.data or {}
        if is_part(job):
            size = BATCH_SIZE
        elif data.get("phase", "direct") == "direct":
            size = recipients.get(job.event_id, 1)  # by event id: ``to``'s length
        else:
            size = 1  # an event job's round of queueing parts reads ids only
        if groups and weight + size <= BATCH_SIZE:
            groups[-1].append(job)
            weight += size
        elif len(groups) < GROUPS_AT_ONCE:
            groups.append([job])
            weight = size
        else:
            returned.append(job)
    return groups, returned


async def _expand_direct(
    repository: EngineRepository, events: dict[str, Event], jobs: list[Job], hand_off: HandOff | None
) -> Counter[str]:
    """The subscribers named in ``to`` (and the actors and tenants) of each job's event."""
    entries: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for job in jobs:
        event = events[job.event_id]
        if event.tenant:
            await repository.upsert_tenant(event.environment_id, event.organization_id, event.tenant)
        named = [event.actor] if event.actor else []
        named += [r for r in event.recipients if r.get("type") == "Subscriber"]
        entries.setdefault((event.environment_id, event.organization_id), []).extend(named)
    # Later entries add to earlier ones, as if the events had been expanded one by one.
    ids: dict[str, dict[str, str]] = {}
    left_out: dict[str, dict[str, list[str]]] = {}
    # First steps settled in the expansion need their subscribers' rows: read
    # whole at once, they are not read a second time. (An audience larger than
    # the hand-off's room is not handed off at all: _create_notifications.)
    whole = hand_off is not None and hand_off.settle is not None and sum(map(len, entries.values())) <= hand_off.room
    for (environment_id, organization_id), named in entries.items():
        left_out[environment_id] = {}
        ids[environment_id] = await repository.upsert_subscribers(
            environment_id, organization_id, _collapse(named), left_out[environment_id], whole=whole
        )
    audience = []
    for job in jobs:
        event = events[job.event_id]
        named = _collapse([r for r in event.recipients if r.get("type") == "Subscriber"])
        for entry in named:
            audience.append((event, ids[event.environment_id][entry["subscriberId"]], entry["subscriberId"]))
        topics = any(r.get("type") == "Topic" for r in event.recipients)
        phase = "broadcast" if event.kind == "broadcast" else ("topics" if topics else "done")
        job.data = {**(job.data or {}), "phase": phase, "cursor": ""}
        reasons = left_out.get(event.environment_id, {})
        subscriber_ids = [entry["subscriberId"] for entry in named] + ([event.actor["subscriberId"]] if event.actor else [])
        notes = [
            f"channel of subscriber {subscriber_id} not saved: {reason}"
            for subscriber_id in dict.fromkeys(subscriber_ids)
            for reason in reasons.get(subscriber_id, [])
        ]
        if notes:
            job.data["notes"] = notes
    return await _create_notifications(repository, events, audience, hand_off)


async def _expand_members(
    repository: EngineRepository, job: Job, event: Event, created: int, hand_off: HandOff | None = None
) -> ExpansionProgress:
    """One round of the event's topic members or, for a broadcast, of the environment's subscribers.

    The event job expands an audience of one batch itself and queues parts for
    a larger one; a part expands the members of its range (the module docstring).
    """
    data = dict(job.data or {})
    phase = data.get("phase")
    if phase not in ("topics", "broadcast", PART):
        return _finish(job, data, created)
    source = data.get("source", phase) if phase == PART else phase
    audience = await _Audience.of(repository, event, source)
    if phase == PART:
        cursor = data.get("cursor") or data.get("after", "")
        members = await audience.after(cursor, BATCH_SIZE, through=data.get("through"))
        created += await audience.expand(members, data, hand_off)
        if members and members[-1][0] == data.get("through"):
            return _finish(job, data, created)  # the range's last member: no read more to find none after it
        return _advance(job, data, members, created)

    limit = BATCH_SIZE * PARTS_PER_ROUND
    members = await audience.after(data.get("cursor", ""), limit)
    if len(members) <= BATCH_SIZE and len(members) < limit and not data.get("parts"):
        created += await audience.expand(members, data, hand_off)
        return _finish(job, data, created)
    await _queue_parts(repository, job, source, data.get("cursor", ""), members)
    data["parts"] = data.get("parts", 0) + -(-len(members) // BATCH_SIZE)
    data["created"] = data.get("created", 0) + created
    if len(members) < limit:
        data["phase"] = "done"
        job.data = data
        return ExpansionProgress(done=True, created=created)
    data["cursor"] = members[-1][0]
    job.data = data
    return ExpansionProgress(done=False, created=created)


@dataclass
class _Audience:
    """Who a topic trigger or a broadcast reaches, read a range at a time, and the expansion of a range."""

    repository: EngineRepository
    event: Event
    source: str
    # For topics: each topic's id and the subscriberIds its exclude list leaves out of it.
    excluded_by_topic: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    async def of(cls, repository: EngineRepository, event: Event, source: str) -> _Audience:
        audience = cls(repository, event, source)
        if source != "topics":
            return audience
        topics = [r for r in event.recipients if r.get("type") == "Topic"]
        ids = await repository.topics_by_key(event.environment_id, [t["topicKey"] for t in topics])
        # Each topic's exclude list applies to that topic (as in Novu): a member
        # it leaves out is still reached through another topic of the trigger.
        # A topic named twice leaves out only who both entries leave out.
        excluded_by_topic: dict[str, set[str]] = {}
        for topic in topics:
            if topic["topicKey"] not in ids:
                continue
            topic_id, excluded = ids[topic["topicKey"]], set(topic.get("exclude") or [])
            excluded_by_topic[topic_id] = excluded_by_topic[topic_id] & excluded if topic_id in excluded_by_topic else excluded
        audience.excluded_by_topic = {topic_id: sorted(excluded) for topic_id, excluded in excluded_by_topic.items()}
        return audience

    async def after(self, cursor: str, limit: int, through: str | None = None) -> list[tuple[str, str]]:
        """(internal id, subscriberId) of up to ``limit`` members after ``cursor`` (and up to ``through``), in id order."""
        if self.source == "topics":
            return await self.repository.topic_members_after(self.excluded_by_topic, cursor, limit, through=through)
        return await self.repository.environment_subscribers_after(self.event.environment_id, cursor, limit, through=through)

    async def expand(self, members: list[tuple[str, str]], data: dict[str, Any], hand_off: HandOff | None) -> int:
        """Notifications and step jobs for ``members`` (the actor left out); returns how many were new."""
        event = self.event
        actor_id = (event.actor or {}).get("subscriberId")
        audience = [(event, internal, external) for internal, external in members if external != actor_id]
        if self.source == "topics":
            # The subscriptions' own preferences (herald/engine/topic_preferences.py) leave some members out.
            screened = await topic_preferences.screen(self.repository.session, event, list(self.excluded_by_topic), audience)
            if screened.left_out:
                data["leftOutByPreferences"] = data.get("leftOutByPreferences", 0) + screened.left_out
                data["notes"] = list(dict.fromkeys([*data.get("notes", []), *screened.problems]))
            audience = screened.kept
        created = await _create_notifications(self.repository, {event.id: event}, audience, hand_off, settle_only=True)
        return created[event.id]


async def _queue_parts(repository: EngineRepository, job: Job, source: str, cursor: str, members: list[tuple[str, str]]) -> None:
    """One queued part per batch of ``members``, covering the ids after the batch before it up to its own last.

    A part runs a microsecond after its event job (``PART_DELAY``): claims
    take the oldest first, so the parts go before the steps they make, and
    the event job before its parts. Due at the same time, the event job's
    row, written after its parts, came after them in the index, and the
    workers ran out of parts before it queued the next ones.
    """
    now = utcnow()
    rows = []
    for start in range(0, len(members), BATCH_SIZE):
        through = members[min(start + BATCH_SIZE, len(members)) - 1][0]
        rows.append(
            {
                "id": new_id(),
                "environment_id": job.environment_id,
                "organization_id": job.organization_id,
                "kind": "event",
                "status": "queued",
                "event_id": job.event_id,
                "transaction_id": job.transaction_id,
                "workflow_id": job.workflow_id,
                "run_at": job.run_at + PART_DELAY,
                "attempts": 0,
                "max_attempts": job.max_attempts,
                "data": {"phase": PART, "source": source, "after": cursor, "through": through, "partOf": job.id},
                "created_at": now,
                "updated_at": now,
            }
        )
        if job.trace_context is not None:
            rows[-1]["trace_context"] = job.trace_context
        cursor = through
    await repository.insert_jobs(rows)
    repository.session.info[QUEUED_FOR_ANY_WORKER] = True


def is_part(job: Job) -> bool:
    """Whether ``job`` expands one range of a larger event job's audience."""
    return (job.data or {}).get("phase") == PART or bool((job.data or {}).get("partOf"))


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


def expansion_failed_detail(job: Job, reason: str) -> str:
    """What an expansion that will not be tried again says: why, and how far it got."""
    made = (job.data or {}).get("created", 0)
    reached = (
        f"{made} notifications of this part of the audience were made before it stopped, the rest of the part was not reached"
        if is_part(job)
        else f"{made} notifications were made before it stopped, the rest of the audience was not reached"
    )
    return f"Trigger expansion failed for good after {job.attempts} attempts: {reason}; {reached}"


def expansion_detail(job: Job, progress: ExpansionProgress, total: int | None = None) -> dict[str, Any]:
    """The event job's detail: in progress, or expanded into ``total`` (or its own count of) notifications."""
    total = (job.data or {}).get("created", 0) if total is None else total
    text = (
        f"Trigger expanded into {total} notifications"
        if progress.done
        else f"Trigger expansion in progress: {total} notifications so far"
    )
    text += _left_out(job)
    return detail_row(job, "Success" if progress.done else "Pending", text)


def _left_out(job: Job) -> str:
    left_out = (job.data or {}).get("leftOutByPreferences", 0)
    text = f"; {left_out} topic subscribers left out by their subscription's preferences" if left_out else ""
    return text + "".join(f"; {note}" for note in (job.data or {}).get("notes", []))


async def expansion_details(
    repository: EngineRepository, jobs: list[Job], progress: dict[str, ExpansionProgress]
) -> list[dict[str, Any]]:
    """The details of the expansions a round finished, once its jobs' rows say so (in the same transaction).

    An event job that queued parts is expanded when the last of its jobs
    finishes, whichever that is: the one that finds none of the others left
    writes the event job's detail, counting the event's notifications. Its
    row is locked first, so of two parts finishing at once the second to
    commit sees the first finished. A part says nothing of its own unless it
    left members out or has a note. (A part that failed a round and waits to
    be tried again runs later than the trigger, out of the range read for
    what is left: should it finish last, a second such detail gives the new count.)
    """
    rows: list[dict[str, Any]] = []
    written: set[str] = set()
    for job in jobs:
        if not progress[job.id].done:
            continue
        if not is_part(job) and not (job.data or {}).get("parts"):
            rows.append(expansion_detail(job, progress[job.id]))
            continue
        if is_part(job):
            if _left_out(job):
                rows.append(detail_row(job, "Success", f"Part of the trigger's expansion: {(job.data or {}).get('created', 0)} notifications" + _left_out(job)))
            event_job = await repository.lock_job_fresh(job.data["partOf"])
        else:
            event_job = job
        if event_job is None or event_job.id in written or event_job.status != "completed":
            continue
        if await repository.expansion_parts_left(event_job.event_id, event_job.run_at + PART_DELAY):
            continue
        written.add(event_job.id)
        total = await repository.count_event_notifications(event_job.event_id)
        rows.append(expansion_detail(event_job, ExpansionProgress(done=True, created=0), total=total))
    return rows
