"""Group commit: concurrent callers' writes share one transaction.

A trigger costs one small insert, but a transaction costs a commit (an fsync
on PostgreSQL, a WAL write on SQLite) and a connection held across several
round trips. Under load, requests arriving while a batch is being written
wait for the next batch instead of each opening a transaction of its own: the
cost of a commit is shared by every caller in the batch, and no caller waits
longer than the batch in front of it and a moment (at most LINGER_SECONDS) for
the callers the last batches say will share its own. With a single caller
there is no batching delay at all.

Each caller still gets its own outcome. A batch whose transaction fails is
written again one caller at a time, so a bad item fails alone and the others
are committed as if they had come alone. Like the request session, the batch
is committed here, at the boundary, never by the use case that fills it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.kit.db import session_scope

logger = logging.getLogger("herald.groupcommit")

# Passes of the event loop the writer waits at most for more callers (see _gather).
GATHER_PASSES = 8
# How long the writer waits at most for the callers it expects (see _linger): never
# longer than its last write took, and never longer than this.
LINGER_SECONDS = 0.002
# The batches whose sizes say how many callers to expect.
RECENT_BATCHES = 8
# After a wait that ended without them, this many batches are written without waiting.
REST_AFTER_MISS = 8

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")

# ``write`` answers one outcome per item, in order; an exception in the list is
# that item's failure (raised to its caller) and does not undo the others.
WriteBatch = Callable[[AsyncSession, Sequence[Item]], Awaitable[Sequence[Outcome | BaseException]]]


class GroupCommit(Generic[Item, Outcome]):
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        write: WriteBatch[Item, Outcome],
        *,
        max_batch: int = 256,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._write = write
        self._max_batch = max_batch
        self._pending: list[tuple[Item, asyncio.Future[Outcome]]] = []
        self._writer: asyncio.Task[None] | None = None
        # What _linger goes by: the sizes of the last batches, how long the last
        # write took, the batches left to write without waiting, and the caller
        # count that ends the current wait (with the future it settles).
        self._recent_sizes: list[int] = []
        self._last_write_seconds = 0.0
        self._resting = 0
        self._expected = 0
        self._enough: asyncio.Future[None] | None = None

    async def submit(self, item: Item) -> Outcome:
        """Write ``item`` in the next batch; returns its outcome once the batch is committed."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain())
        elif self._enough is not None and len(self._pending) >= self._expected and not self._enough.done():
            self._enough.set_result(None)
        # The write goes on if the caller goes away: it was accepted into a batch.
        return await asyncio.shield(future)

    async def _drain(self) -> None:
        batch: list[tuple[Item, asyncio.Future[Outcome]]] = []
        try:
            while self._pending:
                await self._gather()
                await self._linger()
                batch, self._pending = self._pending[: self._max_batch], self._pending[self._max_batch :]
                self._recent_sizes = [*self._recent_sizes[1 - RECENT_BATCHES :], len(batch)]
                # perf_counter, not the loop's clock: uvloop's counts whole milliseconds.
                started = time.perf_counter()
                await self._write_batch(batch)
                self._last_write_seconds = time.perf_counter() - started
        except BaseException as exc:  # cancelled (shutdown): nobody may be left waiting
            for _, future in batch + self._pending:
                _settle(future, RuntimeError(f"the write was interrupted: {exc!r}"))
            self._pending = []
            raise

    async def _gather(self) -> None:
        """Let the requests the event loop already has in hand join the batch about to be written.

        The writer starts with the first caller, while other requests that
        arrived with it are still being read and parsed. Each pass of the loop
        lets those reach ``submit``; the wait ends at the first pass that brings
        nobody new (at once for a caller alone). Over HTTP at 32 concurrent
        clients this took batches from about 11 triggers to about 30, each
        batch's transaction shared three times as widely.

        Every batch gathers, not only the first. The requests read while a
        batch was written (on SQLite the write holds the event loop) reach
        ``submit`` over the passes after it; a batch taken at once held only
        those queued during the write, and the rest made a small batch of their
        own. Batches alternated between a few triggers and twenty (11.7 on
        average at 32 clients over HTTP, 26.9 gathering every batch), and
        SQLite trigger acceptance at 32 clients went from 38-50% of the
        framework's ceiling to 58-63%.
        """
        for _ in range(GATHER_PASSES):
            waiting = len(self._pending)
            await asyncio.sleep(0)
            if len(self._pending) == waiting:
                return

    async def _linger(self) -> None:
        """Wait a moment for the callers the last batches say are coming, so that they share one write.

        Callers that wait on their answers before they send again (a client
        whose next request follows the last one's answer) fall into two
        groups: those answered by the write just made, and the few that
        reached ``submit`` during it. Written at once, the few made a batch of
        their own, and the many, back a moment later, waited for that write
        before theirs: batches alternated between a few callers and nearly
        all, and every caller waited for two writes. At 32 clients over HTTP
        on PostgreSQL a third of the batches held one to three triggers, while
        the write took 2.7 ms whatever its size.

        So when the last batches were bigger than what is in hand, the writer
        waits until as many are in hand, for at most as long as its last
        write took (it waits only where a write is worth saving) and
        LINGER_SECONDS. A caller alone, or a steady trickle, is written at
        once: the last batches were no bigger. A wait that ends without them
        (the clients are slower to come back than a write, or fewer than
        before) is not tried again for REST_AFTER_MISS batches, so what such
        waits cost stays a small share; and the sizes expected come from the
        last RECENT_BATCHES batches only, so a load that falls is followed.
        """
        expected = min(max(self._recent_sizes, default=0), self._max_batch)
        if len(self._pending) >= expected:
            return
        if self._resting:
            self._resting -= 1
            return
        timeout = min(self._last_write_seconds, LINGER_SECONDS)
        loop = asyncio.get_running_loop()
        self._expected, self._enough = expected, loop.create_future()
        timer = loop.call_later(timeout, _settle, self._enough, None)
        try:
            await self._enough
        finally:
            timer.cancel()
            self._enough = None
        if len(self._pending) < expected:
            self._resting = REST_AFTER_MISS

    async def _write_batch(self, batch: list[tuple[Item, asyncio.Future[Outcome]]]) -> None:
        try:
            await self._commit(batch)
        except Exception as exc:  # noqa: BLE001 - reported to each caller, then retried alone
            if len(batch) == 1:
                _settle(batch[0][1], exc)
                return
            logger.warning("a batch of %d writes failed (%s); writing them one by one", len(batch), exc)
            for entry in batch:
                try:
                    await self._commit([entry])
                except Exception as single:  # noqa: BLE001
                    _settle(entry[1], single)

    async def _commit(self, batch: list[tuple[Item, asyncio.Future[Outcome]]]) -> None:
        async for session in session_scope(self._sessionmaker):
            outcomes = await self._write(session, [item for item, _ in batch])
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            _settle(future, outcome)


def _settle(future: asyncio.Future, outcome: object) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
