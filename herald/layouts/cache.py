"""The layouts the email step reads, cached per environment.

An email step needs its environment's layouts (the one its template names, or
the default) for every message. Reading them from the store each time would add
a query to every email, most often to learn that the environment has none. So
each process keeps a snapshot of an environment's layouts, loaded by one query
(concurrent steps of the same environment share that load) and kept for
``CACHE_SECONDS``.

Across processes: a layout written through the API of this process drops the
snapshot at once, and again once the write is committed (so a load that began
before the commit is not kept). A worker in another process sees the change
when its snapshot expires: within ``CACHE_SECONDS`` of the write. An email sent
in that window goes with the layout as it was (or without a layout just made),
never with a half-written one: the snapshot is always one committed state.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.layouts.repository import LayoutRepository

CACHE_SECONDS = 5.0
"""How long a process trusts its snapshot of an environment's layouts (the delay after which a
change made through another process reaches this one's emails)."""
MAX_ENVIRONMENTS = 4096
"""Snapshots kept per process; the least recently used goes first."""


@dataclass(frozen=True, slots=True)
class CachedLayout:
    id: str
    identifier: str
    name: str
    content: str
    editor_type: str


@dataclass(frozen=True, slots=True)
class EnvironmentLayouts:
    """One committed state of an environment's layouts."""

    by_identifier: dict[str, CachedLayout] = field(default_factory=dict)
    by_id: dict[str, CachedLayout] = field(default_factory=dict)
    default: CachedLayout | None = None

    def find(self, key: str) -> CachedLayout | None:
        """The layout named by identifier (Novu's layoutId) or by internal id."""
        return self.by_identifier.get(key) or self.by_id.get(key)


NO_LAYOUTS = EnvironmentLayouts()


class LayoutCache:
    def __init__(self, ttl_seconds: float = CACHE_SECONDS, max_environments: int = MAX_ENVIRONMENTS) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_environments = max_environments
        self._entries: OrderedDict[str, tuple[float, EnvironmentLayouts]] = OrderedDict()
        self._loading: dict[str, asyncio.Future[EnvironmentLayouts]] = {}
        # Bumped by each invalidation: a load that began before it is not kept.
        self._generation: dict[str, int] = {}

    async def get(self, sessionmaker: async_sessionmaker[AsyncSession], environment_id: str) -> EnvironmentLayouts:
        entry = self._entries.get(environment_id)
        if entry is not None and time.monotonic() - entry[0] < self.ttl_seconds:
            self._entries.move_to_end(environment_id)
            return entry[1]
        pending = self._loading.get(environment_id)
        if pending is not None and pending.get_loop() is asyncio.get_running_loop():
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this step itself was cancelled
                # The step that was loading was cancelled: load here instead.
        future: asyncio.Future[EnvironmentLayouts] = asyncio.get_running_loop().create_future()
        self._loading[environment_id] = future
        generation = self._generation.get(environment_id, 0)
        try:
            loaded = await self._load(sessionmaker, environment_id)
        except BaseException as exc:
            if self._loading.get(environment_id) is future:
                del self._loading[environment_id]
            if isinstance(exc, Exception):
                future.set_exception(exc)
                future.exception()  # retrieved: waiters re-raise it, no "never retrieved" warning
            else:
                future.cancel()  # waiters load for themselves
            raise
        if self._loading.get(environment_id) is future:
            del self._loading[environment_id]
        if self._generation.get(environment_id, 0) == generation:
            self._entries[environment_id] = (time.monotonic(), loaded)
            self._entries.move_to_end(environment_id)
            while len(self._entries) > self.max_environments:
                self._entries.popitem(last=False)
        future.set_result(loaded)
        return loaded

    def invalidate(self, environment_id: str) -> None:
        self._entries.pop(environment_id, None)
        self._loading.pop(environment_id, None)
        self._generation[environment_id] = self._generation.get(environment_id, 0) + 1
        if len(self._generation) > self.max_environments:
            # Only a load under way compares generations: old counters can go.
            self._generation = {environment_id: self._generation[environment_id]}

    def invalidate_after_commit(self, session: AsyncSession, environment_id: str) -> None:
        """Drop the snapshot now and once ``session`` commits (a load between the two would keep the old state)."""
        self.invalidate(environment_id)
        event.listen(session.sync_session, "after_commit", lambda _session: self.invalidate(environment_id), once=True)

    @staticmethod
    async def _load(sessionmaker: async_sessionmaker[AsyncSession], environment_id: str) -> EnvironmentLayouts:
        async with sessionmaker() as session:
            rows = await LayoutRepository(session).all_of(environment_id)
        if not rows:
            return NO_LAYOUTS
        layouts = [CachedLayout(row.id, row.identifier, row.name, row.content, row.editor_type) for row in rows]
        default_id = next((row.id for row in rows if row.is_default), None)
        by_id = {layout.id: layout for layout in layouts}
        return EnvironmentLayouts(
            by_identifier={layout.identifier: layout for layout in layouts},
            by_id=by_id,
            default=by_id.get(default_id) if default_id else None,
        )


layout_cache = LayoutCache()
"""The process's cache: the API's writes and the worker's email steps share it."""
