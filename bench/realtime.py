"""The Inbox's socket: what idle sockets cost one API process, and trigger → ``notification_received`` latency.

    python -m bench.realtime [--quick] [--sockets 5000] [--subscribers 1000] [--rate 100] [--duration 20]
                             [--postgres ADMIN_URL] [--workers N]

Starts Herald as ``make bench`` does (``herald serve``, the worker inside it
unless ``--workers``), then:

- **Sockets held**: connects ``--sockets`` sockets (one subscriber each) to the
  API process as @novu/js does (socket.io over a websocket, the session token
  in the query) and reads the API process's resident memory before and after,
  once they are idle: the memory each socket holds there.
- **Trigger → notification_received**: with ``--subscribers`` of those sockets
  connected, sends triggers of a one-step in-app workflow at ``--rate`` a second
  (open loop: on a fixed schedule whatever the answers), each to one of them,
  and times each from its scheduled send to the moment its socket got
  ``notification_received``.

The sockets are the engine.io v4 / socket.io v5 protocol spoken directly over
the ``websockets`` client (the handshake, pings and event frames), which holds
thousands of them in one process at a fraction of the CPU socket.io's own
client takes; the server cannot tell them apart. Subscribers are inserted
straight into the store and their tokens made with the run's secret key: setup,
never measured.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import websockets
from sqlalchemy import select

from bench import harness
from bench.harness import Environment, Store
from bench.loadgen import Api

# Targets (docs/performance.md).
P99_TARGET_MS = 100.0
SOCKET_KB_TARGET = 20.0
# The latency target is measured with this many subscribers connected.
LATENCY_SUBSCRIBERS = 1000


@dataclass
class Socket:
    """One subscriber's socket: engine.io v4 over a websocket, socket.io's default namespace."""

    connection: Any = None
    received: dict[int, float] = field(default_factory=dict)
    # The message's createdAt (written by the worker in the transaction storing it), on time.monotonic()'s clock.
    stored: dict[int, float] = field(default_factory=dict)
    reader: asyncio.Task[None] | None = None

    async def open(self, ws_url: str) -> None:
        # As a browser: permessage-deflate offered (the server decides whether to take it).
        self.connection = await websockets.connect(ws_url, max_size=2**20, ping_interval=None)
        opening = await self.connection.recv()
        if not str(opening).startswith("0"):
            raise RuntimeError(f"not an engine.io open packet: {opening!r}")
        await self.connection.send("40")
        answer = str(await self.connection.recv())
        if not answer.startswith("40"):
            raise RuntimeError(f"socket refused: {answer!r}")
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for frame in self.connection:
                if frame == "2":  # the server's ping
                    await self.connection.send("3")
                elif isinstance(frame, str) and frame.startswith("42"):
                    name, data = json.loads(frame[2:])
                    if name == "notification_received":
                        seq = int(data["message"]["payload"]["seq"])
                        self.received[seq] = time.monotonic()
                        self.stored[seq] = _monotonic(data["message"].get("createdAt"))
        except websockets.ConnectionClosed:
            pass

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()
        if self.reader is not None:
            self.reader.cancel()


async def seed(environment: Environment, count: int) -> list[tuple[str, str]]:
    """``count`` subscribers; their (subscriberId, session token)."""
    from herald.kit.auth import SubscriberPrincipal, issue_subscriber_token
    from herald.kit.db import create_engine, create_sessionmaker
    from herald.models import Subscriber

    ids = [f"rt-{index}" for index in range(count)]
    await environment.seed_subscribers(ids)
    engine = create_engine(environment.store.url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session:
            rows = (
                await session.execute(
                    select(Subscriber.id, Subscriber.subscriber_id).where(
                        Subscriber.environment_id == environment.environment_id
                    )
                )
            ).all()
    finally:
        await engine.dispose()
    internal = {external: internal_id for internal_id, external in rows}
    return [
        (
            external,
            issue_subscriber_token(
                SubscriberPrincipal(
                    environment.environment_id, environment.organization_id, internal[external], external
                ),
                environment.secret_key,
                3600,
            ),
        )
        for external in ids
    ]


async def connect_all(base_url: str, tokens: list[str], concurrency: int = 50) -> list[Socket]:
    ws_base = base_url.replace("http://", "ws://") + "/socket.io/?EIO=4&transport=websocket&token="
    sockets = [Socket() for _ in tokens]
    pending = iter(zip(sockets, tokens, strict=True))

    async def opener() -> None:
        for socket, token in pending:
            await socket.open(ws_base + token)

    await asyncio.gather(*(opener() for _ in range(concurrency)))
    return sockets


async def api_quiet(pid: int, busy_share: float = 0.1, window: float = 0.5, limit: float = 60.0) -> float:
    """Wait until the process used under ``busy_share`` of a core over ``window`` s (at most ``limit`` s); when it did."""
    deadline = time.monotonic() + limit
    used = harness.cpu_seconds(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(window)
        now = harness.cpu_seconds(pid)
        if now - used < busy_share * window:
            return time.monotonic()
        used = now
    return time.monotonic()


def _monotonic(iso: str | None) -> float:
    """An ISO time of this machine's clock on time.monotonic()'s (NaN when absent)."""
    if not iso:
        return math.nan
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() - (time.time() - time.monotonic())


class HarnessPauses:
    """The longest pauses of this (the measuring) process while it times: its garbage collections, and its event loop.

    A socket's ``notification_received`` is timed when this process's loop
    reads it; a pause here is counted as Herald's latency. In ``make bench``
    the row runs last, in a process holding what every earlier row made, and
    a full collection has all of it to go through.
    """

    def __init__(self) -> None:
        self.longest_gc_ms = 0.0
        self.longest_stall_ms = 0.0
        self._gc_started = 0.0
        self._probe: asyncio.Task[None] | None = None

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.longest_gc_ms = max(self.longest_gc_ms, (time.perf_counter() - self._gc_started) * 1000)

    async def _watch_loop(self, interval: float = 0.005) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(interval)
            self.longest_stall_ms = max(self.longest_stall_ms, (time.perf_counter() - asked - interval) * 1000)

    def __enter__(self) -> HarnessPauses:
        gc.callbacks.append(self._on_gc)
        self._probe = asyncio.get_running_loop().create_task(self._watch_loop())
        return self

    def __exit__(self, *exc_info: Any) -> None:
        gc.callbacks.remove(self._on_gc)
        if self._probe is not None:
            self._probe.cancel()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


@dataclass
class RealtimeOptions:
    sockets: int
    subscribers: int
    rate: float
    duration: float


async def measure_on(
    environment: Environment, deployment: Any, api: Api, options: RealtimeOptions, say: Any = print
) -> dict[str, Any]:
    """Both measurements against a Herald already running (``make bench`` calls this on its own deployment)."""
    figures: dict[str, Any] = {}
    sockets: list[Socket] = []
    subscribers = await seed(environment, max(options.sockets, options.subscribers))
    try:
        workflow = await api.create_workflow(
            "bench realtime", [{"template": {"type": "in_app", "content": "Hi {{payload.seq}}"}}]
        )
        # A first socket and trigger: imports and caches warmed before the memory is read.
        warm = await connect_all(deployment.base_url, [subscribers[0][1]], 1)
        await api._call(
            "POST", "/v1/events/trigger", json={"name": workflow, "to": subscribers[0][0], "payload": {"seq": -1}}
        )
        await asyncio.sleep(1.0)
        await warm[0].close()
        await asyncio.sleep(1.0)

        # Sockets held by the API process.
        before = harness.rss_mb(deployment.api.pid) or 0.0
        started = time.monotonic()
        sockets = await connect_all(deployment.base_url, [token for _, token in subscribers[: options.sockets]])
        connect_seconds = time.monotonic() - started
        await asyncio.sleep(3.0)
        after = harness.rss_mb(deployment.api.pid) or 0.0
        per_socket_kb = (after - before) * 1024 / options.sockets
        figures.update(
            sockets=options.sockets,
            connect_s=round(connect_seconds, 2),
            rss_before_mb=round(before, 1),
            rss_after_mb=round(after, 1),
            per_socket_kb=round(per_socket_kb, 1),
        )
        say(
            f"sockets held: {options.sockets} connected in {connect_seconds:.1f} s; API RSS {before:.0f} → {after:.0f} MB, "
            f"{per_socket_kb:.1f} KB a socket (target < {SOCKET_KB_TARGET:g})"
        )
        # Keep only --subscribers of them for the latency. The others' going offline is written by the API
        # process (a presence transaction a subscriber): the latency is measured once that work is done,
        # not during it, and how long it took is a figure of its own.
        closing = time.monotonic()
        for socket in sockets[options.subscribers :]:
            await socket.close()
        sockets = sockets[: options.subscribers]
        settled = await api_quiet(deployment.api.pid)
        figures["disconnects_settled_s"] = round(settled - closing, 1)
        say(f"{options.sockets - len(sockets)} sockets closed; the API process was idle again after {settled - closing:.1f} s")

        # Trigger → notification_received at --rate.
        # What this process holds by now (its sockets, what earlier rows made) is frozen until the measurement
        # ends: a full collection walking all of it paused the timing loop for about 0.2 s, which the sockets'
        # timings read as Herald's latency.
        gc.collect()
        gc.freeze()
        total = int(options.rate * options.duration)
        scheduled: dict[int, tuple[float, Socket]] = {}
        failures = 0
        answered: dict[int, float] = {}
        start = time.monotonic() + 0.2
        rng = random.Random(7)

        async def send(seq: int, at: float, index: int) -> None:
            nonlocal failures
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            scheduled[seq] = (at, sockets[index])
            try:
                await api._call(
                    "POST",
                    "/v1/events/trigger",
                    json={"name": workflow, "to": subscribers[index][0], "payload": {"seq": seq}},
                )
                answered[seq] = time.monotonic()
            except Exception:
                failures += 1

        try:
            with HarnessPauses() as pauses:
                await asyncio.gather(
                    *(send(seq, start + seq / options.rate, rng.randrange(len(sockets))) for seq in range(total))
                )
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and sum(seq in s.received for seq, (_, s) in scheduled.items()) < total:
                    await asyncio.sleep(0.2)
        finally:
            gc.unfreeze()
        latencies = [
            (socket.received[seq] - at) * 1000 for seq, (at, socket) in scheduled.items() if seq in socket.received
        ]
        missing = total - len(latencies)
        # The message's createdAt splits each latency: trigger and worker before it, the socket's path after.
        after_stored = [
            (socket.received[seq] - socket.stored[seq]) * 1000
            for seq, (_, socket) in scheduled.items()
            if seq in socket.received and not math.isnan(socket.stored[seq])
        ]
        accepted = [(answered[seq] - at) * 1000 for seq, (at, _) in scheduled.items() if seq in answered]
        # The slowest five, each with when it was sent (s into the run) and its parts: answered, stored, on the socket.
        slowest = sorted(
            (seq for seq, (_, socket) in scheduled.items() if seq in socket.received),
            key=lambda seq: scheduled[seq][1].received[seq] - scheduled[seq][0],
            reverse=True,
        )[:5]

        def parts(seq: int) -> str:
            at, socket = scheduled[seq]
            answer = f"{(answered[seq] - at) * 1000:.0f}" if seq in answered else "-"
            return (
                f"+{at - start:.1f} s: answered {answer}, stored {(socket.stored[seq] - at) * 1000:.0f}, "
                f"socket {(socket.received[seq] - at) * 1000:.0f} ms"
            )

        figures.update(
            subscribers=options.subscribers,
            rate_per_s=options.rate,
            triggers=total,
            received=len(latencies),
            missing=missing,
            failed_sends=failures,
            harness_gc_max_ms=round(pauses.longest_gc_ms, 1),
            harness_stall_max_ms=round(pauses.longest_stall_ms, 1),
        )
        if latencies:
            p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
            figures.update(
                accepted_p50_ms=round(percentile(accepted, 0.5), 1) if accepted else None,
                accepted_p99_ms=round(percentile(accepted, 0.99), 1) if accepted else None,
                p50_ms=round(p50, 1),
                p99_ms=round(p99, 1),
                mean_ms=round(statistics.fmean(latencies), 1),
                stored_to_socket_p50_ms=round(percentile(after_stored, 0.5), 1) if after_stored else None,
                stored_to_socket_p99_ms=round(percentile(after_stored, 0.99), 1) if after_stored else None,
                max_ms=round(max(latencies), 1),
            )
            say(
                f"trigger → notification_received, {options.rate:g}/s for {options.duration:g} s, {options.subscribers} "
                f"subscribers connected: p50 {p50:.1f} ms, p99 {p99:.1f} ms (target < {P99_TARGET_MS:g}), max "
                f"{max(latencies):.1f} ms (the trigger's answer: p50 {figures['accepted_p50_ms']} ms, p99 {figures['accepted_p99_ms']} ms; "
                f"message stored → socket: p50 {figures['stored_to_socket_p50_ms']} ms, p99 {figures['stored_to_socket_p99_ms']} ms); "
                f"{len(latencies)}/{total} received, {missing} missing, {failures} sends failed; this process's "
                f"longest pause {pauses.longest_stall_ms:.1f} ms (garbage collection {pauses.longest_gc_ms:.1f} ms)"
            )
            say("slowest: " + "; ".join(parts(seq) for seq in slowest))
        else:
            say(f"no notification_received arrived ({failures} sends failed)")
    finally:
        for socket in sockets:
            await socket.close()
    return figures


async def measure(options: argparse.Namespace) -> dict[str, Any]:
    """The standalone run: its own store and Herald, then :func:`measure_on`."""
    folder = harness.make_folder()
    store = await Store.postgres(options.postgres) if options.postgres else Store.sqlite(folder)
    environment = Environment(folder, store)
    try:
        api_key = await asyncio.to_thread(environment.prepare)
        deployment = await environment.start_herald("uvicorn", api_key, options.workers)
        api = Api(deployment.base_url, api_key)
        try:
            figures = await measure_on(
                environment,
                deployment,
                api,
                RealtimeOptions(options.sockets, options.subscribers, options.rate, options.duration),
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
        prog="python -m bench.realtime", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1,000 sockets and 10 s of triggers")
    parser.add_argument("--sockets", type=int, help="sockets connected to the API process (default 5000; quick 1000)")
    parser.add_argument(
        "--subscribers",
        type=int,
        default=1000,
        help="sockets kept connected during the latency measurement (default 1000)",
    )
    parser.add_argument("--rate", type=float, default=100.0, help="triggers per second (default 100)")
    parser.add_argument("--duration", type=float, help="seconds of triggers (default 20; quick 10)")
    parser.add_argument(
        "--postgres", metavar="URL", help="admin URL of a PostgreSQL server on 127.0.0.1 (default: SQLite)"
    )
    parser.add_argument(
        "--workers", type=int, default=0, help="`herald worker` processes beside `herald serve --no-worker` (default 0)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON at the end")
    options = parser.parse_args(argv)
    options.sockets = options.sockets or (1000 if options.quick else 5000)
    options.duration = options.duration or (10.0 if options.quick else 20.0)
    options.subscribers = min(options.subscribers, options.sockets)
    figures = asyncio.run(measure(options))
    if options.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
