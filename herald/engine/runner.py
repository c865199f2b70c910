"""Runs one claimed job and writes what came of it."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import httpx
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.engine import queue
from herald.engine.expand import (
    QUEUED_FOR_ANY_WORKER,
    HandOff,
    SettledSteps,
    active_steps,
    expand_events,
    expansion_details,
    expansion_failed_detail,
    share_out,
)
from herald.engine.filters import FilterContext, step_passes
from herald.engine.preferences import StepPreferences, evaluate, needs_preferences
from herald.engine.queue import JobLost
from herald.engine.quiet_hours import held_until, zone_of
from herald.engine.repository import EngineRepository, detail_row
from herald.engine.steps import STEP_RUNNERS, bridged
from herald.engine.steps.base import Detail, EngineSettings, StepContext, StepOutcome, steps_reading_env
from herald.engine.steps.batch import AcceptedDeliveries, HandOvers, StepBatch
from herald.engine.templates import give_way, on_loop_only
from herald.inbox.repository import UNSNOOZE_JOB
from herald.kit import tracing
from herald.kit.crypto import SecretBox, SecretKeyMismatch
from herald.kit.db import without_transaction
from herald.kit.ids import new_id
from herald.kit.time import isoformat, utcnow
from herald.models import Event, Job, Message, Subscriber
from herald.realtime.held import HELD_RECEIVED_JOB, run_held
from herald.translations.render import apply_translations
from herald.webhooks.events import JOB_KIND as WEBHOOK_JOB
from herald.workflows.controls import issues_reason

logger = logging.getLogger("herald.engine")

# Outcomes that can lose a race and are then worked out again (see digest).
MAX_RACE_RETRIES = 3
# Outcomes written together with the other jobs of a batch; delays, digests and
# merges take locks of their own and are written one by one.
FINAL_OUTCOMES = ("completed", "skipped", "failed", "canceled")
# Steps that deliver through a provider: failing for good leaves an error message.
PROVIDER_CHANNELS = ("email", "sms", "chat", "push")
# First steps run inside their expansion's transaction (HandOff.settle): they
# need nothing but the store, so running them there holds no lock while a
# provider takes its time.
SETTLED_IN_EXPANSION = ("in_app",)

__all__ = ["JobLost", "JobRunner"]


@dataclass
class JobRunner:
    sessionmaker: async_sessionmaker[AsyncSession]
    http: httpx.AsyncClient
    box: SecretBox
    settings: EngineSettings
    worker_id: str
    # Jobs run per batch: expansions hand this many first steps to their own batch.
    batch_size: int = 100

    async def run(self, job: Job) -> None:
        await self.run_batch([job])

    async def run_batch(self, jobs: Sequence[Job], concurrency: int = 100) -> None:
        """Run claimed jobs, writing their results in as few transactions as possible.

        Expansions are written together, and so are the steps whose outcome
        is final (completed, skipped, failed, retried): a burst of triggers
        costs a few transactions per batch rather than a few per job. Should a
        shared transaction fail, each job is written again alone, so one bad
        job cannot hold back the others.
        """
        # A live worker keeps its leases while a step is slow (a provider taking
        # its time): only a worker that died loses its jobs to another, so a slow
        # send is never made twice by two live workers.
        held = {job.id for job in jobs}
        heartbeat = asyncio.create_task(self._keep_leases(held))
        try:
            returns = [job for job in jobs if job.kind == UNSNOOZE_JOB]
            if returns:
                # A snoozed notification's time has come (herald.inbox.snooze).
                from herald.inbox.snooze import run_returns

                await run_returns(self.sessionmaker, returns, self.worker_id)
                jobs = [job for job in jobs if job.kind != UNSNOOZE_JOB]
            held_events = [job for job in jobs if job.kind == HELD_RECEIVED_JOB]
            if held_events:
                # The subscriber's quiet hours are over for an in-app message's event (herald.realtime.held).
                await run_held(self.sessionmaker, held_events, self.worker_id)
                jobs = [job for job in jobs if job.kind != HELD_RECEIVED_JOB]
            # Webhook deliveries are never among them: the worker's webhook sender claims and sends
            # those (herald/webhooks/sender.py).
            expansions = [job for job in jobs if job.kind == "event"]
            steps = [job for job in jobs if job.kind != "event"]
            known_events: dict[str, Event] = {}
            if expansions:
                groups = await self._keep_a_share(expansions, held)
                handed = await self._run_expansions(groups, max(self.batch_size - len(steps), 0))
                held.update(job.id for job in handed.jobs)
                steps += handed.jobs
                known_events = handed.events
            if steps:
                await self._run_steps(steps, concurrency, known_events)
        finally:
            heartbeat.cancel()
            with suppress(asyncio.CancelledError):
                await heartbeat

    async def take_back_from_dead_workers(self) -> None:
        """Jobs whose lease ran out: queued again while attempts remain, failed for good after (with why)."""
        try:
            async with self.sessionmaker() as session, session.begin():
                requeued = await queue.requeue_expired_leases(session)
            if requeued:
                logger.warning("%d jobs of workers that stopped were queued again", requeued)
        except Exception:
            logger.warning("could not queue again the jobs of workers that stopped; the next sweep tries again", exc_info=True)
        await self.fail_abandoned()

    async def fail_abandoned(self) -> None:
        """Fail the jobs whose workers died on every attempt, with why, and settle what follows them."""
        try:
            async with self.sessionmaker() as session, session.begin():
                released: list[Job] = []
                for job in await queue.abandoned_jobs(session):
                    logger.warning("job %s failed: %s", job.id, queue.ABANDONED)
                    await self._fail_for_good(session, job, Detail("Failed", queue.ABANDONED), released=released)
                await queue.queue_next_steps(session, released)
        except Exception:
            logger.warning("could not settle abandoned jobs; the next sweep tries again", exc_info=True)

    async def _guarded(self, job: Job, work: Callable[[], Awaitable[None]]) -> None:
        try:
            await work()
        except JobLost:
            logger.info("job %s was taken over by another worker", job.id)
        except Exception as exc:  # a bug in one job must never stop the worker
            error_id = new_id()
            logger.exception("job %s failed unexpectedly errorId=%s", job.id, error_id)
            await self._record_crash(job, exc, error_id)

    async def _keep_leases(self, held: set[str]) -> None:
        """Extend the leases of the jobs in ``held`` (which the batch adds to) until cancelled."""
        interval = max(self.settings.lease_seconds / 3, 0.05)
        while True:
            await asyncio.sleep(interval)
            try:
                sent = list(held)
                async with self.sessionmaker() as session, session.begin():
                    kept = await queue.extend_leases(session, sent, self.worker_id, self.settings.lease_seconds)
                held.difference_update(set(sent) - set(kept))  # lost: finished, or taken over
            except Exception:  # the next beat tries again; the lease is long enough for one miss
                logger.warning("could not extend the leases of %d jobs", len(held), exc_info=True)

    # Expansion -------------------------------------------------------------

    async def _keep_a_share(self, expansions: list[Job], held: set[str]) -> list[list[Job]]:
        """The expansions of a claim this worker runs now, in groups (``expand.share_out``).

        The others are given back at once, in a transaction of their own, for
        the other workers to claim while this one expands its share: given
        back with the round's outcome, they were held for the whole round, and
        a fan-out's parts went from worker to worker one at a time. Only the
        length of each event's ``to`` is read for it: a bulk trigger's events
        name a thousand recipients each, and the claims that took them read
        every event given back again.
        """
        if len(expansions) == 1:
            return [expansions]
        try:
            async with self.sessionmaker() as session:
                await without_transaction(session)  # a read only
                recipients = await EngineRepository(session).recipient_counts({job.event_id for job in expansions})
            groups, returned = share_out(expansions, recipients)
            if returned:
                async with self.sessionmaker() as session, session.begin():
                    await queue.give_back(session, [job.id for job in returned], self.worker_id)
                held.difference_update(job.id for job in returned)
        except Exception:  # all expanded here instead
            logger.warning("could not give back %d expansions of a claim", len(expansions), exc_info=True)
            return [expansions]
        return groups

    async def _run_expansions(self, groups: list[list[Job]], room: int) -> HandOff:
        """Expand the groups' events side by side; returns the first steps handed to this worker (see ``HandOff``)."""
        handed = await asyncio.gather(*(self._run_group(group, room if index == 0 else 0) for index, group in enumerate(groups)))
        for other in handed[1:]:
            handed[0].absorb(other)
        return handed[0]

    async def _run_group(self, jobs: list[Job], room: int) -> HandOff:
        """Expand the events in one transaction, or one by one should that fail."""
        if len(jobs) > 1:
            try:
                return await self._expand(jobs, room)
            except Exception:
                logger.warning("expanding %d events together failed; expanding them one by one", len(jobs), exc_info=True)
        handed = HandOff(self.worker_id, self.settings.lease_seconds, room)
        for job in jobs:
            await self._guarded(job, partial(self._expand_alone, job, handed))
        return handed

    async def _expand_alone(self, job: Job, handed: HandOff) -> None:
        handed.absorb(await self._expand([job], handed.room))

    async def _expand(self, jobs: list[Job], room: int = 0) -> HandOff:
        # A worker set to take none of the steps it makes (batch size 0) settles none either.
        settle = self.settle_in_expansion if self.batch_size > 0 else None
        hand_off = HandOff(self.worker_id, self.settings.lease_seconds, room, settle=settle)
        # Expansion records its progress in job.data; should the transaction
        # fail, the jobs must not keep progress that was never committed.
        before = {job.id: dict(job.data or {}) for job in jobs}
        # One span per event, in its trigger's trace, while traces are on; the batch shares one transaction.
        spans = [] if tracing.tracer is None else [
            tracing.start_job_span("expand event", job.trace_context, **{"herald.job.id": job.id, "herald.transaction_id": job.transaction_id})
            for job in jobs
        ]
        try:
            async with self.sessionmaker() as session, session.begin():
                progress = await expand_events(session, jobs, hand_off)
                now = utcnow()
                # A committed batch is progress, not a failed attempt: only
                # failures in a row use up the attempts of a long expansion.
                # An expansion that goes on keeps its place in the queue, ahead
                # of the steps its batches made: queued behind them (claims are
                # oldest first), each batch of a large fan-out waited for the
                # workers to deliver the one before, and expanding and
                # delivering took turns instead of running side by side.
                rows = [
                    queue.outcome_row(
                        job,
                        status="completed" if progress[job.id].done else "queued",
                        run_at=now if progress[job.id].done else job.run_at,
                        attempts=0,
                    )
                    for job in jobs
                ]
                written = await queue.finish_jobs(session, self.worker_id, rows)
                if len(written) < len(jobs):
                    raise JobLost(", ".join(job.id for job in jobs if job.id not in written))
                repository = EngineRepository(session)
                await repository.save_messages(hand_off.settled.messages, hand_off.settled.held_received)
                await repository.add_details(await expansion_details(repository, jobs, progress) + hand_off.settled.details)
                # Other workers are woken for what they can take: steps left queued,
                # or an expansion to go on with. Steps handed to this worker are
                # run in this round, and waking the others for them only had
                # each make a claim that found nothing.
                if session.info.get(QUEUED_FOR_ANY_WORKER) or any(not progress[job.id].done for job in jobs):
                    await queue.wake_workers(session)
        except BaseException:
            for job in jobs:
                job.data = before[job.id]
            for span in spans:
                tracing.mark_failed(span, "the expansion failed")
            raise
        finally:
            for span in spans:
                span.end()
        for job, row in zip(jobs, rows, strict=True):
            job.status, job.attempts = row["status"], 0
        return hand_off

    async def settle_in_expansion(
        self, repository: EngineRepository, chains: list[tuple[Event, list[dict[str, Any]]]], settled: SettledSteps
    ) -> None:
        """Run the in-app first steps of new notifications before their jobs are written.

        Called by the expansion (``HandOff.settle``) with each notification's
        chain of job rows, not yet inserted. A first step that completes or is
        skipped has its row written as finished, the step after it as queued,
        and its message and details are added to ``settled`` for the
        expansion's transaction to write. Any other outcome (a template error,
        a crash) is left to the step's own run, which records it as it records
        any step's failure: that step is handed off as before.
        """
        # A code-first workflow's step asks its bridge first: not over the network inside the expansion's transaction.
        chains = [
            (event, rows)
            for event, rows in chains
            if rows[0]["step_type"] in SETTLED_IN_EXPANSION and not any(step.get("bridge") for step in event.steps or [])
        ]
        if not chains:
            return
        subscribers = await repository.get_subscribers({rows[0]["subscriber_id"] for _, rows in chains})
        tenants: dict[tuple[str, str], dict[str, Any]] = {}
        contexts: list[tuple[StepContext, list[dict[str, Any]]]] = []
        for event, rows in chains:
            first = rows[0]
            subscriber = subscribers.get(first["subscriber_id"])
            if subscriber is None:
                continue
            job = queue.job_from_row({**first, "status": "running", "locked_by": self.worker_id, "attempts": 1})
            contexts.append((self._context(job, event, subscriber, await _tenant_of(repository, event, tenants), None), rows))
        await _read_preferences(repository, [ctx for ctx, _ in contexts])
        await apply_translations(repository.session, [ctx for ctx, _ in contexts])
        await _read_environment_variables(repository, [ctx for ctx, _ in contexts])
        for ctx, rows in contexts:
            first, job = rows[0], ctx.job
            try:
                with on_loop_only():  # a render too long for the loop waits for the step's own run
                    outcome = await self._evaluate(ctx)
            except Exception:  # run again as a handed-off step, which records the crash
                logger.debug("in-app step %s not settled in its expansion", job.id, exc_info=True)
                continue
            if outcome.status not in ("completed", "skipped", "canceled"):
                continue
            change = final_state(job, ctx.step, outcome, self.settings.retry_base_seconds)
            # A column the outcome leaves unset stays out of the row (SQL NULL, as the update writes it).
            first.update({name: value for name, value in change.row.items() if value is not None or name in first})
            first.update(locked_by=self.worker_id, attempts=1, updated_at=ctx.now)
            if change.release_next and _has_next_step(ctx):
                rows[1].update(status="queued", run_at=ctx.now, updated_at=ctx.now)
            settled.job_ids.add(job.id)
            settled.messages += outcome.messages
            if outcome.received_held_until is not None:
                settled.held_received[job.id] = outcome.received_held_until
            settled.details += _detail_rows(job, [_queued(ctx, job), *outcome.details, *change.details])

    def _context(
        self, job: Job, event: Event, subscriber: Subscriber, tenant: dict[str, Any] | None, digest: dict[str, Any] | None
    ) -> StepContext:
        return StepContext(
            job=job,
            event=event,
            step=step_of(event, job),
            subscriber=subscriber,
            tenant=tenant,
            digest=digest,
            now=utcnow(),
            sessionmaker=self.sessionmaker,
            http=self.http,
            box=self.box,
            settings=self.settings,
            worker_id=self.worker_id,
        )

    # Steps -----------------------------------------------------------------

    async def _run_steps(self, jobs: list[Job], concurrency: int, known_events: dict[str, Event] | None = None) -> None:
        try:
            contexts = await self._load_contexts(jobs, known_events)
        except Exception:
            logger.warning("loading %d steps together failed; running them one by one", len(jobs), exc_info=True)
            for job in jobs:
                await self._guarded(job, partial(self._run_step, job))
            return
        limit = asyncio.Semaphore(max(concurrency, 1))

        async def evaluate(ctx: StepContext) -> StepOutcome | Exception:
            async with limit:
                try:
                    return await self._evaluate(ctx)
                except Exception as exc:  # recorded as the job's crash below
                    return exc

        pairs = list(zip(contexts, await asyncio.gather(*(evaluate(ctx) for ctx in contexts)), strict=True))

        def final(outcome: StepOutcome | Exception) -> bool:
            return isinstance(outcome, StepOutcome) and outcome.status in FINAL_OUTCOMES

        # Final outcomes, even a lone one, are written by the batched path: one
        # statement guarded by the lease rather than a lock and a flush.
        together = [(ctx, outcome) for ctx, outcome in pairs if final(outcome)]
        if together:
            try:
                await self._apply_many(together)  # type: ignore[arg-type]
                pairs = [(ctx, outcome) for ctx, outcome in pairs if not final(outcome)]
            except Exception:
                logger.warning("writing %d step results together failed; writing them one by one", len(together), exc_info=True)
        # Digests kept open go before the merges: an event of the same batch may
        # merge into one that was being closed (steps.digest).
        kept_open = {ctx.job.id for ctx, _ in pairs if (ctx.job.data or {}).get("digest_open")}
        for ctx, outcome in pairs:
            if ctx.job.id in kept_open:
                await self._guarded(ctx.job, partial(self._finish_step, ctx, outcome))
        pairs = [(ctx, outcome) for ctx, outcome in pairs if ctx.job.id not in kept_open]
        pairs = await self._open_digests_once(pairs, evaluate)
        merges = [(ctx, outcome) for ctx, outcome in pairs if isinstance(outcome, StepOutcome) and outcome.status == "merged"]
        if merges:
            written = await self._merge_many(merges)
            pairs = [(ctx, outcome) for ctx, outcome in pairs if ctx.job.id not in written]
        for ctx, outcome in pairs:
            await self._guarded(ctx.job, partial(self._finish_step, ctx, outcome))

    async def _open_digests_once(
        self,
        pairs: list[tuple[StepContext, StepOutcome | Exception]],
        evaluate: Callable[[StepContext], Awaitable[StepOutcome | Exception]],
    ) -> list[tuple[StepContext, StepOutcome | Exception]]:
        """Of a batch's events that would each open the same digest, the first opens it and the rest merge.

        At the start of a burst no digest is open yet, and every event of the
        first batch for one subscriber and key found none. Written one by one,
        all but the first lost the race on ``uq_jobs_open_digest`` and were
        worked out again alone: a failed write, a fresh read and a merge of
        their own each (91 job UPDATEs for 30 events in the test). Here the
        first is written, the others are evaluated again, now finding the
        digest open (or the one another worker opened meanwhile), and their
        merges go with the batch's others, written together. Returns the pairs
        left to write, the re-evaluated ones in place of the first outcomes.
        """
        groups: dict[tuple[Any, ...], list[StepContext]] = {}
        for ctx, outcome in pairs:
            if ctx.job.step_type == "digest" and isinstance(outcome, StepOutcome) and outcome.status == "delayed":
                key = (ctx.job.workflow_id, ctx.job.step_id, ctx.job.subscriber_id, outcome.digest_key)
                groups.setdefault(key, []).append(ctx)
        groups = {key: contexts for key, contexts in groups.items() if len(contexts) > 1}
        if not groups:
            return pairs
        outcomes = {ctx.job.id: outcome for ctx, outcome in pairs}
        again: list[StepContext] = []
        for first, *rest in groups.values():
            await self._guarded(first.job, partial(self._finish_step, first, outcomes[first.job.id]))
            again.extend(rest)
        handled = {ctx.job.id for contexts in groups.values() for ctx in contexts}
        kept = [(ctx, outcome) for ctx, outcome in pairs if ctx.job.id not in handled]
        return kept + list(zip(again, await asyncio.gather(*(evaluate(ctx) for ctx in again)), strict=True))

    async def _finish_step(self, ctx: StepContext, outcome: StepOutcome | Exception) -> None:
        if isinstance(outcome, Exception):
            raise outcome
        try:
            await self._apply(ctx, outcome)
        except _Retry:
            await self._run_step(ctx.job)

    async def _run_step(self, job: Job) -> None:
        for _ in range(MAX_RACE_RETRIES):
            [ctx] = await self._load_contexts([job]) or [None]
            if ctx is None:
                return
            outcome = await self._evaluate(ctx)
            try:
                await self._apply(ctx, outcome)
                return
            except _Retry:
                continue
        raise RuntimeError(f"job {job.id}: the digest it belongs to kept changing")

    async def _load_contexts(self, jobs: list[Job], known_events: dict[str, Event] | None = None) -> list[StepContext]:
        """What each step needs, read in one session; a step whose event or subscriber is gone fails here.

        ``known_events``: events this worker has just read (the expansion that
        handed it the steps); only the others are read again.
        """
        orphans: list[tuple[Job, str]] = []
        contexts: list[StepContext] = []
        batch = StepBatch(
            self.sessionmaker, jobs, AcceptedDeliveries(self.sessionmaker, self.worker_id), HandOvers(self.sessionmaker, self.worker_id)
        )
        async with self.sessionmaker() as session:
            # Reads only: no transaction around them (a BEGIN and a ROLLBACK less per round).
            await without_transaction(session)
            repository = EngineRepository(session)
            events = dict(known_events or {})
            unknown = {job.event_id for job in jobs} - events.keys()
            if unknown:
                events.update(await repository.get_events(unknown))
            subscribers = await repository.get_subscribers(job.subscriber_id or "" for job in jobs)
            tenants: dict[tuple[str, str], dict[str, Any]] = {}
            for job in jobs:
                event, subscriber = events.get(job.event_id), subscribers.get(job.subscriber_id or "")
                if event is None or subscriber is None:
                    orphans.append((job, "the trigger record is gone" if event is None else "the subscriber was deleted"))
                    continue
                digest = None
                if _digest_before(event.steps or [], job.step_index or 0):
                    digest = await repository.digest_result_before(job.notification_id or "", job.step_index or 0)
                context = self._context(job, event, subscriber, await _tenant_of(repository, event, tenants), digest)
                context.batch = batch
                contexts.append(context)
            await _read_preferences(repository, contexts)
            await apply_translations(session, contexts)
            await _read_environment_variables(repository, contexts)
        for job, reason in orphans:
            await self._guarded(job, partial(self._fail_orphan, job, reason))
        return contexts

    async def _fail_orphan(self, job: Job, reason: str) -> None:
        async with self.sessionmaker() as session, session.begin():
            owned = await self._own(session, job)
            # No message: a deleted subscriber's messages went with it, and a
            # job whose trigger record is gone has nothing to fill one with.
            await self._fail_for_good(session, owned, Detail("Failed", f"Step not run: {reason}"), with_message=False)

    async def _evaluate(self, ctx: StepContext) -> StepOutcome:
        if tracing.tracer is None:
            return await self._evaluate_step(ctx)
        # A span of the trigger's trace (the job's trace_context), in whichever process runs the step; the
        # provider's call inside it is its child (steps.delivery.timed_send).
        job = ctx.job
        with tracing.job_span(
            f"step {job.step_type}",
            job.trace_context,
            **{"herald.job.id": job.id, "herald.step.id": job.step_id, "herald.transaction_id": job.transaction_id, "herald.attempt": job.attempts},
        ) as span:
            outcome = await self._evaluate_step(ctx)
            span.set_attribute("herald.step.outcome", outcome.status)
            if outcome.status == "failed":
                tracing.mark_failed(span, "the step failed")
            return outcome

    async def _evaluate_step(self, ctx: StepContext) -> StepOutcome:
        await give_way()  # after long renders, let the event loop serve others first
        issues = ctx.step.get("issues")
        if issues:
            # Saved over v2 with templates that cannot be used: the step fails now, saying why, not at delivery.
            return StepOutcome.failed(f"Template error: {issues_reason(issues)}")
        if bridged.is_bridged(ctx):
            # Written in code: the bridge renders it (or skips it) before filters and preferences, as in Novu.
            ended = await bridged.execute(ctx)
            if ended is not None:
                return ended
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
        refused = _refused_by_preferences(ctx)
        if refused is not None:
            return refused
        held = _held_by_quiet_hours(ctx)
        if held is not None:
            return held
        if ctx.template_error is not None:
            return StepOutcome.failed(ctx.template_error)
        runner = STEP_RUNNERS.get(ctx.job.step_type or "")
        if runner is None:
            return StepOutcome.failed(f"Step type {ctx.job.step_type!r} is not supported")
        outcome = await runner(ctx)
        if ctx.job.step_type == "in_app":
            _hold_received_in_quiet_hours(ctx, outcome)
        if ctx.bridge_metadata is not None and outcome.status == "delayed":
            outcome.data = {**(outcome.data or {}), "bridge_metadata": ctx.bridge_metadata}
        return outcome

    async def _apply(self, ctx: StepContext, outcome: StepOutcome) -> None:
        try:
            async with self.sessionmaker() as session, session.begin():
                job = await self._own(session, ctx.job)
                queued = _queued(ctx, job)
                await EngineRepository(session).save_messages(_unstored(outcome.messages), _held_received([(ctx, outcome)]))
                extra = await self._settle(session, job, ctx.step, outcome)
                await self._details(session, job, [queued, *outcome.details, *extra], ctx.step)
        except IntegrityError as exc:
            if outcome.status == "delayed" and ctx.job.step_type == "digest":
                raise _Retry from exc  # another event opened this digest first: merge into it
            raise

    async def _apply_many(self, pairs: list[tuple[StepContext, StepOutcome]]) -> None:
        """Write final step outcomes in one transaction (see ``run_batch``).

        The jobs' new states go first, in one statement guarded by the lease
        (queue.finish_jobs); messages, details and the steps after them are
        written for the jobs this worker still held, in the same transaction.
        """
        settled = [(ctx, outcome, final_state(ctx.job, ctx.step, outcome, self.settings.retry_base_seconds)) for ctx, outcome in pairs]
        async with self.sessionmaker() as session, session.begin():
            written = await queue.finish_jobs(session, self.worker_id, [change.row for _, _, change in settled])
            if len(written) < len(settled):
                logger.info("%d of %d jobs were taken over by another worker", len(settled) - len(written), len(settled))
            settled = [item for item in settled if item[0].job.id in written]
            repository = EngineRepository(session)
            # Deliveries the providers accepted are stored already (steps.delivery).
            await repository.save_messages(
                _unstored(m for _, outcome, _ in settled for m in outcome.messages),
                _held_received([(ctx, outcome) for ctx, outcome, _ in settled]),
            )
            details: list[dict[str, Any]] = []
            released: list[Job] = []
            for ctx, outcome, change in settled:
                extra = list(change.details)
                if change.halt:
                    halted = await queue.settle_rest_of_chain(session, ctx.job, "canceled")
                    extra.append(halted_detail(halted, change.halt_reason))
                elif change.release_next and _has_next_step(ctx):
                    released.append(ctx.job)
                # The attempt this run was (its claim counted it).
                details += _detail_rows(ctx.job, [_queued(ctx, ctx.job), *outcome.details, *extra])
            await repository.add_details(details)
            await queue.queue_next_steps(session, released)

    async def _merge_many(self, pairs: list[tuple[StepContext, StepOutcome]]) -> set[str]:
        """Write merges into digests, one transaction per digest; returns the ids of the jobs settled.

        A burst of events for one digest reaches its step a batch at a time;
        written one by one, each merge took its own transaction and the
        digest's row lock in turn: 10,000 events through a digest of 5 s took
        27.5 s to their message on PostgreSQL, 7.0 s written together. Here
        the digest is locked once and the batch's merges into it written in a
        few statements, guarded by the lease as a batch's finish is. The merges of a digest that closed
        meanwhile, or whose transaction failed, are left to the one-by-one
        path, which works their digest out again.
        """
        by_digest: dict[str, list[tuple[StepContext, StepOutcome]]] = {}
        for ctx, outcome in pairs:
            by_digest.setdefault(outcome.merged_into or "", []).append((ctx, outcome))
        written: set[str] = set()
        for digest_id, group in by_digest.items():
            try:
                async with self.sessionmaker() as session, session.begin():
                    master = await queue.lock_job(session, digest_id)
                    if master is None or master.status != "delayed":
                        continue
                    rows = [
                        queue.outcome_row(ctx.job, status="merged", merged_into=digest_id, digest_key=outcome.digest_key)
                        for ctx, outcome in group
                    ]
                    done = await queue.finish_jobs(session, self.worker_id, rows)
                    if len(done) < len(group):
                        logger.info("%d of %d jobs were taken over by another worker", len(group) - len(done), len(group))
                    merged = [(ctx, outcome) for ctx, outcome in group if ctx.job.id in done]
                    await queue.settle_rest_of_chains(session, [ctx.job for ctx, _ in merged], "merged")
                    details = [row for ctx, outcome in merged for row in _detail_rows(ctx.job, [_queued(ctx, ctx.job), *outcome.details])]
                    await EngineRepository(session).add_details(details)
                written |= {ctx.job.id for ctx, _ in group}  # merged, or another worker's now
            except Exception:
                logger.warning("writing %d merges into digest %s together failed; writing them one by one", len(group), digest_id, exc_info=True)
        return written

    async def _settle(
        self, session: AsyncSession, job: Job, step: dict[str, Any], outcome: StepOutcome, released: list[Job] | None = None
    ) -> list[Detail]:
        """Give the job its next status; returns details to add to the outcome's.

        ``released`` collects the jobs whose next step is to be queued, for the
        caller to queue them all at once; without it they are queued here.
        """
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
        if status == "delayed":
            job.status = "delayed"
            job.run_at = outcome.run_at or now
            job.attempts = 0
            await session.flush()  # the open-digest index speaks here
            return []
        if status == "merged":
            master = await queue.lock_job(session, outcome.merged_into or "")
            if master is None or master.status != "delayed":
                raise _Retry  # the digest closed meanwhile: open a new one
            job.status = "merged"
            job.merged_into = master.id
            await queue.settle_rest_of_chain(session, job, "merged")
            return []
        change = final_state(job, step, outcome, self.settings.retry_base_seconds)
        for name, value in change.row.items():
            if name != "id":
                setattr(job, name, value)
        if change.halt:
            halted = await queue.settle_rest_of_chain(session, job, "canceled")
            return [*change.details, halted_detail(halted, change.halt_reason)]
        if change.release_next:
            if released is None:
                await queue.queue_next_steps(session, [job])
            else:
                released.append(job)
        return list(change.details)

    async def _fail_for_good(
        self,
        session: AsyncSession,
        job: Job,
        detail: Detail,
        released: list[Job] | None = None,
        *,
        with_message: bool = True,
    ) -> None:
        """Fail a job that will not be tried again (crashes, orphans, abandoned), as any failed step is.

        Its workflow goes on as after a failed step: halted when the step has
        ``shouldStopOnFail``, the next step released otherwise; a step that
        delivers through a provider and has no message yet gets one with status
        ``error``, ``errorId`` and ``errorText``. An expansion says how far it got.
        """
        if job.kind in (UNSNOOZE_JOB, WEBHOOK_JOB, HELD_RECEIVED_JOB):
            # Nothing follows a snooze's return, a webhook delivery or a held socket event: the job says why it
            # stopped, and no message changes.
            job.status = "failed"
            job.error_text = detail.detail
            job.locked_until = None
            job.updated_at = utcnow()
            return
        event = await EngineRepository(session).get_event(job.event_id)
        if job.kind == "event":
            detail = Detail(detail.status, expansion_failed_detail(job, detail.detail), raw=detail.raw)
            job.status = "failed"
            job.error_text = detail.detail
            job.locked_until = None
            job.updated_at = utcnow()
            await self._details(session, job, [detail], None)
            return
        step = step_of(event, job) if event is not None else {}
        outcome = StepOutcome("failed", details=[detail], error_text=detail.detail)
        if with_message and job.step_type in PROVIDER_CHANNELS and event is not None:
            if not await EngineRepository(session).messages_of_job(job.id):
                outcome.messages.append(_error_message(job, event, step, detail.detail))
        await EngineRepository(session).save_messages(outcome.messages)
        extra = await self._settle(session, job, step, outcome, released=released)
        await self._details(session, job, [*outcome.details, *extra], step)

    async def _details(self, session: AsyncSession, job: Job, details: list[Detail], step: dict | None) -> None:
        await EngineRepository(session).add_details(_detail_rows(job, details))

    async def _own_many(self, session: AsyncSession, jobs: list[Job]) -> list[Job]:
        """Lock the jobs' rows; returns those whose lease this worker still holds."""
        locked = await queue.lock_jobs(session, [job.id for job in jobs])
        owned = [job for job in locked if job.status == "running" and job.locked_by == self.worker_id]
        if len(owned) < len(jobs):
            logger.info("%d of %d jobs were taken over by another worker", len(jobs) - len(owned), len(jobs))
        return owned

    async def _own(self, session: AsyncSession, job: Job) -> Job:
        """Lock the job row and check we still hold its lease."""
        return await queue.lock_owned_job(session, job.id, self.worker_id)

    async def _record_crash(self, job: Job, exc: Exception, error_id: str) -> None:
        """An unexpected error: retry with backoff while attempts remain, then fail like any failed step."""
        text = f"Internal error {error_id}: {type(exc).__name__}: {exc}"
        detail = Detail("Failed", text, raw={"traceback": traceback.format_exception_only(exc)})
        try:
            async with self.sessionmaker() as session, session.begin():
                owned = await self._own(session, job)
                if owned.attempts < owned.max_attempts:
                    owned.locked_until = None
                    owned.error_text = text
                    owned.status = "queued"
                    owned.run_at = utcnow() + timedelta(seconds=queue.retry_delay(owned.attempts, self.settings.retry_base_seconds))
                    await self._details(session, owned, [detail], None)
                else:
                    await self._fail_for_good(session, owned, detail)
        except JobLost:
            logger.info("job %s was taken over by another worker", job.id)
        except Exception:
            logger.exception("could not record the failure of job %s (its lease will expire)", job.id)


