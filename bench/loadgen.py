"""The load generator: asyncio HTTP/1.1 clients, closed- and open-loop drivers, latency statistics.

Two clients send the measured requests:

- ``raw`` (default): keep-alive connections on asyncio streams, writing
  pre-built request bytes and reading the status line, headers and
  ``Content-Length`` body. It costs a small fraction of the CPU httpx needs per
  request, which matters when the load generator shares the machine's cores
  with the server: with httpx the client, not the server, sets the ceiling.
- ``httpx``: one ``httpx.AsyncClient`` with a connection pool sized to the
  concurrency, for comparison.

Everything else the harness sends (setup, polling) goes through httpx
(:class:`Api`). Every loop here ends by a deadline or a count.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from herald.kit.pagination import count_bound

CLIENTS = ("raw", "httpx")
REQUEST_TIMEOUT = 30.0
# Error answers kept as examples for the report: enough to say what went wrong.
ERROR_SAMPLES = 3


# Statistics ----------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return None
    rank = max(1, int(round(fraction * len(sorted_values) + 0.5)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass
class LoadResult:
    """What a closed- or open-loop run measured."""

    duration: float = 0.0
    ok: int = 0
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    client_cpu_seconds: float = 0.0
    # Every 2xx answer, warm-up and the requests still running at the end included
    # (each is work the service accepted and will do).
    accepted_total: int = 0
    error_samples: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.ok / self.duration if self.duration else 0.0

    def p(self, fraction: float) -> float | None:
        return percentile(sorted(self.latencies), fraction)

    def record(self, status: int, latency: float, body: bytes | None = None) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if 200 <= status < 300:
            self.ok += 1
            self.latencies.append(latency)
        else:
            self.errors += 1
            if len(self.error_samples) < ERROR_SAMPLES:
                self.error_samples.append(f"{status}: {(body or b'')[:200]!r}")

    def record_failure(self, exc: BaseException) -> None:
        self.errors += 1
        if len(self.error_samples) < ERROR_SAMPLES:
            self.error_samples.append(f"{type(exc).__name__}: {exc}")


def combine(results: Sequence[LoadResult]) -> LoadResult:
    """Measurements of the same load taken in turns, as one: their counts and seconds added, latencies pooled.

    The rate is then the requests of every turn over the seconds of every
    turn, not a mean of the turns' rates, which would weigh a short slow turn
    like a long fast one.
    """
    total = LoadResult()
    for result in results:
        total.duration += result.duration
        total.ok += result.ok
        total.errors += result.errors
        for status, count in result.statuses.items():
            total.statuses[status] = total.statuses.get(status, 0) + count
        total.latencies.extend(result.latencies)
        total.client_cpu_seconds += result.client_cpu_seconds
        total.accepted_total += result.accepted_total
        total.error_samples.extend(result.error_samples[: ERROR_SAMPLES - len(total.error_samples)])
    return total


# Clients -------------------------------------------------------------------------------


class RawConnection:
    """One keep-alive HTTP/1.1 connection; requests on it are sent one after the other."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = time.monotonic()
        # Taken from the idle pool (not new), and whether the current answer has begun.
        self.reused = False
        self.answered_bytes = False

    @classmethod
    async def open(cls, host: str, port: int) -> RawConnection:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), REQUEST_TIMEOUT)
        return cls(reader, writer)

    async def request(self, data: bytes) -> tuple[int, bytes]:
        self.answered_bytes = False
        self.writer.write(data)
        return await asyncio.wait_for(self._response(), REQUEST_TIMEOUT)

    async def _response(self) -> tuple[int, bytes]:
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        self.answered_bytes = True
        status = int(status_line.split(b" ", 2)[1])
        length = 0
        chunked = False
        close = False
        for _ in range(200):  # a response has far fewer headers
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value.strip())
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            elif name == b"connection" and b"close" in value.lower():
                close = True
        if chunked:
            body = await self._chunked_body()
        else:
            body = await self.reader.readexactly(length) if length else b""
        if close:
            self.close()
        return status, body

    async def _chunked_body(self) -> bytes:
        parts = []
        for _ in range(100_000):
            size = int((await self.reader.readline()).split(b";")[0].strip(), 16)
            if size == 0:
                await self.reader.readline()
                break
            parts.append(await self.reader.readexactly(size))
            await self.reader.readline()
        return b"".join(parts)

    @property
    def closed(self) -> bool:
        return self.writer.is_closing()

    def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()


