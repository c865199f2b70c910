"""httpcore's network backend over asyncio's own streams, for the providers' client.

httpcore ships backends for anyio and trio only; on asyncio it goes through
anyio, whose stream wrappers cost a provider request more than the rest of
httpcore's work on it: every request asks the connection whether it is still
usable, which anyio answers by building a dict of its socket's attributes,
and every read and write passes anyio's cancel scopes. Sending through an HTTP
provider (``python -m bench.email``), anyio took about a sixth of a worker's
CPU. This backend is the same contract written on ``asyncio.StreamReader`` and
``StreamWriter`` (and their ``start_tls``), with httpcore's exception types,
so the connection pool, HTTP/1.1, HTTP/2 and TLS stay httpcore's. The
outbound policy's check stays in front of it (kit/outbound.py).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import typing
from collections.abc import Iterable

import httpcore
from httpcore._utils import is_socket_readable

_READ_ERRORS = (OSError, ssl.SSLError, EOFError)
# Writes up to this size wait for the next write or read (see AsyncioStream.write).
_HOLD_BYTES = 16 * 1024


class AsyncioStream(httpcore.AsyncNetworkStream):
    """A connected TCP stream (TLS once ``start_tls`` ran)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._held = b""
        # HTTP/1.1 only: an HTTP/2 connection's streams write and read from several tasks.
        self._hold_writes = True

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._held:
            await self._send(b"", timeout)
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(f"no data within {timeout} s") from exc
        except _READ_ERRORS as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Write ``buffer``; a small one waits for what comes next, so a request goes out in one send.

        httpcore writes an HTTP/1.1 request's head and its body separately:
        two system calls, each running the loopback's or the NIC's path (and
        for TLS two records). A small write is held until the next write or
        read, so head and body leave together; nothing is held past a read,
        since a request is always written before its answer is read.
        """
        if not buffer:
            return
        if self._hold_writes and not self._held and len(buffer) <= _HOLD_BYTES:
            self._held = bytes(buffer)
            return
        await self._send(buffer, timeout)

    async def _send(self, buffer: bytes, timeout: float | None) -> None:
        if self._held:
            buffer, self._held = self._held + buffer, b""
        try:
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(f"could not write within {timeout} s") from exc
        except _READ_ERRORS as exc:
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        # Closing does not wait for the peer: a pool closing idle connections must not hang on one.
        if self._held:
            self._writer.write(self._held)
            self._held = b""
        self._writer.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            self._writer.close()
            raise httpcore.ConnectTimeout(f"TLS handshake took longer than {timeout} s") from exc
        except _READ_ERRORS as exc:
            self._writer.close()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        ssl_object = self._writer.get_extra_info("ssl_object")
        self._hold_writes = ssl_object is None or ssl_object.selected_alpn_protocol() != "h2"
        return self

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":
            # An idle connection the server closed reads as readable (its end of stream waits there).
            if self._writer.is_closing() or self._reader.at_eof():
                return True
            sock = self._writer.get_extra_info("socket")
            return sock is not None and is_socket_readable(sock)
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Connects with ``asyncio.open_connection`` (TCP_NODELAY set, as asyncio does for TCP)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=(local_address, 0) if local_address else None
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"no connection to {host}:{port} within {timeout} s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        sock = writer.get_extra_info("socket")
        if sock is not None:
            for option in socket_options or ():
                sock.setsockopt(*option)  # type: ignore[arg-type]
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("Unix sockets are not used")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