def _unstored(messages: Iterable[Message]) -> list[Message]:
    """The messages not stored yet: a delivery the provider accepted was stored right after the send."""
    return [message for message in messages if not message.stored_on_acceptance]


async def _tenant_of(
    repository: EngineRepository, event: Event, known: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, Any] | None:
    """What templates see of the event's tenant (read once per tenant into ``known``)."""
    if not event.tenant:
        return None
    key = (event.environment_id, event.tenant["identifier"])
    if key not in known:
        row = await repository.get_tenant(*key)
        known[key] = {"identifier": key[1], "name": row.name if row else None, "data": (row.data if row else None) or {}}
    return known[key]


async def _read_environment_variables(repository: EngineRepository, contexts: Sequence[StepContext]) -> None:
    """Give each step that may read ``{{env.KEY}}`` the variables of its run's environment: one read for them all.

    A secret's value is opened here, for the render only; one that cannot be
    opened (sealed under another HERALD_SECRET_KEY) is left out, as an unset
    variable is: it renders empty.
    """
    wanted = steps_reading_env(list(contexts))
    if not wanted:
        return
    variables = await repository.environment_variables(ctx.job.organization_id for ctx in wanted)
    for ctx in wanted:
        env: dict[str, str] = {}
        for variable in variables:
            if variable.organization_id != ctx.job.organization_id:
                continue
            stored = (variable.values or {}).get(ctx.job.environment_id)
            if stored is None:
                continue
            try:
                env[variable.key] = ctx.box.open(stored) if variable.is_secret else stored
            except SecretKeyMismatch:
                logger.warning("environment variable %s cannot be opened: HERALD_SECRET_KEY differs", variable.key)
        ctx.env = env


