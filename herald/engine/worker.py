"""The worker loop: claim due jobs, run them concurrently, sleep until woken.

Wake-ups come from an in-process signal (rung by every commit of this
process that wrote jobs: the API's, and the worker's own when a round releases
the next steps; see queue.ring_on_commit) and, on PostgreSQL, from
LISTEN/NOTIFY for other processes' jobs; a short poll is the fallback, and it
also catches delayed jobs whose time has come.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime

import httpx
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.engine import queue
from herald.engine.queue import PRESSURE_REQUESTS, JobSignal
from herald.engine.retention import Purged, Retention, purge_history
from herald.engine.runner import JobRunner
from herald.engine.steps.base import EngineSettings
from herald.kit.crypto import SecretBox
from herald.kit.db import listen_until, without_transaction
from herald.kit.idempotency import IdempotencyRepository
from herald.kit.ids import short_id
from herald.kit.metrics import observe_job_waits
from herald.kit.outbound import OutboundPolicy
from herald.kit.time import utcnow
from herald.providers.http import create_http_client
from herald.subscribers.imports import ImportRunner
from herald.webhooks.sender import WebhookSender

logger = logging.getLogger("herald.worker")

# How often a worker takes back the jobs of workers that died (their lease ran out).
SWEEP_SECONDS = 5.0
# A worker gives way to the API: after a round that ran while at least
# PRESSURE_REQUESTS (queue.py) requests were waiting, it pauses YIELD_FACTOR
# times as long as the round took (it keeps a quarter of its time while the API
# is busy). A burst of triggers is accepted at the API's speed and delivered
# right after; at moderate rates the worker never pauses. Moderate includes a
# few requests at once: at 100 triggers/s with clients polling their inboxes, 4
# requests in flight happened often enough that pauses of up to a quarter
# second made the end-to-end p99 (SQLite: 224 ms, against 42 ms with 16). A
# burst that should get the machine first holds dozens (32 and more in the
# benchmark). The in-process worker reads the most requests its API had in
# flight at once during the round (kit.asgi.RequestsInFlight); a worker of its
# own process hears of them from the wake-ups of trigger batches that many
# callers wait on (queue.BUSY), for BUSY_HOLD_SECONDS after the last: under a
# burst such batches come every few milliseconds.
YIELD_FACTOR = 3.0
YIELD_MAX_SECONDS = 0.25
BUSY_HOLD_SECONDS = 0.2
# How long a worker that is its store's only writer sleeps while nothing is due and nothing rang: the
# in-process worker of ``herald serve`` on SQLite, where every process that writes jobs is this one and
# rings the signal on commit (docs/deployment.md: one ``herald serve`` per SQLite file, no ``herald
# worker``). Delayed jobs wake it at their due time; this is only the fallback look at the store, and the
# sweeps (dead workers' leases, stalled imports) and purges ride on it while idle. At the poll interval
# (0.5 s) an idle process's looks cost 1.4% of a core (bench/idle.py, 2026-11-29).
SOLE_WRITER_POLL_SECONDS = 30.0
# How often a worker deletes idempotency records past their 24 hours.
PURGE_SECONDS = 60.0
PURGE_BATCH = 5000


def pause_after_round(round_seconds: float, requests_waiting: int) -> float:
    """How long a worker gives way to its process's API after a round of jobs (see YIELD_FACTOR)."""
    if requests_waiting < PRESSURE_REQUESTS:
        return 0.0
    return min(round_seconds * YIELD_FACTOR, YIELD_MAX_SECONDS)


