"""Email throughput: sustained emails a second over SMTP and over an HTTP provider (SendGrid's API), to local peers.

    python -m bench.email [--quick] [--duration 30] [--postgres ADMIN_URL] [--workers N]

Starts Herald as ``make bench`` does (``herald serve``, the worker inside it
unless ``--workers``), with ``HERALD_OUTBOUND_ALLOW=127.0.0.1`` so delivery may
reach the two peers, each in a process of its own so that neither shares the
harness's interpreter with the load generator:

- **an SMTP sink**: aiosmtpd's server on uvloop, accepting every message; it
  counts the messages and the connections they came over;
- **a SendGrid peer**: a bare ASGI app under uvicorn answering
  ``POST /v3/mail/send`` as SendGrid does, 202 with an empty body and an
  ``X-Message-Id`` header.

Herald gets a ``nodemailer`` integration pointing at the sink and a
``sendgrid`` one whose ``credentials.baseUrl`` points at the peer, and a
one-step email workflow. For each in turn, bulk triggers (50 events a request,
each to one of 1,000 subscribers with an email address, the integration chosen
by ``overrides.email.integrationIdentifier``) keep a backlog of a few seconds
of delivery, as the sustained in-app row does, while the messages the peer
received are counted every second. After a warm-up the figure is the messages
the peer received over the window, a second; the slowest second is printed
too. Each run then waits until the peer has every email accepted, so the next
starts idle.

Targets (PostgreSQL, 2 workers, the 2-core machine): ≥ 500 SMTP emails/s,
over connections kept open per integration (the row says how many the sink
saw), and ≥ 1,000 HTTP-provider emails/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from typing import Any

from bench import harness
from bench.harness import Environment, Store
from bench.loadgen import Api

TARGET_SMTP = 500.0
TARGET_HTTP = 1000.0
WORKFLOW = "bench email"
SUBSCRIBERS = 1000
EVENTS_PER_REQUEST = 50
# Backlog kept by the feeders: this many seconds of delivery at the fastest second so
# far, never fewer than MIN_BACKLOG triggers (bench/scenarios.py's sustained does the same).
BACKLOG_SECONDS = 3.0
MIN_BACKLOG = 2000
COUNT_SECONDS = 1.0
SENDGRID_KEY = "SG.bench-key"


# The peers, each in a process of its own ------------------------------------------------------


def _fast_loop() -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass


def _smtp_sink(port: int, messages: Synchronized[int], connections: Synchronized[int]) -> None:
    """An SMTP server accepting every message; counts messages and connections (runs in its own process)."""
    import logging

    from aiosmtpd.smtp import SMTP

    logging.getLogger("mail.log").setLevel(logging.ERROR)
    _fast_loop()

    class Sink:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
            messages.value += 1
            return "250 2.0.0 OK"

    class CountingSMTP(SMTP):
        def connection_made(self, transport: Any) -> None:
            connections.value += 1
            super().connection_made(transport)

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: CountingSMTP(Sink(), hostname="bench-sink", ident="bench sink"), harness.HOST, port, backlog=512
        )
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def _sendgrid_peer(port: int, messages: Synchronized[int], connections: Synchronized[int]) -> None:
    """SendGrid's Mail Send endpoint as far as a sender sees it: 202, empty body, X-Message-Id (its own process)."""
    import uvicorn

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        headers = dict(scope["headers"])
        if scope["method"] != "POST" or scope["path"] != "/v3/mail/send":
            status, body = 404, b'{"errors":[{"message":"not found"}]}'
        elif headers.get(b"authorization") != f"Bearer {SENDGRID_KEY}".encode():
            status, body = 401, b'{"errors":[{"message":"authorization required"}]}'
        else:
            messages.value += 1
            await send(
                {
                    "type": "http.response.start",
                    "status": 202,
                    "headers": [(b"x-message-id", f"bench-{messages.value}".encode()), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    _fast_loop()
    config = uvicorn.Config(
        app, host=harness.HOST, port=port, log_level="warning", access_log=False, lifespan="off", backlog=512
    )
    uvicorn.Server(config).run()


@dataclass
class Peer:
    """A peer process on a loopback port and its counters (shared memory, read without locking)."""

    name: str
    target: Any
    port: int = field(default_factory=harness.free_port)
    process: Any = None
    messages: Any = None
    connections: Any = None

    def start(self) -> Peer:
        context = multiprocessing.get_context("spawn")
        self.messages = context.Value("q", 0, lock=False)
        self.connections = context.Value("q", 0, lock=False)
        self.process = context.Process(
            target=self.target, args=(self.port, self.messages, self.connections), name=self.name, daemon=True
        )
        self.process.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not self.process.is_alive():
                raise RuntimeError(f"{self.name} exited early (code {self.process.exitcode})")
            try:
                with socket.create_connection((harness.HOST, self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"{self.name} did not listen on {self.port} within 30 s")

    @property
    def received(self) -> int:
        return int(self.messages.value)

    def pids(self) -> list[int]:
        return [self.process.pid] if self.process is not None and self.process.is_alive() else []

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.process = None


# The measurement ------------------------------------------------------------------------------


@dataclass
class EmailOptions:
    duration: float
    warmup: float


@dataclass
class Throughput:
    rate: float = 0.0
    seconds: float = 0.0
    delivered: int = 0
    accepted: int = 0
    slowest: float | None = None
    per_second: list[float] = field(default_factory=list)
    drained: bool = True
    errors: list[str] = field(default_factory=list)
    # CPU microseconds an email over the window, by part (api, workers, database, peer).
    cpu_per_email_us: dict[str, float] = field(default_factory=dict)


CpuReading = Callable[[], dict[str, float]]


def cpu_reader(environment: Environment, deployment: Any, peer: Peer) -> CpuReading:
    """CPU seconds used so far by Herald's API process, its workers, the database's backends and the peer."""

    def total(pids: list[int]) -> float:
        return sum(harness.cpu_seconds(pid) for pid in pids)

    def read() -> dict[str, float]:
        return {
            "api": total(deployment.api.pids()),
            "workers": total([pid for worker in deployment.workers for pid in worker.pids()]),
            "database": total(environment.store.backend_pids()),
            "peer": total(peer.pids()),
        }

    return read


async def sustain(
    api: Api, workflow: str, integration: str, peer: Peer, options: EmailOptions, cpu: CpuReading | None = None
) -> Throughput:
    """Keep a backlog of one-email triggers for ``integration`` and count what ``peer`` receives each second.

    With ``cpu``, the CPU each part spent over the measured window is divided
    by the emails received in it: the cost of an email, which unlike the rate
    does not fall when something else takes the machine's cores.
    """
    outcome = Throughput()
    base = peer.received
    state = {"accepted": 0, "fastest": 0.0}
    counter = iter(range(10**9))
    start = time.monotonic()
    window_start = start + options.warmup
    window_end = window_start + options.duration

    async def feed() -> None:
        while time.monotonic() < window_end:
            backlog = state["accepted"] - (peer.received - base)
            if backlog > max(MIN_BACKLOG, BACKLOG_SECONDS * state["fastest"]):
                await asyncio.sleep(0.02)
                continue
            events = []
            for _ in range(EVENTS_PER_REQUEST):
                index = next(counter)
                who = index % SUBSCRIBERS
                events.append(
                    {
                        "name": workflow,
                        "to": {"subscriberId": f"mail-{who}", "email": f"reader{who}@example.com"},
                        "payload": {"n": index},
                        "overrides": {"email": {"integrationIdentifier": integration}},
                    }
                )
            try:
                accepted = await api.trigger_bulk(events)  # added after the await: two feeders share the total
                state["accepted"] += accepted
            except Exception as exc:  # keep feeding; the row says it
                if len(outcome.errors) < 3:
                    outcome.errors.append(str(exc)[:200])
                await asyncio.sleep(0.2)

    samples: list[tuple[float, int]] = []
    spent: list[dict[str, float]] = []

    async def sample() -> None:
        while not samples or samples[-1][0] < window_end:
            now, count = time.monotonic(), peer.received
            if cpu is not None and now >= window_start and not spent:
                spent.append(cpu())
            if samples and now > samples[-1][0]:
                state["fastest"] = max(state["fastest"], (count - samples[-1][1]) / (now - samples[-1][0]))
            samples.append((now, count))
            await asyncio.sleep(max(0.0, COUNT_SECONDS - (time.monotonic() - now)))

    sampler = asyncio.create_task(sample())
    await asyncio.gather(feed(), feed())
    await sampler
    if cpu is not None and spent:
        spent.append(cpu())
    inside = [(t, n) for t, n in samples if t >= window_start]
    if len(inside) >= 2:
        outcome.seconds = inside[-1][0] - inside[0][0]
        outcome.delivered = inside[-1][1] - inside[0][1]
        outcome.rate = outcome.delivered / outcome.seconds
        outcome.per_second = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(inside, inside[1:], strict=False)]
        outcome.slowest = min(outcome.per_second) if outcome.per_second else None
        if len(spent) == 2 and outcome.delivered:
            outcome.cpu_per_email_us = {
                part: round((spent[1][part] - spent[0][part]) / outcome.delivered * 1e6) for part in spent[0]
            }
    outcome.accepted = state["accepted"]
    # Everything accepted reaches the peer before the next measurement starts.
    deadline = time.monotonic() + 60 + outcome.accepted / 100
    while peer.received - base < outcome.accepted and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    outcome.drained = peer.received - base >= outcome.accepted
    return outcome


def outbound_allows_loopback(environment: Environment) -> bool:
    allowed = environment.env().get("HERALD_OUTBOUND_ALLOW", "")
    return any(entry.strip() in (harness.HOST, "127.0.0.0/8", "127.0.0.1/32") for entry in allowed.split(","))


async def measure_on(
    environment: Environment, deployment: Any, api: Api, options: EmailOptions, say: Any = print
) -> dict[str, Any]:
    """Both rows against a Herald already running (``make bench`` calls this on its own deployment).

    Herald's processes must have been started with ``HERALD_OUTBOUND_ALLOW``
    letting 127.0.0.1 through (``make bench`` does so when this measurement runs).
    """
    if not outbound_allows_loopback(environment):
        raise RuntimeError("the email measurement needs Herald started with HERALD_OUTBOUND_ALLOW=127.0.0.1")
    sink = Peer("smtp-sink", _smtp_sink).start()
    sendgrid = Peer("sendgrid-peer", _sendgrid_peer).start()
    figures: dict[str, Any] = {}
    try:
        for identifier, provider, credentials in (
            ("bench-smtp", "nodemailer", {"host": harness.HOST, "port": str(sink.port), "ignoreTls": True}),
            (
                "bench-sendgrid",
                "sendgrid",
                {"apiKey": SENDGRID_KEY, "baseUrl": f"http://{harness.HOST}:{sendgrid.port}"},
            ),
        ):
            await api._call(
                "POST",
                "/v1/integrations",
                json={
                    "providerId": provider,
                    "channel": "email",
                    "identifier": identifier,
                    "active": True,
                    "credentials": {"from": "bench@example.com", "senderName": "Bench", **credentials},
                },
            )
        workflow = await api.create_workflow(
            WORKFLOW,
            [
                {
                    "template": {
                        "type": "email",
                        "subject": "Bench {{payload.n}}",
                        "content": "<p>Hello, this is message {{payload.n}}.</p>",
                    }
                }
            ],
        )
        for name, identifier, peer in (("smtp", "bench-smtp", sink), ("http", "bench-sendgrid", sendgrid)):
            opened_before = peer.connections.value
            outcome = await sustain(api, workflow, identifier, peer, options, cpu_reader(environment, deployment, peer))
            # The sink counts its connections; the HTTP peer does not (httpx keeps its own pool).
            connections = peer.connections.value - opened_before if name == "smtp" else None
            figures[name] = {
                "rate_per_s": round(outcome.rate, 1),
                "seconds": round(outcome.seconds, 1),
                "delivered": outcome.delivered,
                "slowest_second_per_s": None if outcome.slowest is None else round(outcome.slowest, 1),
                "triggers_accepted": outcome.accepted,
                "received": peer.received,
                "connections": connections,
                "drained": outcome.drained,
                "errors": outcome.errors,
                "cpu_per_email_us": outcome.cpu_per_email_us,
            }
            say(
                f"email {name}: {outcome.rate:.0f} emails/s over {outcome.seconds:.0f} s "
                f"(slowest second {outcome.slowest or 0:.0f}/s); {peer.received} received"
                + (f" over {connections} connections" if connections is not None else "")
                + ("" if outcome.drained else f"; NOT drained: {peer.received} of {outcome.accepted}")
                + (f"; errors: {outcome.errors}" if outcome.errors else "")
            )
            say(f"email {name}, each second (emails/s): " + " ".join(f"{rate:.0f}" for rate in outcome.per_second))
            if outcome.cpu_per_email_us:
                parts = outcome.cpu_per_email_us
                say(
                    f"email {name}, CPU an email (µs): "
                    + ", ".join(f"{part} {value:g}" for part, value in parts.items())
                    + f"; Herald's (API, workers, database) {parts['api'] + parts['workers'] + parts['database']:g}"
                )
    finally:
        sink.stop()
        sendgrid.stop()
    return figures


async def measure(options: argparse.Namespace) -> dict[str, Any]:
    """The standalone run: its own store and Herald, then :func:`measure_on`."""
    folder = harness.make_folder()
    store = await Store.postgres(options.postgres) if options.postgres else Store.sqlite(folder)
    environment = Environment(folder, store, extra_env={"HERALD_OUTBOUND_ALLOW": harness.HOST})
    try:
        api_key = await asyncio.to_thread(environment.prepare)
        deployment = await environment.start_herald("uvicorn", api_key, options.workers)
        api = Api(deployment.base_url, api_key)
        try:
            figures = await measure_on(
                environment,
                deployment,
                api,
                EmailOptions(options.duration, options.warmup),
                say=lambda text: print(text, flush=True),
            )
        finally:
            await api.close()
            deployment.stop()
    finally:
        environment.stop_all()
        await store.drop()
        harness.remove_folder(folder)
    return {"store": store.label, "workers": options.workers, **figures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.email", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10 s measured after 5 s of warm-up, each")
    parser.add_argument("--duration", type=float, help="seconds measured for each row (default 30; quick 10)")
    parser.add_argument("--warmup", type=float, help="seconds of load before each row counts (default 10; quick 5)")
    parser.add_argument(
        "--postgres", metavar="URL", help="admin URL of a PostgreSQL server on 127.0.0.1 (default: SQLite)"
    )
    parser.add_argument(
        "--workers", type=int, default=0, help="`herald worker` processes beside `herald serve --no-worker` (default 0)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON at the end")
    options = parser.parse_args(argv)
    options.duration = options.duration or (10.0 if options.quick else 30.0)
    options.warmup = options.warmup if options.warmup is not None else (5.0 if options.quick else 10.0)
    _fast_loop()
    figures = asyncio.run(measure(options))
    if options.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