async def _read_preferences(repository: EngineRepository, contexts: Sequence[StepContext]) -> None:
    """Give each channel step of a workflow that is not critical its subscriber's preferences: one read for them all.

    Steps of critical workflows, and steps that are not channel steps, are
    sent whatever the subscriber chose: for them nothing is read. Nor for a
    subscriber who had set no preference when read with the step (most).
    """
    wanted = [
        ctx
        for ctx in contexts
        if needs_preferences(ctx.job.step_type, ctx.event.workflow_critical)
        and ctx.subscriber.id not in repository.without_preferences
    ]
    if not wanted:
        return
    found = await repository.preferences_of(
        (ctx.job.subscriber_id or "" for ctx in wanted), (ctx.job.workflow_id for ctx in wanted)
    )
    for ctx in wanted:
        subscriber_id = ctx.job.subscriber_id or ""
        ctx.preferences = StepPreferences(found.get((subscriber_id, None)), found.get((subscriber_id, ctx.job.workflow_id)))


def _refused_by_preferences(ctx: StepContext) -> StepOutcome | None:
    """The outcome of a channel step the subscriber's preferences turn off (as Novu: canceled), or None to send it."""
    if not needs_preferences(ctx.job.step_type, ctx.event.workflow_critical):
        return None
    chosen = ctx.preferences or StepPreferences()
    verdict = evaluate(
        ctx.job.step_type or "",
        ctx.event.trigger_identifier,
        critical=bool(ctx.event.workflow_critical),
        preference_settings=ctx.event.workflow_preference_settings,
        global_preference=chosen.global_preference,
        workflow_preference=chosen.workflow_preference,
    )
    if verdict.allowed:
        return None
    return StepOutcome("canceled", details=[Detail("Success", verdict.reason or "", raw={"preferences": {"passed": False}})])


