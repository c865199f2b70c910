"""This process's listeners to "the activity of environment E changed" (herald.realtime.signals).

The console's live pages (herald/console/sse.py) wait here for their
environment. On SQLite the changes come from this process's own commits
(signals.deliver_activity_on_commit); on PostgreSQL every process's commits
reach every API process through ``LISTEN herald_activity``
(:meth:`ActivityHub.listen`), so a run stored by a worker on another machine
shows up too.

A listener is a counter it compares, not a queue: changes that come faster
than a page fetches its fresh rows fold into one wake-up, and a slow or gone
page holds no growing backlog.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from herald.kit.db import listen_until
from herald.realtime.signals import ACTIVITY_CHANNEL

# Environment ids are ObjectIds: a payload that is not one is no environment of ours.
MAX_PAYLOAD = 64


class ActivityWatch:
    """One listener's view of one environment: :meth:`wait` returns once it changed since the last wait."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def ring(self) -> None:
        self._changed.set()

    async def wait(self, timeout: float) -> bool:
        """True when the environment's activity changed within ``timeout`` seconds (since the last call)."""
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            return False
        self._changed.clear()
        return True


class ActivityHub:
    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self._watches: dict[str, set[ActivityWatch]] = {}

    @asynccontextmanager
    async def watch(self, environment_id: str) -> AsyncIterator[ActivityWatch]:
        watch = ActivityWatch()
        self._watches.setdefault(environment_id, set()).add(watch)
        try:
            yield watch
        finally:
            watches = self._watches.get(environment_id)
            if watches is not None:
                watches.discard(watch)
                if not watches:
                    del self._watches[environment_id]

    def deliver(self, environment_ids: Iterable[str]) -> None:
        for environment_id in environment_ids:
            for watch in self._watches.get(environment_id, ()):
                watch.ring()

    def heard(self, payload: str) -> None:
        if len(payload) <= MAX_PAYLOAD:
            self.deliver((payload,))

    async def listen(self, stop: asyncio.Event) -> None:
        """LISTEN for every process's announcements until ``stop`` (PostgreSQL)."""
        await listen_until(self.database_url, ACTIVITY_CHANNEL, self.heard, stop, what="activity")