# The server closes a keep-alive connection idle for 5 s (uvicorn's default):
# older idle connections are not reused. httpx's own expiry is also 5 s, so a
# connection the server was closing at that moment could be taken for the next
# request, which then failed with ReadError: a few in 20,000 POSTs from 32
# clients, enough to end a full run while it created the fan-out's 100,000
# subscribers. Both clients drop idle connections at IDLE_REUSE_SECONDS.
IDLE_REUSE_SECONDS = 4.0


class RawPool:
    """Connections handed out one request at a time; a broken one is replaced.

    A request on a reused connection that the server closed meanwhile (it
    answers nothing) is sent again once on a new connection: the server never
    read it, so this is no retry of work it did.
    """

    def __init__(self, base_url: str, max_connections: int) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.max_connections = max_connections
        self._idle: list[RawConnection] = []
        self._open = 0
        self._available = asyncio.Condition()

    def build(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def _acquire(self) -> RawConnection:
        async with self._available:
            await asyncio.wait_for(
                self._available.wait_for(lambda: bool(self._idle) or self._open < self.max_connections),
                REQUEST_TIMEOUT,
            )
            while self._idle:
                connection = self._idle.pop()
                if time.monotonic() - connection.idle_since < IDLE_REUSE_SECONDS and not connection.closed:
                    connection.reused = True
                    return connection
                connection.close()
                self._open -= 1
            self._open += 1
        try:
            return await RawConnection.open(self.host, self.port)
        except BaseException:
            async with self._available:
                self._open -= 1
                self._available.notify()
            raise

    async def _release(self, connection: RawConnection, broken: bool) -> None:
        async with self._available:
            if broken or connection.closed:
                connection.close()
                self._open -= 1
            else:
                connection.idle_since = time.monotonic()
                self._idle.append(connection)
            self._available.notify()

    async def request(self, data: bytes) -> tuple[int, bytes]:
        for _ in range(2):
            connection = await self._acquire()
            broken = True
            try:
                result = await connection.request(data)
                broken = False
                return result
            except ConnectionError:
                if not connection.reused or connection.answered_bytes:
                    raise
            finally:
                await self._release(connection, broken)
        raise ConnectionError("the server closed two connections in a row")

    async def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()


class Sender:
    """Sends POSTs of JSON bodies with the chosen client; ``send`` answers (status, body)."""

    def __init__(self, kind: str, base_url: str, api_key: str | None, max_connections: int) -> None:
        self.kind = kind
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"ApiKey {api_key}"
        if kind == "raw":
            self.pool: RawPool | None = RawPool(base_url, max_connections)
            self.client: httpx.AsyncClient | None = None
        else:
            self.pool = None
            limits = httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=IDLE_REUSE_SECONDS,  # see IDLE_REUSE_SECONDS
            )
            self.client = httpx.AsyncClient(base_url=base_url, limits=limits, timeout=REQUEST_TIMEOUT, headers=self.headers)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.pool is not None:
            return await self.pool.request(self.pool.build("POST", path, self.headers, body))
        assert self.client is not None
        response = await self.client.post(path, content=body)
        return response.status_code, response.content

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        if self.client is not None:
            await self.client.aclose()


# Drivers ---------------------------------------------------------------------------------


BodyFactory = Callable[[int], bytes]


