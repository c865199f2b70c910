"""Prometheus metrics: the families, the HTTP middleware that counts requests, and the scrape.

Each process keeps its own counts and serves them itself: ``GET /metrics`` on
an API process's port, ``herald worker --metrics-port N`` for a worker. A
deployment of several processes is scraped process by process (Prometheus
adds an ``instance`` label to each); nothing is shared between them.

No label carries a value a caller chose beyond a short list (an HTTP method
outside the standard ones is ``other``): routes are the route's template
(``/v1/subscribers/{subscriberId}``), never the path, so no key, email, phone
or subscriber id reaches a label, and the number of series stays bounded.

The HTTP families are kept in plain numbers (:class:`RequestStats`) and
turned into Prometheus' families at the scrape: a request pays a dictionary
lookup and a few additions, not prometheus_client's locks and its
histogram's bucket walk (on 2 shared cores, about 3 µs a request against 20).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.routing import Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.kit.errors import error_body
from herald.kit.responses import dumps
from herald.kit.time import utcnow

logger = logging.getLogger("herald.metrics")
access_logger = logging.getLogger("herald.access")

PATH = "/metrics"
# Latencies of answers and provider calls: a millisecond to half a minute.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# A job's wait from due to started: a delivery's lag, up to minutes of backlog.
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

messages = Counter("herald_messages", "Messages stored by the workers, by channel and status", ["channel", "status"])
jobs_ready = Gauge("herald_jobs_ready", "Jobs due and not yet claimed (read from the store at each scrape)", ["kind"])
job_wait = Histogram("herald_job_wait_seconds", "From a job's due time to its claim", buckets=WAIT_BUCKETS)
provider_requests = Counter("herald_provider_requests", "Sends through providers, by outcome", ["provider", "outcome"])
provider_request_duration = Histogram(
    "herald_provider_request_duration_seconds", "Time a provider took to answer a send", ["provider"], buckets=LATENCY_BUCKETS
)
circuit_open = Gauge(
    "herald_circuit_open", "Integrations whose circuit breaker is open, by provider (read from the store at each scrape)", ["provider"]
)
sockets_connected = Gauge("herald_sockets_connected", "Inbox sockets this process holds")
webhook_deliveries = Counter("herald_webhook_deliveries", "Webhook deliveries attempted, by outcome", ["outcome"])

# Outcomes of a provider send: the provider took it, failed in a way a retry or another provider may not (transient), or refused it.
ACCEPTED, TRANSIENT, PERMANENT = "accepted", "transient_error", "permanent_error"


def record_provider_call(provider: str, outcome: str, seconds: float) -> None:
    provider_requests.labels(provider, outcome).inc()
    provider_request_duration.labels(provider).observe(seconds)


def observe_job_waits(due_times: list[datetime], now: datetime | None = None) -> None:
    """Each claimed job's wait, from its due time to ``now``."""
    now = now or utcnow()
    for due in due_times:
        if due.tzinfo is None:  # the store's times are UTC
            due = due.replace(tzinfo=UTC)
        job_wait.observe(max(0.0, (now - due).total_seconds()))