def _quiet_until(ctx: StepContext) -> datetime | None:
    """The next open hour of the subscriber's delivery schedule when the step runs outside it, else None.

    Only what ``_read_preferences`` read: channel steps of workflows that are
    not critical, for subscribers who set a preference.
    """
    if ctx.preferences is None:
        return None
    chosen = ctx.preferences.global_preference
    if chosen is None or not chosen.schedule:
        return None
    return held_until(chosen.schedule, ctx.subscriber.timezone, ctx.now)


def _held_by_quiet_hours(ctx: StepContext) -> StepOutcome | None:
    """A delivery outside the subscriber's delivery schedule, held until its next open hour (engine.quiet_hours).

    In-app messages are not held (``_hold_received_in_quiet_hours``): the
    inbox is read when the subscriber chooses to.
    """
    if ctx.job.step_type not in PROVIDER_CHANNELS:
        return None
    until = _quiet_until(ctx)
    if until is None:
        return None
    zone = zone_of(ctx.subscriber.timezone).key
    return StepOutcome(
        "delayed",
        details=[Detail("Pending", f"Held by the subscriber's delivery schedule until {isoformat(until)} ({zone})")],
        run_at=until,
        data={"quiet_until": isoformat(until)},
    )


def _hold_received_in_quiet_hours(ctx: StepContext, outcome: StepOutcome) -> None:
    """An in-app message created outside the subscriber's delivery schedule: stored now, its socket event held.

    The message goes in the inbox at once (listed, counted); the real-time
    ``notification_received`` waits for the next open hour, in a job written
    with the message (herald.realtime.held). A critical workflow's message is
    never held (its preferences are not read: ``_quiet_until``).
    """
    if outcome.status != "completed" or not outcome.messages:
        return
    until = _quiet_until(ctx)
    if until is None:
        return
    outcome.received_held_until = until
    zone = zone_of(ctx.subscriber.timezone).key
    outcome.details.append(
        Detail("Success", f"Real-time notification held by the subscriber's delivery schedule until {isoformat(until)} ({zone})")
    )


