"""Runs one claimed job and writes what came of it."""

from __future__ import annotations

import asyncio
import logging
import traceback
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta

import httpx
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.engine import queue
from herald.engine.expand import expand_event, expansion_detail
from herald.engine.filters import FilterContext, step_passes
from herald.engine.repository import EngineRepository
from herald.engine.steps import STEP_RUNNERS
from herald.engine.steps.base import Detail, EngineSettings, StepContext, StepOutcome
from herald.kit.crypto import SecretBox
from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.models import ExecutionDetail, Job

logger = logging.getLogger("herald.engine")

# Outcomes that can lose a race and are then worked out again (see digest).
MAX_RACE_RETRIES = 3


class JobLost(Exception):
    """The job's lease ran out and another worker owns it now: leave it alone."""


@dataclass
class JobRunner:
    sessionmaker: async_sessionmaker[AsyncSession]
    http: httpx.AsyncClient
    box: SecretBox
    settings: EngineSettings
    worker_id: str

    async def run(self, job: Job) -> None:
        # A live worker keeps its lease while a step is slow (a provider taking
        # its time): only a worker that died loses its jobs to another, so a slow
        # send is never made twice by two live workers.
        heartbeat = asyncio.create_task(self._keep_lease(job))
        try:
            if job.kind == "event":
                await self._run_expansion(job)
            else:
                await self._run_step(job)
        except JobLost:
            logger.info("job %s was taken over by another worker", job.id)
        except Exception as exc:  # a bug in one job must never stop the worker
            error_id = new_id()
            logger.exception("job %s failed unexpectedly errorId=%s", job.id, error_id)
            await self._record_crash(job, exc, error_id)
        finally:
            heartbeat.cancel()
            with suppress(asyncio.CancelledError):
                await heartbeat

    async def _keep_lease(self, job: Job) -> None:
        interval = max(self.settings.lease_seconds / 3, 0.05)
        while True:
            await asyncio.sleep(interval)
            try:
                async with self.sessionmaker() as session, session.begin():
                    if not await queue.extend_lease(session, job.id, self.worker_id, self.settings.lease_seconds):
                        return
            except Exception:  # the next beat tries again; the lease is long enough for one miss
                logger.warning("could not extend the lease of job %s", job.id, exc_info=True)

    # Expansion -------------------------------------------------------------

    async def _run_expansion(self, job: Job) -> None:
        async with self.sessionmaker() as session, session.begin():
            owned = await self._own(session, job)
            progress = await expand_event(session, owned)
            owned.status = "completed" if progress.done else "queued"
            owned.run_at = utcnow()
            owned.locked_until = None
            owned.updated_at = utcnow()
            if progress.done:
                await EngineRepository(session).add_details([expansion_detail(owned, progress)])
            await queue.wake_workers(session)

    # Steps -----------------------------------------------------------------

    async def _run_step(self, job: Job) -> None:
        for _ in range(MAX_RACE_RETRIES):
            ctx = await self._load_context(job)
            if ctx is None:
                return
            outcome = await self._evaluate(ctx)
            try:
                await self._apply(ctx, outcome)
                return
            except _Retry:
                continue
        raise RuntimeError(f"job {job.id}: the digest it belongs to kept changing")

    async def _load_context(self, job: Job) -> StepContext | None:
        async with self.sessionmaker() as session:
            repository = EngineRepository(session)
            event = await repository.get_event(job.event_id)
            subscriber = await repository.get_subscriber(job.subscriber_id or "")
            if event is None or subscriber is None:
                async with session.begin():
                    owned = await self._own(session, job)
                    reason = "the trigger record is gone" if event is None else "the subscriber was deleted"
                    owned.status = "failed"
                    owned.error_text = f"Step not run: {reason}"
                    await self._details(session, owned, [Detail("Failed", owned.error_text)], None)
                return None
            step = next(
                (s for i, s in enumerate(event.steps or []) if (s.get("_id") or s.get("uuid") or str(i)) == job.step_id),
                None,
            ) or _active_step_at(event.steps or [], job.step_index or 0)
            tenant = None
            if event.tenant:
                row = await repository.get_tenant(job.environment_id, event.tenant["identifier"])
                tenant = {"identifier": event.tenant["identifier"], "name": row.name if row else None, "data": (row.data if row else None) or {}}
            digest = await repository.digest_result_before(job.notification_id or "", job.step_index or 0)
        return StepContext(
            job=job,
            event=event,
            step=step,
            subscriber=subscriber,
            tenant=tenant,
            digest=digest,
            now=utcnow(),
            sessionmaker=self.sessionmaker,
            http=self.http,
            box=self.box,
            settings=self.settings,
        )

    async def _evaluate(self, ctx: StepContext) -> StepOutcome:
        filters = ctx.step.get("filters") or []
        resumed = bool((ctx.job.data or {}).get("wait_until") or (ctx.job.data or {}).get("digest_open"))
        if filters and not resumed:
            verdict = step_passes(
                filters, FilterContext(subscriber=ctx.subscriber_fields(), payload=ctx.payload, tenant=ctx.tenant)
            )
            if verdict.invalid:
                return StepOutcome.failed(f"Step filters are misconfigured: {verdict.detail}")
            if not verdict.passed:
                return StepOutcome("skipped", details=[Detail("Success", f"Step filtered out: {verdict.detail}")])
        runner = STEP_RUNNERS.get(ctx.job.step_type or "")
        if runner is None:
            return StepOutcome.failed(f"Step type {ctx.job.step_type!r} is not supported")
        return await runner(ctx)

    async def _apply(self, ctx: StepContext, outcome: StepOutcome) -> None:
        try:
            async with self.sessionmaker() as session, session.begin():
                job = await self._own(session, ctx.job)
                repository = EngineRepository(session)
                for message in outcome.messages:
                    await repository.save_message(message)
                queued = Detail("Queued", f"Step {ctx.step.get('name') or job.step_type} queued; attempt {job.attempts}")
                await self._settle(session, ctx, job, outcome)
                await self._details(session, job, [queued, *outcome.details], ctx.step)
        except IntegrityError as exc:
            if outcome.status == "delayed" and ctx.job.step_type == "digest":
                raise _Retry from exc  # another event opened this digest first: merge into it
            raise

    async def _settle(self, session: AsyncSession, ctx: StepContext, job: Job, outcome: StepOutcome) -> None:
        now = utcnow()
        job.locked_until = None
        job.updated_at = now
        if outcome.data is not None:
            job.data = {**(job.data or {}), **outcome.data}
        if outcome.digest_key is not None:
            job.digest_key = outcome.digest_key
        if outcome.result is not None:
            job.result = outcome.result
        status = outcome.status
        if status == "failed" and outcome.retryable and job.attempts < job.max_attempts:
            delay = queue.retry_delay(job.attempts, self.settings.retry_base_seconds)
            job.status = "queued"
            job.run_at = now + timedelta(seconds=delay)
            job.error_text = outcome.error_text
            outcome.details.append(Detail("Pending", f"Will retry in {delay:.1f}s (attempt {job.attempts} of {job.max_attempts})"))
            return
        if status == "delayed":
            job.status = "delayed"
            job.run_at = outcome.run_at or now
            job.attempts = 0
            await session.flush()  # the open-digest index speaks here
            return
        if status == "merged":
            master = await queue.lock_job(session, outcome.merged_into or "")
            if master is None or master.status != "delayed":
                raise _Retry  # the digest closed meanwhile: open a new one
            job.status = "merged"
            job.merged_into = master.id
            await queue.settle_rest_of_chain(session, job, "merged")
            return
        job.status = status
        if status == "failed":
            job.error_text = outcome.error_text
            if ctx.step.get("shouldStopOnFail"):
                halted = await queue.settle_rest_of_chain(session, job, "canceled")
                outcome.details.append(Detail("Failed", f"Workflow halted: the step failed and shouldStopOnFail is set ({halted} steps not run)"))
                return
        await queue.queue_next_step(session, job)

    async def _details(self, session: AsyncSession, job: Job, details: list[Detail], step: dict | None) -> None:
        channel = job.step_type
        await EngineRepository(session).add_details(
            [
                ExecutionDetail(
                    environment_id=job.environment_id,
                    organization_id=job.organization_id,
                    job_id=job.id,
                    notification_id=job.notification_id,
                    subscriber_id=job.subscriber_id,
                    transaction_id=job.transaction_id,
                    channel=channel,
                    provider_id=detail.provider_id,
                    status=detail.status,
                    detail=detail.detail,
                    raw=detail.raw,
                    is_retry=job.attempts > 1,
                )
                for detail in details
            ]
        )

    async def _own(self, session: AsyncSession, job: Job) -> Job:
        """Lock the job row and check we still hold its lease."""
        owned = await queue.lock_job(session, job.id)
        if owned is None or owned.status != "running" or owned.locked_by != self.worker_id:
            raise JobLost(job.id)
        return owned

    async def _record_crash(self, job: Job, exc: Exception, error_id: str) -> None:
        """An unexpected error: retry with backoff while attempts remain, then fail with the error kept."""
        text = f"Internal error {error_id}: {type(exc).__name__}: {exc}"
        try:
            async with self.sessionmaker() as session, session.begin():
                owned = await self._own(session, job)
                owned.locked_until = None
                owned.error_text = text
                if owned.attempts < owned.max_attempts:
                    owned.status = "queued"
                    owned.run_at = utcnow() + timedelta(seconds=queue.retry_delay(owned.attempts, self.settings.retry_base_seconds))
                else:
                    owned.status = "failed"
                await self._details(
                    session,
                    owned,
                    [Detail("Failed", text, raw={"traceback": traceback.format_exception_only(exc)})],
                    None,
                )
        except Exception:
            logger.exception("could not record the failure of job %s (its lease will expire)", job.id)


class _Retry(Exception):
    """The outcome lost a race; work the step out again."""


def _active_step_at(steps: list[dict], index: int) -> dict:
    active = [s for s in steps if s.get("active", True)]
    return active[index] if index < len(active) else {}
