"""What the channel steps of one claimed batch share: reads made once, and accepted deliveries stored together.

A worker runs the steps it claimed together (``JobRunner.run_batch``, up to a
hundred, several at a time). Read and written per step, an email cost three
short transactions besides the batch's own: the channel's integrations with
their breakers, the job's earlier messages, and the delivery the provider
accepted. Measured on PostgreSQL with 2 workers (``python -m bench.email``),
those were a quarter of a worker's CPU an email. Here:

- the channel's integrations are read once per environment and channel for
  the batch, and the breaker states this batch learns (a failure recorded, a
  breaker cleared) replace the ones read, so later steps of the batch see them;
- the earlier messages are read once for every job of the batch, in one
  statement (a first attempt has none, but a job taken over from a dead worker
  may);
- accepted deliveries are stored by :class:`AcceptedDeliveries`, which writes
  the ones that arrive while a write is under way together in the next
  transaction. Each step still waits until its delivery is committed before it
  goes on, so a delivery is never stored later than before;
- the records that an email is about to be handed to its SMTP server
  (:class:`HandOvers`, steps/delivery.py) are written the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.engine import queue
from herald.engine.repository import EngineRepository
from herald.kit.db import without_transaction
from herald.models import Integration, IntegrationHealth, Job, Message

Candidates = list[tuple[Integration, IntegrationHealth | None]]


@dataclass
class _GroupedJobWrites:
    """Writes for jobs this worker holds, those that arrive while a write is under way together in the next transaction.

    Each caller waits until its own write is committed. A job whose lease this
    worker lost (another worker took it over) is refused with ``JobLost``, as
    ``queue.lock_owned_job`` does for one.
    """

    sessionmaker: async_sessionmaker[AsyncSession]
    worker_id: str
    _waiting: list[tuple[str, Any, asyncio.Future[None]]] = field(default_factory=list)
    _writer: asyncio.Task[None] | None = None

    async def _submit(self, job_id: str, item: Any) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((job_id, item, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write_all())
        await done

    async def _write(self, group: Sequence[tuple[str, Any, asyncio.Future[None]]]) -> set[str]:
        """Write the group in one transaction; returns the ids of the jobs this worker still held."""
        raise NotImplementedError

    async def _write_all(self) -> None:
        try:
            await self._write_groups()
        finally:
            # Cut short (the worker stopping): the steps still waiting hear it rather than wait for ever; their
            # jobs' leases run out and they are retried, finding anything stored.
            for _, _, done in self._waiting:
                if not done.done():
                    done.set_exception(RuntimeError("the worker stopped before storing this delivery"))

    async def _write_groups(self) -> None:
        # One turn of the event loop first: sends that finished together join the first write.
        await asyncio.sleep(0)
        while self._waiting:
            group, self._waiting = self._waiting, []
            try:
                owned = await self._write(group)
            except BaseException as exc:  # every waiting step hears of it
                for _, _, done in group:
                    if not done.done():
                        done.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
                if not isinstance(exc, Exception):
                    raise
                continue
            for job_id, _, done in group:
                if done.done():
                    continue
                if job_id in owned:
                    done.set_result(None)
                else:
                    done.set_exception(queue.JobLost(job_id))


@dataclass
class AcceptedDeliveries(_GroupedJobWrites):
    """Stores accepted deliveries while this worker holds their jobs, those that arrive together in one transaction."""

    async def store(self, job_id: str, message: Message) -> None:
        await self._submit(job_id, message)

    async def _write(self, group: Sequence[tuple[str, Any, asyncio.Future[None]]]) -> set[str]:
        async with self.sessionmaker() as session, session.begin():
            owned = await queue.lock_held_jobs(session, [job_id for job_id, _, _ in group], self.worker_id)
            await EngineRepository(session).save_messages([message for job_id, message, _ in group if job_id in owned])
        for job_id, message, _ in group:
            if job_id in owned:
                message.stored_on_acceptance = True
        return owned


@dataclass
class HandOvers(_GroupedJobWrites):
    """Records that a step's email is about to be handed to its SMTP server (``queue.record_handovers``), those of a batch together."""

    async def record(self, job_id: str) -> None:
        await self._submit(job_id, None)

    async def _write(self, group: Sequence[tuple[str, Any, asyncio.Future[None]]]) -> set[str]:
        return await record_handovers(self.sessionmaker, [job_id for job_id, _, _ in group], self.worker_id)


async def record_handovers(sessionmaker: async_sessionmaker[AsyncSession], job_ids: Sequence[str], worker_id: str) -> set[str]:
    """``queue.record_handovers`` in a session of its own: one statement, so no transaction around it on PostgreSQL."""
    async with sessionmaker() as session:
        await without_transaction(session)
        owned = await queue.record_handovers(session, job_ids, worker_id)
        await session.commit()
    return owned


@dataclass
class StepBatch:
    """The reads a batch's channel steps share, its :class:`AcceptedDeliveries` and its :class:`HandOvers`."""

    sessionmaker: async_sessionmaker[AsyncSession]
    jobs: Sequence[Job]
    accepted: AcceptedDeliveries
    handovers: HandOvers
    _candidates: dict[tuple[str, str], asyncio.Future[Candidates]] = field(default_factory=dict)
    _earlier: asyncio.Future[dict[str, dict[str, Message]]] | None = None

    async def candidates(self, environment_id: str, channel: str) -> Candidates:
        """The channel's active integrations in failover order with their breakers (one read per batch)."""
        key = (environment_id, channel)
        read = self._candidates.get(key)
        if read is None:
            read = self._candidates[key] = asyncio.ensure_future(self._read_candidates(environment_id, channel))
        return list(await read)

    async def earlier_messages(self, job_id: str) -> dict[str, Message]:
        """The messages a job stored on earlier attempts, by delivery key (one read for the batch's jobs)."""
        if self._earlier is None:
            self._earlier = asyncio.ensure_future(self._read_earlier())
        return dict((await self._earlier).get(job_id, {}))

    def learned(self, integration: Integration, health: IntegrationHealth | None) -> None:
        """A breaker state this batch wrote: the batch's later steps decide on it rather than on the one read."""
        for read in self._candidates.values():
            if not read.done() or read.exception() is not None:
                continue
            pairs = read.result()
            for index, (known, _) in enumerate(pairs):
                if known.id == integration.id:
                    pairs[index] = (known, health)

    async def _read_candidates(self, environment_id: str, channel: str) -> Candidates:
        async with self.sessionmaker() as session:
            return list(await EngineRepository(session).active_integrations_with_health(environment_id, channel))

    async def _read_earlier(self) -> dict[str, dict[str, Message]]:
        async with self.sessionmaker() as session:
            return await EngineRepository(session).messages_of_jobs([job.id for job in self.jobs])