def _held_received(pairs: Iterable[tuple[StepContext, StepOutcome]]) -> dict[str, datetime]:
    """The in-app steps among ``pairs`` whose socket event waits for quiet hours to end: when, by job id."""
    return {ctx.job.id: outcome.received_held_until for ctx, outcome in pairs if outcome.received_held_until is not None}


def step_of(event: Event, job: Job) -> dict[str, Any]:
    """The step of the event's snapshot that a step job runs (by its id, else by its place)."""
    steps = event.steps or []
    return next(
        (s for i, s in enumerate(steps) if (s.get("_id") or s.get("uuid") or str(i)) == job.step_id),
        None,
    ) or _active_step_at(steps, job.step_index or 0)


def _error_message(job: Job, event: Event, step: dict[str, Any], text: str) -> Message:
    """The ``error`` message of a delivery step that failed for good before a provider answered."""
    return Message(
        environment_id=job.environment_id,
        organization_id=job.organization_id,
        notification_id=job.notification_id,
        subscriber_id=job.subscriber_id,
        job_id=job.id,
        delivery_key="",
        workflow_id=job.workflow_id,
        message_template_id=step.get("_templateId"),
        template_identifier=event.trigger_identifier,
        transaction_id=job.transaction_id,
        channel=job.step_type,
        payload=event.payload or {},
        overrides=event.overrides or {},
        status="error",
        error_id=f"error_{new_id()}",
        error_text=text,
    )