class NamedRoute:
    """A route template for requests Starlette's router does not route (the direct routes, the Inbox socket)."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path


def route_template(scope: Scope) -> str:
    """The template of the route that answered (``/v1/subscribers/{subscriberId}``), never the raw path.

    Starlette's router leaves the route it matched in the scope, the
    innermost one for a mounted app (the console), whose ``root_path`` says
    where it is mounted. A mount whose app matched nothing is ``<mount>/*``.
    """
    route = scope.get("route")
    if route is None:
        return "unmatched"
    root = scope.get("root_path", "")
    if isinstance(route, Mount):
        return f"{root}/*"
    return root + getattr(route, "path", "")


class RequestStats:
    """``herald_http_requests_total`` and ``herald_http_request_duration_seconds``, counted in plain numbers.

    One event loop thread counts (the API's); the scrape reads them on the
    same thread. Counts per (method, route, status); per (method, route) the
    duration's sum and its count in each bucket (not cumulative until the
    scrape adds them up).
    """

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, int], list[int]] = {}
        self.durations: dict[tuple[str, str], list[float]] = {}

    def entry(self, method: str, route: str, status: int) -> tuple[list[int], list[float]]:
        """The counters a request adds to: its count, and its route's durations (made on first use)."""
        label = method if method in METHODS else "other"
        count = self.requests.setdefault((label, route, status), [0])
        durations = self.durations.setdefault((label, route), [0.0] * (len(LATENCY_BUCKETS) + 2))
        return count, durations

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("herald_http_requests", "HTTP requests answered", labels=["method", "route", "status"])
        for (method, route, status), (count,) in list(self.requests.items()):
            requests.add_metric([method, route, str(status)], count)
        yield requests
        durations = HistogramMetricFamily(
            "herald_http_request_duration_seconds", "Time to answer an HTTP request", labels=["method", "route"]
        )
        for (method, route), numbers in list(self.durations.items()):
            cumulative, buckets = 0.0, []
            for bound, count in zip((*LATENCY_BUCKETS, float("inf")), numbers[1:], strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            durations.add_metric([method, route], buckets, numbers[0])
        yield durations


REQUESTS = RequestStats()
REGISTRY.register(REQUESTS)


class HttpMetrics:
    """Counts every HTTP request and times it, by route template; writes the access log line.

    ``template`` gives the route of a request the framework did not route
    (the direct routes, whose path is their template); the rest is read from
    the scope once the request is answered (:func:`route_template`).
    """

    def __init__(self, app: ASGIApp, *, access_log: bool = True, stats: RequestStats = REQUESTS) -> None:
        self.app = app
        self.access_log = access_log
        self.stats = stats
        self._entries: dict[tuple[str, str, int], tuple[list[int], list[float]]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send, template: str | None = None) -> None:
        started = time.perf_counter()
        status = 500

        async def send_counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_counted)
        finally:
            seconds = time.perf_counter() - started
            # A method outside the standard ones is "other": a client's made-up methods add no entries.
            method = scope["method"] if scope["method"] in METHODS else "other"
            route = template or route_template(scope)
            key = (method, route, status)
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = self.stats.entry(method, route, status)
            count, durations = entry
            count[0] += 1
            durations[0] += seconds
            # Bucket i counts the durations up to LATENCY_BUCKETS[i] and above the bound before; the last, the rest.
            durations[1 + bisect_left(LATENCY_BUCKETS, seconds)] += 1
            if self.access_log and access_logger.isEnabledFor(logging.INFO):
                principal = scope.get("state", {}).get("principal")
                fields = {
                    "method": method,
                    "route": route,
                    "status": status,
                    "durationMs": round(seconds * 1000, 2),
                    "environment": getattr(principal, "environment_id", None),
                }
                # Made and handled as Logger.info would, without its search of the stack for the
                # caller's file and line (no format shows them): a third of a line's cost.
                access_logger.handle(
                    access_logger.makeRecord(access_logger.name, logging.INFO, __file__, 0, "request", (), None, extra={"fields": fields})
                )


StoreReads = Callable[[], Awaitable[None]]


def store_gauges(sessionmaker: async_sessionmaker[AsyncSession]) -> StoreReads:
    """Reads ``herald_jobs_ready`` and ``herald_circuit_open`` from the store: the queue and the
    breakers are shared by every process, so each scrape reads them where they are."""
    from herald.models import Integration, IntegrationHealth, Job

    async def read() -> None:
        now = utcnow()
        async with sessionmaker() as session:
            ready = (
                await session.execute(
                    select(Job.kind, func.count())
                    .where(Job.status.in_(("queued", "delayed")), Job.run_at <= now)
                    .group_by(Job.kind)
                )
            ).all()
            open_breakers = (
                await session.execute(
                    select(Integration.provider_id, func.count())
                    .join(IntegrationHealth, IntegrationHealth.integration_id == Integration.id)
                    .where(IntegrationHealth.skipped_until > now)
                    .group_by(Integration.provider_id)
                )
            ).all()
        jobs_ready.clear()
        for kind in ("event", "step", "webhook"):
            jobs_ready.labels(kind).set(0)
        for kind, count in ready:
            jobs_ready.labels(kind).set(count)
        circuit_open.clear()
        for provider, count in open_breakers:
            circuit_open.labels(provider).set(count)

    return read


def authorized(token: str | None, authorization: str | None) -> bool:
    """Whether ``Authorization`` carries ``Bearer <token>`` (always, when no token is set); compared in constant time."""
    if not token:
        return True
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


async def scrape(reads: StoreReads | None) -> bytes:
    """This process's metrics in Prometheus' text format, the store's gauges read first."""
    if reads is not None:
        try:
            await reads()
        except Exception:  # the counters are still worth serving
            logger.warning("could not read the job queue and circuit breakers for the metrics", exc_info=True)
    return generate_latest(REGISTRY)


def unauthorized_body() -> bytes:
    return dumps(error_body(401, PATH, "A metrics token is required: Authorization: Bearer <HERALD_METRICS_TOKEN>"))


async def serve_asgi(scope: Scope, receive: Receive, send: Send, token: str | None, reads: StoreReads | None) -> None:
    """``GET /metrics`` of an API process."""
    authorization = None
    for key, value in scope.get("headers", ()):
        if key == b"authorization":
            authorization = value.decode("latin-1")
            break
    if not authorized(token, authorization):
        body, status, kind = unauthorized_body(), 401, b"application/json"
    else:
        body, status, kind = await scrape(reads), 200, CONTENT_TYPE_LATEST.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


# A scrape's request head is small: anything larger is not one.
MAX_HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT_SECONDS = 10.0


async def serve_port(host: str, port: int, token: str | None, reads: StoreReads | None) -> asyncio.Server:
    """A worker's metrics: a small HTTP/1.0 server answering ``GET /metrics`` on ``host:port``."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_SECONDS)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        authorization = next(
            (line.split(":", 1)[1].strip() for line in lines[1:] if line.lower().startswith("authorization:")), None
        )
        if method != "GET" or path != PATH:
            status, body, kind = "404 Not Found", dumps(error_body(404, path, "Not found: the metrics are at /metrics")), "application/json"
        elif not authorized(token, authorization):
            status, body, kind = "401 Unauthorized", unauthorized_body(), "application/json"
        else:
            status, body, kind = "200 OK", await scrape(reads), CONTENT_TYPE_LATEST
        writer.write(
            f"HTTP/1.0 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    return await asyncio.start_server(answer, host, port, limit=MAX_HEAD_BYTES)
