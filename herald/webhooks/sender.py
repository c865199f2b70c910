"""A worker's share for webhook deliveries: claims of its own, a cap of its own, beside the workflow steps.

Webhook deliveries used to be claimed with the workflow's jobs, oldest first,
and a batch of them ran to its end (up to the 15 s an endpoint is given)
before the worker claimed again: 18,000 deliveries queued for a slow endpoint
held a new trigger's step for 110 s. Now each worker runs a sender beside its
loop of steps. It claims from the deliveries' own queue (herald/webhooks/
queue.py), never from the steps', and keeps at most ``concurrency`` deliveries
in flight, at most ``per_endpoint`` of them to one endpoint; each delivery
that ends frees its place at once, without waiting for the others claimed with
it. An endpoint that fails is paused and then probed with one delivery
(herald/webhooks/delivery.py), so its backlog waits in the store, not in the
sender: a slow or dead endpoint holds at most ``per_endpoint`` places, and the
other endpoints' deliveries go on in the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import configure_mappers

from herald.engine import queue
from herald.engine.queue import JobSignal
from herald.kit.crypto import SecretBox
from herald.kit.db import without_transaction
from herald.kit.time import utcnow
from herald.models import Job
from herald.webhooks import queue as deliveries
from herald.webhooks.delivery import PROBE_HOLD_SECONDS, deliver

logger = logging.getLogger("herald.webhooks")


@dataclass
class WebhookSender:
    sessionmaker: async_sessionmaker[AsyncSession]
    http: httpx.AsyncClient
    box: SecretBox
    worker_id: str
    lease_seconds: float
    retry_base_seconds: float
    # Deliveries in flight at once, and of those, to one endpoint.
    concurrency: int = 50
    per_endpoint: int = 10
    poll_interval: float = 0.5
    signal: JobSignal = field(default_factory=JobSignal)
    # How long to wait, with nothing due, after a claim that saw every waiting delivery, when this process is
    # the store's only writer (engine.worker.SOLE_WRITER_POLL_SECONDS): what is queued later rings. None: the
    # poll interval, for deliveries other processes queue (their NOTIFY can be missed while reconnecting).
    idle_poll_seconds: float | None = None

    def __post_init__(self) -> None:
        # Claimed jobs are built from their rows (engine.queue.job_from_row), which needs the mappers
        # configured: a sender's first claim may come before this process's first ORM query.
        configure_mappers()
        self._sending: set[asyncio.Task[None]] = set()
        self._per_endpoint: Counter[str] = Counter()
        # The jobs whose leases this sender holds (extended while they are sent).
        self._held: set[str] = set()
        # Claims start after the endpoint the last one ended with, so every endpoint gets its turn
        # when there are more than places.
        self._after = ""
        self._next_look: datetime | None = None

    async def claim(self) -> list[Job]:
        """Claim what may be sent now: a few deliveries of each endpoint that is due, not paused and not at its cap."""
        # When something not due now comes due (a delivery's retry, an endpoint's pause): an idle sender
        # looks again then. Unknown while every place is taken, and then a freed place wakes it.
        self._next_look = None
        room = self.concurrency - len(self._sending)
        if room <= 0:
            return []
        claimed: list[Job] = []
        async with self.sessionmaker() as session:
            # Each statement commits on its own (PostgreSQL): a claim holds no transaction open.
            await without_transaction(session)
            waiting = await deliveries.waiting_endpoints(session)
            now = utcnow()
            for endpoint in _in_turn(waiting, self._after):
                if room <= 0:
                    break
                if endpoint.due_at > now:
                    self._look_at(endpoint.due_at)
                    continue
                if endpoint.paused_until is not None and endpoint.paused_until > now and self._sends_to(endpoint):
                    self._look_at(endpoint.paused_until)
                    continue
                take = self._room_for(endpoint, room)
                if take <= 0:
                    continue
                if self._sends_to(endpoint) and endpoint.failing_since is not None:
                    # The pause is over: one delivery, alone, tells whether the endpoint is back.
                    if not await deliveries.take_probe(session, endpoint.endpoint_id, PROBE_HOLD_SECONDS):
                        continue  # another worker probes it
                jobs = await deliveries.claim_deliveries(session, endpoint.endpoint_id, take, self.worker_id, self.lease_seconds)
                await session.commit()
                claimed += jobs
                room -= len(jobs)
                self._after = endpoint.endpoint_id
        return claimed

    @staticmethod
    def _sends_to(endpoint: deliveries.WaitingEndpoint) -> bool:
        """Whether the endpoint's deliveries are sent (not canceled: it was deleted or disabled)."""
        return endpoint.present and not endpoint.disabled

    def _room_for(self, endpoint: deliveries.WaitingEndpoint, room: int) -> int:
        """How many of the endpoint's due deliveries to claim now (it is not paused)."""
        if not self._sends_to(endpoint):
            return room  # nothing is sent: each is canceled with why
        in_flight = self._per_endpoint[endpoint.endpoint_id]
        if endpoint.failing_since is not None:
            return 1 if in_flight == 0 else 0  # the probe
        return min(room, self.per_endpoint - in_flight)

    def _look_at(self, moment: datetime) -> None:
        if self._next_look is None or moment < self._next_look:
            self._next_look = moment

    def start(self, jobs: Iterable[Job]) -> list[asyncio.Task[None]]:
        """Send each job in a task of its own; each frees its place when it ends."""
        started = []
        for job in jobs:
            endpoint_id = job.endpoint_id or ""
            self._per_endpoint[endpoint_id] += 1
            self._held.add(job.id)
            task = asyncio.create_task(self._send(job, endpoint_id))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
            started.append(task)
        return started

    async def _send(self, job: Job, endpoint_id: str) -> None:
        try:
            await deliver(self.sessionmaker, self.http, self.box, job, self.worker_id, self.retry_base_seconds)
        except Exception:  # one delivery must never stop the sender; its lease runs out and it is sent again
            logger.exception("webhook job %s could not be sent", job.id)
        finally:
            self._held.discard(job.id)
            self._per_endpoint[endpoint_id] -= 1
            if self._per_endpoint[endpoint_id] <= 0:
                del self._per_endpoint[endpoint_id]
            self.signal.ring_webhooks()  # a place is free

    async def run_once(self) -> int:
        """Claim once and send what was claimed, to the end (tests and one-off drains); how many were sent."""
        jobs = await self.claim()
        if not jobs:
            return 0
        async with self._keeping_leases():
            await asyncio.gather(*self.start(jobs))
        return len(jobs)

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Claim whenever there is room and something may be due; stop when ``stop`` is set, after what is in flight."""
        async with self._keeping_leases():
            try:
                while not stop.is_set():
                    claimed = False
                    try:
                        self.start(await self.claim())
                        claimed = True
                    except Exception:
                        logger.exception("worker %s could not claim webhook deliveries; retrying", self.worker_id)
                    await self._idle(stop, long=claimed)
            finally:
                if self._sending:
                    await asyncio.gather(*list(self._sending), return_exceptions=True)

    async def _idle(self, stop: asyncio.Event, long: bool = False) -> None:
        """Wait for a reason to claim again: deliveries queued, a place freed, a pause or a retry due, or a poll.

        ``long``: the claim before saw what waits (``idle_poll_seconds`` may apply).
        """
        timeout = self.idle_poll_seconds if long and self.idle_poll_seconds is not None else self.poll_interval
        if self._next_look is not None:
            timeout = max(0.0, min(timeout, (self._next_look - utcnow()).total_seconds()))
        stopped = asyncio.ensure_future(stop.wait())
        woken = asyncio.ensure_future(self.signal.wait_webhooks(timeout))
        try:
            await asyncio.wait({stopped, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (stopped, woken):
                waiter.cancel()
                with suppress(asyncio.CancelledError):
                    await waiter

    @asynccontextmanager
    async def _keeping_leases(self) -> AsyncIterator[None]:
        """Extend the leases of the deliveries in flight every third of a lease (a slow endpoint takes up to 15 s)."""

        async def beat() -> None:
            interval = max(self.lease_seconds / 3, 0.05)
            while True:
                await asyncio.sleep(interval)
                if not self._held:
                    continue
                try:
                    async with self.sessionmaker() as session, session.begin():
                        await queue.extend_leases(session, list(self._held), self.worker_id, self.lease_seconds)
                except Exception:  # the next beat tries again; the lease is long enough for one miss
                    logger.warning("could not extend the leases of %d webhook deliveries", len(self._held), exc_info=True)

        heartbeat = asyncio.create_task(beat())
        try:
            yield
        finally:
            heartbeat.cancel()
            with suppress(asyncio.CancelledError):
                await heartbeat


def _in_turn(waiting: list[deliveries.WaitingEndpoint], after: str) -> list[deliveries.WaitingEndpoint]:
    """The endpoints in id order, starting after ``after`` and wrapping round."""
    later = [endpoint for endpoint in waiting if endpoint.endpoint_id > after]
    return later + [endpoint for endpoint in waiting if endpoint.endpoint_id <= after]
