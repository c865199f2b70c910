"""The delay step: wait a fixed time (regular) or until a date in the payload (scheduled)."""

from __future__ import annotations

from herald.engine.schedule import ScheduleError, add_duration, scheduled_delay_until
from herald.engine.steps.base import Detail, StepContext, StepOutcome
from herald.kit.time import isoformat


async def run(ctx: StepContext) -> StepOutcome:
    waited_until = (ctx.job.data or {}).get("wait_until")
    if waited_until is not None:
        return StepOutcome.done(f"Delay finished (was until {waited_until})")
    metadata = ctx.metadata
    try:
        if metadata.get("type") == "scheduled":
            until = scheduled_delay_until(ctx.payload, metadata.get("delayPath") or "", ctx.now)
        else:
            until = add_duration(ctx.now, metadata.get("amount"), metadata.get("unit"))
    except (ScheduleError, ValueError, TypeError) as exc:
        return StepOutcome.failed(f"Delay misconfigured: {exc}")
    if until <= ctx.now:
        return StepOutcome.done("Delay of zero length")
    return StepOutcome(
        "delayed",
        details=[Detail("Pending", f"Delayed until {isoformat(until)}")],
        run_at=until,
        data={"wait_until": isoformat(until)},
    )
