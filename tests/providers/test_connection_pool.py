"""The providers' connection pool (providers/connection_pool.py) against a local HTTP/1.1 server that counts its connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpcore
import pytest

from herald.kit.outbound import OutboundPolicy
from herald.providers import connection_pool
from herald.providers.connection_pool import ProviderConnectionPool, connection_pool_class
from herald.providers.http import OutboundTransport


@dataclass
class CountingServer:
    """Answers every GET with 200 "ok" after ``delay`` s; counts connections, and closes each after ``answers_each`` answers."""

    delay: float = 0.0
    answers_each: int | None = None
    opened: int = 0
    open_now: int = 0
    most_open: int = 0
    port: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        self.writers.append(writer)
        answered = 0
        try:
            while self.answers_each is None or answered < self.answers_each:
                try:
                    await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                await asyncio.sleep(self.delay)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
                answered += 1
        finally:
            self.open_now -= 1
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[CountingServer]:
    counting = CountingServer()
    listening = await asyncio.start_server(counting.handle, "127.0.0.1", 0)
    counting.port = listening.sockets[0].getsockname()[1]
    async with listening:
        yield counting
        for writer in counting.writers:
            writer.close()


async def get(pool: httpcore.AsyncConnectionPool, url: str) -> bytes:
    response = await pool.request("GET", url)
    assert response.status == 200
    return response.content


def count_expiry_checks(pool: httpcore.AsyncConnectionPool) -> list[None]:
    """Each ``has_expired`` asked of any of the pool's connections from now on."""
    checks: list[None] = []
    for connection in pool.connections:
        asked = connection.has_expired

        def counted(asked=asked) -> bool:  # type: ignore[no-untyped-def]
            checks.append(None)
            return asked()

        connection.has_expired = counted  # type: ignore[method-assign]
    return checks


def test_the_pool_is_the_one_written_for_the_locked_httpcore() -> None:
    """The override reads httpcore's internals: a new httpcore in the lock must be read again before it serves."""
    assert httpcore.__version__ == connection_pool.WRITTEN_FOR
    assert connection_pool_class() is ProviderConnectionPool


def test_the_providers_transport_uses_it() -> None:
    transport = OutboundTransport(OutboundPolicy())
    assert type(transport._pool) is connection_pool_class()


async def test_a_request_asks_one_idle_connection_whether_it_expired(server: CountingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """httpcore's own pool asks every connection, twice a request (a system call each for an idle one)."""
    monkeypatch.setattr(connection_pool, "SWEEP_SECONDS", 3600.0)
    server.delay = 0.05
    async with ProviderConnectionPool(max_connections=100, max_keepalive_connections=100) as pool:
        assert await asyncio.gather(*(get(pool, server.url) for _ in range(16))) == [b"ok"] * 16
        assert server.opened == 16
        server.delay = 0.0
        checks = count_expiry_checks(pool)
        for _ in range(5):
            assert await get(pool, server.url) == b"ok"
        assert server.opened == 16  # reused
        assert len(checks) <= 5, len(checks)


async def test_an_idle_connection_the_server_closed_is_not_used(server: CountingServer) -> None:
    server.answers_each = 1
    async with ProviderConnectionPool() as pool:
        assert await get(pool, server.url) == b"ok"
        await asyncio.sleep(0.05)  # the server's end of stream reaches the client
        assert await get(pool, server.url) == b"ok"
        assert await get(pool, server.url) == b"ok"
    assert server.opened == 3


async def test_a_connection_past_its_keepalive_expiry_is_replaced(server: CountingServer) -> None:
    async with ProviderConnectionPool(keepalive_expiry=0.05) as pool:
        assert await get(pool, server.url) == b"ok"
        assert await get(pool, server.url) == b"ok"
        assert server.opened == 1
        await asyncio.sleep(0.1)
        assert await get(pool, server.url) == b"ok"
        assert server.opened == 2
        assert len(pool.connections) == 1


async def test_idle_connections_past_max_keepalive_are_closed(server: CountingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection_pool, "SWEEP_SECONDS", 0.0)
    server.delay = 0.05
    async with ProviderConnectionPool(max_connections=100, max_keepalive_connections=4) as pool:
        await asyncio.gather(*(get(pool, server.url) for _ in range(10)))
        server.delay = 0.0
        assert await get(pool, server.url) == b"ok"
        assert len(pool.connections) == 4
        await asyncio.sleep(0.05)
        assert server.open_now == 4


async def test_requests_past_max_connections_wait_for_one(server: CountingServer) -> None:
    server.delay = 0.02
    async with ProviderConnectionPool(max_connections=2) as pool:
        answers = await asyncio.gather(*(get(pool, server.url) for _ in range(9)))
    assert answers == [b"ok"] * 9
    assert (server.opened, server.most_open) == (2, 2)


async def test_a_full_pool_closes_an_idle_connection_to_reach_another_origin(server: CountingServer) -> None:
    other = CountingServer()
    listening = await asyncio.start_server(other.handle, "127.0.0.1", 0)
    other.port = listening.sockets[0].getsockname()[1]
    async with listening, ProviderConnectionPool(max_connections=1) as pool:
        assert await get(pool, server.url) == b"ok"
        assert await get(pool, other.url) == b"ok"
        assert await get(pool, server.url) == b"ok"
        assert (server.opened, other.opened, len(pool.connections)) == (2, 1, 1)
        for writer in other.writers:
            writer.close()