@dataclass
class Worker:
    sessionmaker: async_sessionmaker[AsyncSession]
    box: SecretBox
    settings: EngineSettings = field(default_factory=EngineSettings)
    # Steps evaluated at once (provider calls in flight), and jobs claimed at once.
    concurrency: int = 100
    batch_size: int = 100
    poll_interval: float = 0.5
    signal: JobSignal = field(default_factory=JobSignal)
    database_url: str | None = None
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{short_id(6)}")
    http: httpx.AsyncClient | None = None
    # What the HTTP client made here (without ``http``) and SMTP may connect to (kit/outbound.py).
    outbound: OutboundPolicy = field(default_factory=OutboundPolicy)
    # Requests the API of this process is answering now (0 for a standalone worker).
    pressure: Callable[[], int] = field(default=lambda: 0)
    # Give way to API processes that say they are busy (queue.BUSY wake-ups).
    give_way: bool = True
    # How long the activity and messages are kept (engine/retention.py).
    retention: Retention = field(default_factory=Retention)
    # Webhook deliveries in flight at once, and of those, to one endpoint (webhooks/sender.py).
    webhook_concurrency: int = 50
    webhook_endpoint_concurrency: int = 10
    # The store's only writer of jobs (SOLE_WRITER_POLL_SECONDS), and how long it sleeps while idle
    # (HERALD_WORKER_IDLE_POLL_SECONDS): set before run_forever.
    sole_writer: bool = False
    idle_poll_seconds: float = SOLE_WRITER_POLL_SECONDS

    def __post_init__(self) -> None:
        self._owns_http = self.http is None
        if self.http is None:
            self.http = create_http_client(outbound=self.outbound)
        self.runner = JobRunner(self.sessionmaker, self.http, self.box, self.settings, self.worker_id, self.batch_size)
        # Webhook deliveries have their own claims and cap, beside the steps' loop: however many wait
        # for a slow endpoint, a due step is claimed as without them.
        self.webhooks = WebhookSender(
            self.sessionmaker,
            self.http,
            self.box,
            self.worker_id,
            lease_seconds=self.settings.lease_seconds,
            retry_base_seconds=self.settings.retry_base_seconds,
            concurrency=self.webhook_concurrency,
            per_endpoint=self.webhook_endpoint_concurrency,
            poll_interval=self.poll_interval,
            signal=self.signal,
        )
        # CSV imports of subscribers whose API process stopped are taken up here (subscribers/imports.py).
        self.imports = ImportRunner(self.sessionmaker, self.box)
        self._next_sweep = 0.0
        self._next_purge = 0.0
        self._next_due_check = 0.0
        self._next_due: datetime | None = None
        # The signal's ring count when the next due time was last read, and whether a round ran since: either
        # means the store may hold jobs the reading did not see (written here, or a retry a round scheduled).
        self._rings_at_read = -1
        self._ran_since_read = True
        self._busy_until = 0.0

    async def run_once(self) -> int:
        """Claim one batch of due jobs and run it; returns how many jobs ran.

        Webhook deliveries are not among them: ``self.webhooks`` sends them,
        beside this loop (run_forever), or after it (run_until_idle).
        """
        if time.monotonic() >= self._next_sweep:
            await self.runner.take_back_from_dead_workers()
            await self.sweep_dead_socket_holders()
            await self.take_up_stalled_imports()
            self._next_sweep = time.monotonic() + min(self.settings.lease_seconds, SWEEP_SECONDS)
        if time.monotonic() >= self._next_purge:
            await self.purge_expired_idempotency_records()
            await self.sweep_console_leftovers()
            await self.purge_old_history()
            self._next_purge = time.monotonic() + PURGE_SECONDS
        async with self.sessionmaker() as session:
            # One statement, so no transaction around it: one round trip, not four
            # (every worker makes one whenever jobs are announced, found or not).
            await without_transaction(session)
            jobs = list(await queue.claim_jobs(session, self.worker_id, self.batch_size, self.settings.lease_seconds))
            await session.commit()
        if not jobs:
            return 0
        observe_job_waits([job.run_at for job in jobs])
        await self.runner.run_batch(jobs, self.concurrency)
        return len(jobs)

    async def sweep_dead_socket_holders(self) -> int:
        """Subscribers held only by API processes that died without closing go offline (realtime/service.py),
        also when no API process is left to sweep them."""
        from herald.realtime.service import sweep_dead_processes

        try:
            return await sweep_dead_processes(self.sessionmaker)
        except Exception:
            logger.warning("could not sweep dead realtime processes", exc_info=True)
            return 0

    async def take_up_stalled_imports(self) -> int:
        """Run here the CSV imports whose process stopped before their end (herald/subscribers/imports.py)."""
        try:
            return await self.imports.take_up_stalled()
        except Exception:  # the next sweep tries again
            logger.warning("could not take up stopped subscriber imports", exc_info=True)
            return 0

    async def sweep_console_leftovers(self) -> int:
        """Delete the console's failed sign-ins out of their window, ended sessions and expired links (members/service.py)."""
        from herald.members.service import sweep

        try:
            async with self.sessionmaker() as session, session.begin():
                return await sweep(session)
        except Exception:  # the next purge tries again
            logger.warning("could not sweep the console's ended sessions and failed sign-ins", exc_info=True)
            return 0

    async def purge_expired_idempotency_records(self) -> int:
        """Delete idempotency records past their 24 hours, a bounded batch per transaction."""
        purged = 0
        try:
            while True:
                async with self.sessionmaker() as session, session.begin():
                    deleted = await IdempotencyRepository(session).purge_expired(PURGE_BATCH)
                purged += deleted
                if deleted < PURGE_BATCH:
                    break
        except Exception:  # the next purge tries again
            logger.warning("could not purge expired idempotency records", exc_info=True)
        if purged:
            logger.info("purged %d expired idempotency records", purged)
        return purged

    async def purge_old_history(self) -> Purged:
        """Delete the activity and messages past their retention (engine/retention.py)."""
        try:
            return await purge_history(self.sessionmaker, self.retention)
        except Exception:  # the next purge tries again
            logger.warning("could not delete history past its retention", exc_info=True)
            return Purged()

    async def run_until_idle(self, max_rounds: int = 10_000) -> int:
        """Run due jobs and send due webhook deliveries until none is due (tests and one-off drains)."""
        total = 0
        for _ in range(max_rounds):
            ran = await self.run_once()
            ran += await self.webhooks.run_once()
            if ran == 0:
                return total
            total += ran
        return total

    async def run_forever(self, stop: asyncio.Event) -> None:
        listener = asyncio.create_task(self._listen(stop)) if self._is_postgres() else None
        if self.sole_writer:
            self.webhooks.idle_poll_seconds = max(self.idle_poll_seconds, self.poll_interval)
        sender = asyncio.create_task(self.webhooks.run_forever(stop))
        logger.info("worker %s started (concurrency %d)", self.worker_id, self.concurrency)
        logger.info(
            "worker %s: webhook deliveries %d at once, %d to one endpoint",
            self.worker_id,
            self.webhook_concurrency,
            self.webhook_endpoint_concurrency,
        )
        # Retention deletes data on its own: say so where an operator looks first.
        logger.info("worker %s: %s", self.worker_id, self.retention.describe())
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    ran = await self.run_once()
                except Exception:
                    logger.exception("worker %s could not claim jobs; retrying", self.worker_id)
                    ran = 0
                    await asyncio.sleep(self.poll_interval)
                if ran:
                    self._ran_since_read = True
                    pause = pause_after_round(time.monotonic() - started, self.requests_waiting())
                    if pause:
                        await asyncio.sleep(pause)
                    if ran >= self.batch_size:
                        continue  # a full round: more may be waiting
                # A round that took fewer jobs than it could emptied the queue
                # of due jobs; claiming again at once found nothing, a claim a
                # round (a third of a worker's statements at a trickle). What
                # came since has rung the signal: new triggers, and the steps
                # this round released (queue.ring_on_commit), so the wait ends
                # at once when there is work.
                await self._idle(stop, await self._idle_timeout())
        except asyncio.CancelledError:
            # Stopped past its grace (run_until_stopped): the deliveries in flight are dropped too.
            sender.cancel()
            raise
        finally:
            # The sender finishes the deliveries in flight once ``stop`` is set.
            if not stop.is_set():  # the loop itself failed
                sender.cancel()
            with suppress(asyncio.CancelledError):
                await sender
            if listener is not None:
                listener.cancel()
                with suppress(asyncio.CancelledError):
                    await listener
            if self._owns_http and self.http is not None:
                await self.http.aclose()
            logger.info("worker %s stopped", self.worker_id)

    async def run_until_stopped(self, stop: asyncio.Event, grace: float) -> None:
        """:meth:`run_forever` until ``stop`` is set; then the round in flight has ``grace`` seconds to finish.

        Past them (a provider that does not answer) the round is cancelled and
        the jobs this worker holds are queued again, due now, for the next
        worker: a process told to stop (SIGTERM) exits in bounded time and
        leaves nothing to wait for its lease. A step whose send was under way
        may then be sent again, as after a crash.
        """
        running = asyncio.create_task(self.run_forever(stop))
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({running, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if not running.done():
            finished, _ = await asyncio.wait({running}, timeout=grace)
            if not finished:
                logger.warning("worker %s: the round in flight did not finish within %g s; stopping it", self.worker_id, grace)
                running.cancel()
                with suppress(asyncio.CancelledError):
                    await running
        # Nothing is held after a round that finished; after one cancelled, its jobs.
        try:
            async with self.sessionmaker() as session, session.begin():
                released = await queue.release_claims(session, self.worker_id)
        except Exception:
            logger.warning("worker %s could not queue its jobs again; they return when their lease runs out", self.worker_id, exc_info=True)
        else:
            if released:
                logger.info("worker %s queued %d jobs again for other workers", self.worker_id, released)
        if running.done() and not running.cancelled():
            running.result()

    def requests_waiting(self) -> int:
        """Requests waiting on an API: this process's, or PRESSURE_REQUESTS while one said it was busy."""
        if self.give_way and time.monotonic() < self._busy_until:
            return max(self.pressure(), PRESSURE_REQUESTS)
        return self.pressure()

    def heard(self, payload: str) -> None:
        """A wake-up from another process: jobs were written; BUSY says by a batch many callers wait on,
        WEBHOOKS that only webhook deliveries were (the steps' loop has nothing to claim)."""
        if payload == queue.WEBHOOKS:
            self.signal.ring_webhooks()
            return
        if payload == queue.BUSY:
            self._busy_until = time.monotonic() + BUSY_HOLD_SECONDS
        self.signal.ring()

    async def _idle(self, stop: asyncio.Event, timeout: float) -> None:
        """Sleep until jobs are signalled, ``timeout`` passes or ``stop`` is set, whichever comes first.

        Waiting on the signal alone would keep a stopping worker (SIGTERM)
        asleep for up to a whole poll interval.
        """
        if stop.is_set():
            return
        stopped = asyncio.ensure_future(stop.wait())
        woken = asyncio.ensure_future(self.signal.wait(timeout))
        try:
            await asyncio.wait({stopped, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (stopped, woken):
                waiter.cancel()
                with suppress(asyncio.CancelledError):
                    await waiter

    async def _idle_timeout(self) -> float:
        """How long an idle worker may sleep: until the next delayed job is due, at most the poll interval.

        The store is asked at most once per poll interval (a busy worker goes
        idle after every round, and the answer can only shorten a sleep that
        the poll interval bounds anyway), and again once the due time it gave
        has passed. A worker only sleeps after a round, and that round's claim
        took whatever was due: a due time that has passed belongs to a job
        already claimed. Kept for the rest of the interval, it made every sleep
        end at once, and the worker claimed over and over, finding nothing, for
        up to a poll interval whenever it had asked while a trigger's job
        waited for its claim (a third of the claims at 100 triggers/s on SQLite).
        """
        now = time.monotonic()
        passed = self._next_due is not None and self._next_due <= utcnow()
        if now >= self._next_due_check or passed:
            self._next_due_check = now + self.poll_interval
            self._rings_at_read, self._ran_since_read = self.signal.rings, False
            try:
                async with self.sessionmaker() as session:
                    self._next_due = await queue.next_run_at(session)
            except Exception:
                self._next_due = None
                self._ran_since_read = True  # not read: look again at the poll interval
        # The store's only writer sleeps long while the reading holds (nothing rang, no round ran since):
        # what is written later rings, and what is delayed has its due time read.
        quiet = self.sole_writer and self.signal.rings == self._rings_at_read and not self._ran_since_read
        ceiling = max(self.idle_poll_seconds, self.poll_interval) if quiet else self.poll_interval
        if self._next_due is None:
            return ceiling
        return max(0.0, min(ceiling, (self._next_due - utcnow()).total_seconds()))

    def _is_postgres(self) -> bool:
        return bool(self.database_url) and make_url(self.database_url or "").get_backend_name() == "postgresql"

    async def _listen(self, stop: asyncio.Event) -> None:
        """LISTEN for job notifications on a connection of its own; reconnect when it drops (polling meanwhile)."""
        await listen_until(self.database_url or "", queue.WAKE_CHANNEL, self.heard, stop, what="worker")
