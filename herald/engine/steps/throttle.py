"""The throttle step: at most ``threshold`` runs per window reach the steps after it.

Metadata, as Novu's throttle step: ``{type: fixed, amount, unit, threshold,
throttleKey}``, or ``{type: dynamic, dynamicKey, threshold, throttleKey}``
where the window's length is read from the payload at ``dynamicKey`` (a
number of seconds, or ``{amount, unit}``). ``threshold`` defaults to 1.

Runs are counted per workflow, step, subscriber and the payload value at
``throttleKey`` (none: one count for the subscriber). The first run opens a
window of the given length; every run that reaches the step in it counts, and
those past the threshold stop here: the step is ``canceled`` with an execution
detail, and the steps after it with it. The next run after the window closed
opens a new one.

The count is one upsert (EngineRepository.count_throttle_run), exact
under concurrent runs on any number of workers: PostgreSQL serialises the
conflicting inserts on the row, SQLite has one writer. It commits on its own,
before the job's outcome is written: a worker that dies between the two
counts the run again when the job is retried, which can only throttle early,
never let more through.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime
from typing import Any

from herald.engine.filters import MISSING, lookup
from herald.engine.repository import EngineRepository
from herald.engine.schedule import ScheduleError, add_duration
from herald.engine.steps.base import Detail, StepContext, StepOutcome
from herald.engine.steps.delivery import log_delivery
from herald.kit.time import isoformat


class ThrottleError(ValueError):
    pass


def throttle_key_value(payload: dict[str, Any], throttle_key: str | None) -> str:
    """The payload value runs are counted by ("" when the step has no throttleKey or the payload lacks it)."""
    if not throttle_key:
        return ""
    value = lookup(payload, throttle_key.removeprefix("payload."))
    return "" if value is MISSING or value is None else str(value)


def window_end(metadata: dict[str, Any], payload: dict[str, Any], now: datetime) -> datetime:
    """When a window opened ``now`` closes."""
    if metadata.get("type") == "dynamic":
        path = str(metadata.get("dynamicKey") or "")
        given = lookup(payload, path.removeprefix("payload.")) if path else MISSING
        if given is MISSING or given is None:
            raise ThrottleError(f"the payload has no window length at {path!r} (dynamicKey)")
        if isinstance(given, dict):
            return add_duration(now, given.get("amount"), given.get("unit"))
        if isinstance(given, bool) or not isinstance(given, int | float):
            raise ThrottleError(f"the window length at {path!r} must be a number of seconds or {{amount, unit}}")
        return add_duration(now, given, "seconds")
    return add_duration(now, metadata.get("amount"), metadata.get("unit"))


def scope_of(ctx: StepContext, key: str) -> str:
    """What one count is kept under: the workflow, the step, the subscriber and the key's value."""
    parts = (ctx.job.workflow_id or "", ctx.job.step_id or "", ctx.job.subscriber_id or "", key)
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


async def run(ctx: StepContext) -> StepOutcome:
    metadata = ctx.metadata
    threshold = metadata.get("threshold", 1)
    key = throttle_key_value(ctx.payload, metadata.get("throttleKey"))
    try:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise ThrottleError(f"threshold must be a whole number of at least 1, not {threshold!r}")
        ends_at = window_end(metadata, ctx.payload, ctx.now)
    except (ThrottleError, ScheduleError, ValueError, TypeError) as exc:
        # As Novu's action steps: a throttle that cannot count stops the run rather than let it through.
        return StepOutcome.failed(f"Throttle misconfigured: {exc}", halt=True)
    if ends_at <= ctx.now:
        return StepOutcome.failed("Throttle misconfigured: the window has no length", halt=True)
    async with ctx.sessionmaker() as session, session.begin():
        count, closes_at = await EngineRepository(session).count_throttle_run(
            ctx.job.environment_id, scope_of(ctx, key), ctx.now, ends_at
        )
    keyed = f" and {metadata.get('throttleKey')} {key!r}" if key else ""
    counted = f"run {count} of at most {threshold} until {isoformat(closes_at)} for this subscriber{keyed}"
    raw = {"throttle": {"count": count, "threshold": threshold, "windowEndsAt": isoformat(closes_at), "key": key}}
    if count <= threshold:
        return StepOutcome("completed", details=[Detail("Success", f"Throttle passed: {counted}", raw=raw)])
    # The key's value comes from the payload (it may be an address): the log names only the key.
    keyed_by = f" by {metadata.get('throttleKey')}" if key else ""
    log_delivery(ctx, logging.INFO, "throttled", None, f"run {count} of at most {threshold} until {isoformat(closes_at)}{keyed_by}")
    return StepOutcome("canceled", details=[Detail("Warning", f"Throttled: {counted}", raw=raw)], halt=True)