@dataclass(frozen=True)
class FinalState:
    """What a final step outcome does to its job: the row to write, and what follows in its workflow."""

    row: dict[str, Any]
    details: tuple[Detail, ...] = ()
    # Queue the next step of the chain.
    release_next: bool = False
    # Cancel the rest of the chain (a failed step with shouldStopOnFail, a throttled run), and why.
    halt: bool = False
    halt_reason: str = "the step failed and shouldStopOnFail is set"


def final_state(job: Job, step: dict[str, Any], outcome: StepOutcome, retry_base_seconds: float) -> FinalState:
    """The job's state after a completed, skipped or failed step (a failed one retried while it may be).

    The single place this is decided: the batched write (queue.finish_jobs)
    and the one-job write (``JobRunner._settle``) both apply it.
    """
    changes: dict[str, Any] = {}
    if outcome.data is not None:
        changes["data"] = {**(job.data or {}), **outcome.data}
    if outcome.digest_key is not None:
        changes["digest_key"] = outcome.digest_key
    if outcome.result is not None:
        changes["result"] = outcome.result
    if outcome.status == "failed" and outcome.retryable and job.attempts < job.max_attempts:
        delay = queue.retry_delay(job.attempts, retry_base_seconds)
        row = queue.outcome_row(
            job, status="queued", run_at=utcnow() + timedelta(seconds=delay), error_text=outcome.error_text, **changes
        )
        return FinalState(row, (Detail("Pending", f"Will retry in {delay:.1f}s (attempt {job.attempts} of {job.max_attempts})"),))
    if outcome.status == "failed":
        row = queue.outcome_row(job, status="failed", error_text=outcome.error_text, **changes)
        if step.get("shouldStopOnFail"):
            return FinalState(row, halt=True)
        if outcome.halt:
            return FinalState(row, halt=True, halt_reason=f"the {job.step_type} step failed")
        return FinalState(row, release_next=True)
    row = queue.outcome_row(job, status=outcome.status, **changes)
    if outcome.halt:
        return FinalState(row, halt=True, halt_reason=f"the {job.step_type} step stopped it")
    return FinalState(row, release_next=True)


