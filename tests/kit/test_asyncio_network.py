"""httpcore over asyncio's streams (kit/asyncio_network.py): keep-alive, a closed idle connection, timeouts, refusals."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpcore
import httpx
import pytest

from herald.kit.asyncio_network import AsyncioBackend

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], object]


async def serve(handler: Handler) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)  # type: ignore[arg-type]
    return server, server.sockets[0].getsockname()[1]


def client(**pool: object) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport()
    transport._pool = httpcore.AsyncConnectionPool(network_backend=AsyncioBackend(), **pool)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(2.0, read=0.3))


async def read_request(reader: asyncio.StreamReader) -> bool:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0)
    if length:
        await reader.readexactly(length)
    return True


async def test_requests_reuse_the_connection_and_a_closed_idle_one_is_replaced() -> None:
    """Keep-alive works, and a connection the server closed while idle is noticed before it is used again."""
    accepted: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        answered = 0
        while answered < 2:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                break
            writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
            answered += 1
        writer.close()  # after two requests the server closes the connection while the client keeps it idle

    server, port = await serve(handler)
    async with server, client() as http:
        statuses = []
        for _ in range(5):
            response = await http.post(f"http://127.0.0.1:{port}/send", content=b"hello")
            statuses.append((response.status_code, response.text))
            await asyncio.sleep(0.05)
    assert statuses == [(202, "ok")] * 5
    assert len(accepted) == 3  # two requests a connection: reused, and replaced once closed


async def test_a_server_that_does_not_answer_is_a_read_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    server, port = await serve(handler)
    async with server, client() as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(f"http://127.0.0.1:{port}/slow")


async def test_a_refused_connection_is_a_connect_error() -> None:
    server, port = await serve(lambda reader, writer: None)
    server.close()
    await server.wait_closed()
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{port}/")


async def test_a_server_that_closes_without_answering_is_a_protocol_error_not_a_hang() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.close()

    server, port = await serve(handler)
    async with server, client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(f"http://127.0.0.1:{port}/")


async def test_heads_bodies_and_large_bodies_all_arrive_whole() -> None:
    """A request's small writes are held until the next write or the read of the answer: none is left behind."""
    received: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0)
            received.append(head.split(b"\r\n")[0] + b" " + (await reader.readexactly(length) if length else b""))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
        writer.close()

    large = b"x" * 100_000
    server, port = await serve(handler)
    async with server, client() as http:
        assert (await http.get(f"http://127.0.0.1:{port}/no-body")).status_code == 200
        assert (await http.post(f"http://127.0.0.1:{port}/small", content=b"hello")).status_code == 200
        assert (await http.post(f"http://127.0.0.1:{port}/large", content=large)).status_code == 200
    assert received == [b"GET /no-body HTTP/1.1 ", b"POST /small HTTP/1.1 hello", b"POST /large HTTP/1.1 " + large]
