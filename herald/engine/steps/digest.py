"""The digest step: gather a subscriber's events into one run of the steps after it.

regular: the first event opens a digest for (workflow step, subscriber,
payload[digestKey]) that stays open for amount/unit; events arriving meanwhile
are merged into it. backoff: an event with no other of the same key within
backoffAmount/backoffUnit goes straight through (the steps after it see a
digest of that one event); later ones digest as regular.
timed: the digest stays open until the next time the TimedConfig names, in the
subscriber's timezone. When the digest closes, the steps after it see
``step.digest``, ``step.events`` (the payloads, oldest first) and
``step.total_count``. The partial unique index ``uq_jobs_open_digest`` allows
one open digest per key, so two events racing to open one end as one digest.

The window is one of trigger time: an event triggered before the digest's
window ends belongs to it, however late the workers come to it. When the
window ends with such events still on their way (triggers not yet expanded,
jobs at the digest step not yet run, as under a backlog), the digest stays open
a little longer, ``ARRIVAL_WAIT`` at a time, until they have merged into it;
and an event that finds its digest being closed waits for the close to finish
or to keep the digest open. Without either, a burst of 10,000 events that the
workers took longer than the window to reach came out as two digests.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from herald.engine.repository import EngineRepository
from herald.engine.schedule import ScheduleError, add_duration, next_timed_occurrence, subtract_duration
from herald.engine.steps.base import Detail, StepContext, StepOutcome
from herald.kit.time import isoformat, parse_iso
from herald.models import Job

# How long a digest whose window has ended stays open again while events
# triggered within it are on their way.
ARRIVAL_WAIT = timedelta(milliseconds=250)
# How often, and how many times, an event that finds its digest being closed
# looks again (a close takes milliseconds; the bound is for a worker that died
# closing it, whose lease then runs out).
CLOSE_POLL_SECONDS = 0.05
CLOSE_POLLS = 100


def digest_value(payload: dict[str, Any], digest_key: str | None) -> str:
    """The payload value events are grouped by ("" when the step has no digestKey)."""
    if not digest_key:
        return ""
    value: Any = payload
    for part in digest_key.removeprefix("payload.").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


async def run(ctx: StepContext) -> StepOutcome:
    metadata = ctx.metadata
    key = digest_value(ctx.payload, metadata.get("digestKey"))
    if (ctx.job.data or {}).get("digest_open"):
        return await _close(ctx, key)
    kind = metadata.get("type", "regular")
    try:
        async with ctx.sessionmaker() as session:
            repository = EngineRepository(session)
            if kind == "backoff" or metadata.get("backoff"):
                window_start = subtract_duration(ctx.now, metadata.get("backoffAmount"), metadata.get("backoffUnit"))
                if await repository.recent_digest_jobs(ctx.job, key, window_start) == 0:
                    # As in Novu, the steps after it see a digest of this one event.
                    return StepOutcome(
                        "skipped",
                        details=[Detail("Success", "No other event within the backoff window: sent without digest")],
                        result={"events": [ctx.payload], "total_count": 1},
                        digest_key=key,
                    )
            open_digest = await repository.open_digest(ctx.job, key)
        if open_digest is None:
            open_digest = await _after_its_close(ctx, key)
        if open_digest is not None:
            return StepOutcome(
                "merged",
                details=[Detail("Success", f"Merged into the digest of job {open_digest.id}")],
                merged_into=open_digest.id,
                digest_key=key,
            )
        if kind == "timed":
            until = next_timed_occurrence(
                metadata.get("timed") or {},
                metadata.get("unit") or "days",
                metadata.get("amount") or 1,
                ctx.now,
                ctx.subscriber.timezone,
            )
        else:
            until = add_duration(ctx.now, metadata.get("amount"), metadata.get("unit"))
    except (ScheduleError, ValueError, TypeError) as exc:
        return StepOutcome.failed(f"Digest misconfigured: {exc}")
    return StepOutcome(
        "delayed",
        details=[Detail("Pending", f"Digest open until {isoformat(until)}")],
        run_at=until,
        data={"digest_open": True, "window_end": until.isoformat()},
        digest_key=key,
    )


async def _close(ctx: StepContext, key: str) -> StepOutcome:
    """Close the digest with every event merged into it, unless events from within its window are still coming."""
    async with ctx.sessionmaker() as session:
        repository = EngineRepository(session)
        waiting = await _events_on_their_way(repository, ctx.job, ctx.metadata.get("digestKey"), key)
        # Another digest of the key open meanwhile (one for events triggered
        # after this one's window) leaves no room to stay open: close now.
        if waiting and await repository.open_digest(ctx.job, key) is None:
            return StepOutcome(
                "delayed",
                details=[Detail("Pending", f"Digest kept open: events triggered within its window are on their way ({waiting})")],
                run_at=ctx.now + ARRIVAL_WAIT,
                digest_key=key,
            )
        events = await repository.digest_payloads(ctx.job.id)
    return StepOutcome(
        "completed",
        details=[Detail("Success", f"Digest closed with {len(events)} events")],
        result={"events": events, "total_count": len(events)},
        digest_key=key,
    )


def window_end(master: Job) -> datetime:
    """When the digest's window ends: its first close time (``run_at`` moves while it is kept open)."""
    value = (master.data or {}).get("window_end")
    return parse_iso(value) if isinstance(value, str) else master.run_at


async def _events_on_their_way(repository: EngineRepository, master: Job, digest_key: str | None, key: str) -> str:
    """What still comes to this digest from within its window, in words ("" when nothing does)."""
    end = window_end(master)
    arriving = sum(1 for payload in await repository.digest_arrivals(master, end) if digest_value(payload, digest_key) == key)
    expanding = await repository.triggers_being_expanded(master.workflow_id, end)
    parts = [f"{arriving} at its step"] if arriving else []
    parts += [f"{expanding} of the workflow's triggers not yet expanded"] if expanding else []
    return ", ".join(parts)


async def _after_its_close(ctx: StepContext, key: str) -> Job | None:
    """The digest to merge into once the close of the one this event was triggered within has settled.

    A digest found closing either closes for good (then this event opens the
    next one: None) or, having found this event on its way, stays open and is
    returned. Digests whose window ended before this event was triggered are
    not waited for.
    """
    triggered = ctx.event.created_at
    for _ in range(CLOSE_POLLS):
        async with ctx.sessionmaker() as session:
            repository = EngineRepository(session)
            closing = [job for job in await repository.closing_digests(ctx.job, key) if window_end(job) >= triggered]
            if not closing:
                return None
            for job in closing:
                # Closed in this event's own batch: its close, which counts this
                # event as on its way and keeps the digest open, is written
                # before the batch's merges (JobRunner._run_steps). Waiting here
                # would hold the batch that writes it.
                if job.locked_by == ctx.worker_id:
                    return job
            open_digest = await repository.open_digest(ctx.job, key)
            if open_digest is not None:
                return open_digest
        await asyncio.sleep(CLOSE_POLL_SECONDS)
    return None