def halted_detail(halted: int, reason: str) -> Detail:
    return Detail("Failed", f"Workflow halted: {reason} ({halted} steps not run)")


def _detail_rows(job: Job, details: list[Detail]) -> list[dict[str, Any]]:
    return [detail_row(job, d.status, d.detail, provider_id=d.provider_id, raw=d.raw) for d in details]


def _queued(ctx: StepContext, job: Job) -> Detail:
    return Detail("Queued", f"Step {ctx.step.get('name') or job.step_type} queued; attempt {job.attempts}")


def _has_next_step(ctx: StepContext) -> bool:
    """Whether a step comes after the job's in its chain: the last one's release would update nothing.

    A notification's jobs are its event's active steps, in order (expand._step_jobs),
    and the event keeps the steps as they were at the trigger.
    """
    return (ctx.job.step_index or 0) + 1 < len(active_steps(ctx.event))


def _digest_before(steps: list[dict[str, Any]], index: int) -> bool:
    """Whether an active step before the ``index``-th active one is a digest (whose result this step sees)."""
    active = [step for step in steps if step.get("active", True)]
    return any((step.get("template") or {}).get("type") == "digest" for step in active[:index])


class _Retry(Exception):
    """The outcome lost a race; work the step out again."""


def _active_step_at(steps: list[dict], index: int) -> dict:
    active = [s for s in steps if s.get("active", True)]
    return active[index] if index < len(active) else {}