async def closed_loop(
    sender: Sender, path: str, make_body: BodyFactory, concurrency: int, duration: float, warmup: float
) -> LoadResult:
    """``concurrency`` clients each send, wait for the answer, send again, for ``warmup`` + ``duration`` s.

    Answers that arrive during the warm-up are not counted.
    """
    result = LoadResult()
    counter = iter(range(10**9))
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + duration

    async def client() -> None:
        for _ in range(10**7):
            if time.perf_counter() >= stop_at:
                return
            body = make_body(next(counter))
            sent = time.perf_counter()
            try:
                status, answer = await sender.post(path, body)
            except (TimeoutError, OSError, ConnectionError, httpx.HTTPError, ValueError) as exc:
                if sent >= measure_from:
                    result.record_failure(exc)
                await asyncio.sleep(0.01)
                continue
            done = time.perf_counter()
            if 200 <= status < 300:
                result.accepted_total += 1
            if sent >= measure_from and done <= stop_at:
                result.record(status, done - sent, answer)

    cpu_before = time.process_time()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    result.client_cpu_seconds = time.process_time() - cpu_before
    result.duration = duration
    return result


async def open_loop(
    sender: Sender,
    path: str,
    make_body: BodyFactory,
    rate: float,
    duration: float,
    on_answer: Callable[[int, float, int, bytes], None] | None = None,
) -> LoadResult:
    """Send ``rate`` requests per second on a fixed schedule for ``duration`` s, whatever the answers.

    Latency counts from the scheduled send time, so a server that falls behind
    shows it (no coordinated omission). ``on_answer(index, scheduled, status, body)``
    sees every answer.
    """
    result = LoadResult()
    total = int(rate * duration)
    start = time.perf_counter() + 0.05
    tasks: list[asyncio.Task[None]] = []

    async def one(index: int, scheduled: float) -> None:
        try:
            status, answer = await sender.post(path, make_body(index))
        except (TimeoutError, OSError, ConnectionError, httpx.HTTPError, ValueError) as exc:
            result.record_failure(exc)
            return
        result.record(status, time.perf_counter() - scheduled, answer)
        if 200 <= status < 300:
            result.accepted_total += 1
        if on_answer is not None:
            on_answer(index, scheduled, status, answer)

    cpu_before = time.process_time()
    for index in range(total):
        scheduled = start + index / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(index, scheduled)))
    await asyncio.wait(tasks, timeout=REQUEST_TIMEOUT + 5)
    result.client_cpu_seconds = time.process_time() - cpu_before
    result.duration = duration
    return result


# The API, for setup and polling ------------------------------------------------------------


# Messages a page when counting them (count_messages).
PAGE = 100


