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
"""

from __future__ import annotations

from typing import Any

from herald.engine.repository import EngineRepository
from herald.engine.schedule import ScheduleError, add_duration, next_timed_occurrence, subtract_duration
from herald.engine.steps.base import Detail, StepContext, StepOutcome
from herald.kit.time import isoformat


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
    async with ctx.sessionmaker() as session:
        repository = EngineRepository(session)
        if (ctx.job.data or {}).get("digest_open"):
            events = await repository.digest_payloads(ctx.job.id)
            return StepOutcome(
                "completed",
                details=[Detail("Success", f"Digest closed with {len(events)} events")],
                result={"events": events, "total_count": len(events)},
                digest_key=key,
            )
        kind = metadata.get("type", "regular")
        try:
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
        data={"digest_open": True},
        digest_key=key,
    )
