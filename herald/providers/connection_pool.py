"""The providers' connection pool: httpcore's, with its bookkeeping done in linear time.

httpcore's pool runs ``_assign_requests_to_connections`` twice a request (when
it is queued and when its answer is closed). In httpcore 1.0.9 each run asks
every connection whether it has expired, which for an idle one is a system
call (is its socket readable?), and its surplus-idle check builds a list of
every connection once per idle connection: quadratic in the pool's size. A
worker sending through one HTTP provider keeps as many connections as it has
sends in flight (24 by default), and that bookkeeping took about a sixth of
the worker's CPU (``python -m bench.email``, SendGrid's API).

:class:`ProviderConnectionPool` keeps httpcore's connections, HTTP/1.1 and
HTTP/2, TLS, queueing and limits, and replaces only that method:

- a queued request takes the first available connection for its origin, and
  that connection alone is asked whether it has expired (a server that closed
  an idle connection is noticed there, as before);
- the sweep of every connection (closed, expired, surplus idle) runs when a
  request finds no connection, and otherwise at most every
  :data:`SWEEP_SECONDS`, so an expired connection is closed a little later
  than httpcore would, never used;
- surplus idle means more idle connections than ``max_keepalive_connections``,
  which is what httpcore's check means to say (it counts every connection).

The override is tied to the httpcore version it was written against
(:data:`WRITTEN_FOR`); under any other version the library's own pool serves,
unchanged, and tests/providers/test_connection_pool.py fails so that the
lock's move is looked at.
"""

from __future__ import annotations

import time

import httpcore
from httpcore._async.interfaces import AsyncConnectionInterface

WRITTEN_FOR = "1.0.9"
# How often, at most, every connection is checked when requests find connections.
SWEEP_SECONDS = 0.5


class ProviderConnectionPool(httpcore.AsyncConnectionPool):
    """httpcore's pool with linear-time request assignment (module docstring)."""

    _next_sweep = 0.0

    def _assign_requests_to_connections(self) -> list[AsyncConnectionInterface]:
        closing: list[AsyncConnectionInterface] = []
        if time.monotonic() >= self._next_sweep:
            closing.extend(self._sweep())
        for pool_request in [request for request in self._requests if request.is_queued()]:
            origin = pool_request.request.url.origin
            connection = self._available(origin, closing)
            if connection is None:
                # No connection for it: make room first, as httpcore does on every call.
                closing.extend(self._sweep())
                connection = self._available(origin, closing)
            if connection is None:
                if len(self._connections) >= self._max_connections:
                    idle = next((c for c in self._connections if c.is_idle()), None)
                    if idle is None:
                        continue  # stays queued until a connection is released
                    self._connections.remove(idle)
                    closing.append(idle)
                connection = self.create_connection(origin)
                self._connections.append(connection)
            pool_request.assign_to_connection(connection)
        return closing

    def _available(self, origin: httpcore.Origin, closing: list[AsyncConnectionInterface]) -> AsyncConnectionInterface | None:
        """The first connection able to take a request to ``origin`` now; an expired one met on the way is closed."""
        for connection in list(self._connections):
            if not (connection.can_handle_request(origin) and connection.is_available()):
                continue
            if connection.is_closed():
                self._connections.remove(connection)
            elif connection.has_expired():
                self._connections.remove(connection)
                closing.append(connection)
            else:
                return connection
        return None

    def _sweep(self) -> list[AsyncConnectionInterface]:
        """Drop closed connections; return the expired and the surplus idle ones, removed from the pool."""
        self._next_sweep = time.monotonic() + SWEEP_SECONDS
        closing: list[AsyncConnectionInterface] = []
        kept: list[AsyncConnectionInterface] = []
        for connection in self._connections:
            if connection.is_closed():
                continue
            if connection.has_expired():
                closing.append(connection)
            else:
                kept.append(connection)
        surplus = sum(1 for connection in kept if connection.is_idle()) - self._max_keepalive_connections
        if surplus > 0:
            for connection in [c for c in kept if c.is_idle()][:surplus]:
                kept.remove(connection)
                closing.append(connection)
        self._connections[:] = kept
        return closing


def connection_pool_class() -> type[httpcore.AsyncConnectionPool]:
    """:class:`ProviderConnectionPool` under the httpcore it was written for, httpcore's own pool otherwise."""
    return ProviderConnectionPool if httpcore.__version__ == WRITTEN_FOR else httpcore.AsyncConnectionPool