class Api:
    """Herald's REST API through httpx: what the scenarios set up and poll."""

    def __init__(self, base_url: str, api_key: str, max_connections: int = 64) -> None:
        self._counted: dict[str, int] = {}  # the last count of each channel's messages (count_messages)
        limits = httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=IDLE_REUSE_SECONDS,  # see IDLE_REUSE_SECONDS
        )
        self.client = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"ApiKey {api_key}"},
            timeout=REQUEST_TIMEOUT * 2,
            limits=limits,
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self.client.request(method, path, **kwargs)
        if response.status_code >= 300:
            raise RuntimeError(f"{method} {path} answered {response.status_code}: {response.text[:500]}")
        return response.json() if response.content else None

    async def create_workflow(self, name: str, steps: list[dict[str, Any]]) -> str:
        body = await self._call("POST", "/v1/workflows", json={"name": name, "active": True, "steps": steps})
        return str(body["data"]["triggers"][0]["identifier"])

    async def create_subscribers(self, subscriber_ids: Sequence[str], concurrency: int, deadline: float, batch: int = 500) -> None:
        """Upsert subscribers through ``POST /v1/subscribers/bulk``, ``batch`` a request, ``concurrency`` requests at a time."""
        queue = [list(subscriber_ids[start : start + batch]) for start in range(0, len(subscriber_ids), batch)]

        async def client() -> None:
            while queue:
                if time.monotonic() > deadline:
                    raise TimeoutError("creating subscribers took too long")
                chunk = queue.pop()
                body = await self._call("POST", "/v1/subscribers/bulk", json={"subscribers": [{"subscriberId": s} for s in chunk]})
                outcome = body["data"]
                if outcome["failed"] or len(outcome["created"]) + len(outcome["updated"]) != len(chunk):
                    raise RuntimeError(f"POST /v1/subscribers/bulk did not take every subscriber: {outcome['failed'][:3]}")

        await asyncio.gather(*(client() for _ in range(concurrency)))

    async def create_topic(self, key: str, subscriber_ids: Sequence[str], batch: int = 2000) -> None:
        """The topic and its members, added ``batch`` at a time (the body limit is 100 KB)."""
        await self._call("POST", "/v1/topics", json={"key": key, "name": key})
        for start in range(0, len(subscriber_ids), batch):
            chunk = list(subscriber_ids[start : start + batch])
            answer = await self._call("POST", f"/v1/topics/{key}/subscribers", json={"subscribers": chunk})
            missing = ((answer or {}).get("data") or {}).get("failed", {}).get("notFound") or []
            if missing:
                raise RuntimeError(f"topic {key}: {len(missing)} subscribers not found, e.g. {missing[:3]}")

    async def trigger(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self._call("POST", "/v1/events/trigger", json=body)
        data = answer["data"]
        if data.get("status") != "processed":
            raise RuntimeError(f"trigger not processed: {data}")
        return dict(data)

    async def trigger_bulk(self, events: list[dict[str, Any]]) -> int:
        answer = await self._call("POST", "/v1/events/trigger/bulk", json={"events": events})
        return sum(1 for item in answer["data"] if item.get("status") == "processed")

    async def count_messages(self, transaction_id: str | None = None, channel: str = "in_app") -> int:
        """How many messages are stored, exactly.

        A transaction's messages are counted whole. The environment's are counted
        no further than COUNT_AHEAD past the page asked for (herald/kit/pagination.py),
        so the count asks for the page at the last count it saw, and again from
        there while the answer reaches the bound.
        """
        params: dict[str, Any] = {"channel": channel, "limit": PAGE}
        if transaction_id is not None:
            params["transactionId"] = transaction_id
            return int((await self._call("GET", "/v1/messages", params=params))["totalCount"])
        while True:
            page = self._counted.get(channel, 0) // PAGE
            total = int((await self._call("GET", "/v1/messages", params={**params, "page": page}))["totalCount"])
            self._counted[channel] = total
            if total < count_bound(page * PAGE, PAGE):
                return total

    async def newest_message_at(self, transaction_id: str, channel: str = "in_app") -> float | None:
        """When the transaction's newest message was stored (its ``createdAt``, seconds since the epoch)."""
        answer = await self._call("GET", "/v1/messages", params={"channel": channel, "limit": 1, "transactionId": transaction_id})
        if not answer["data"]:
            return None
        return datetime.fromisoformat(answer["data"][0]["createdAt"].replace("Z", "+00:00")).timestamp()

    async def messages_of(self, transaction_ids: Sequence[str], channel: str = "in_app") -> list[dict[str, Any]]:
        """In-app messages of up to 100 transactions (one per transaction in these scenarios)."""
        params = [("channel", channel), ("limit", "100"), *[("transactionId", tid) for tid in transaction_ids]]
        answer = await self._call("GET", "/v1/messages", params=params)
        return list(answer["data"])

    async def feed(self, subscriber_id: str, limit: int = 10) -> dict[str, Any] | None:
        """The subscriber's in-app feed; None while the subscriber does not exist yet."""
        response = await self.client.get(f"/v1/subscribers/{subscriber_id}/notifications/feed", params={"limit": limit})
        if response.status_code == 404:
            return None
        if response.status_code >= 300:
            raise RuntimeError(f"feed of {subscriber_id} answered {response.status_code}: {response.text[:500]}")
        return dict(response.json())


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
