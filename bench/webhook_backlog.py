"""A trigger's in-app message while a backlog of outbound webhook deliveries waits for a slow or failing endpoint.

    python -m bench.webhook_backlog [--mode slow|failing] [--backlog 18000] [--hold 0.5]
                                    [--postgres ADMIN_URL] [--workers N] [--observe 60]

Starts Herald as ``make bench`` does (``herald serve``, its worker inside or
``--workers`` worker processes) and a webhook receiver on loopback (an HTTP/1.1
server in this process). ``slow`` holds each request ``--hold`` seconds before
it answers 204; ``failing`` answers 503 at once. One endpoint of the
environment points at it, and ``--backlog`` events for it are queued straight
into the store by Herald's own ``emit`` (the code that queues every webhook
event). A few seconds later one trigger of a one-step in-app workflow goes out;
the figure is the time from that trigger to its message's ``createdAt``.
Meanwhile ``GET /v1/health-check`` is asked every 100 ms (median and max), and
the receiver counts what it is sent: for ``failing``, the attempts a minute a
dead endpoint costs, over ``--observe`` seconds after the message.

A second endpoint, to a receiver that answers at once, takes the trigger's
``message.sent`` event: the run says when it arrived, so a backlog for one
endpoint can be seen not to hold up another's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import httpx

from bench import harness
from bench.harness import Environment, Store


class Receiver:
    """An HTTP/1.1 server on loopback that answers each POST after ``hold`` seconds with ``status``."""

    def __init__(self, hold: float, status: int) -> None:
        self.hold = hold
        self.status = status
        self.arrivals: list[float] = []
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._connection, harness.HOST, 0, backlog=1024)
        self.port = int(self.server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{harness.HOST}:{self.port}/hook"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reason = {204: "No Content", 503: "Service Unavailable"}.get(self.status, "OK")
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                if length:
                    await reader.readexactly(length)
                self.arrivals.append(time.monotonic())
                if self.hold:
                    await asyncio.sleep(self.hold)
                writer.write(f"HTTP/1.1 {self.status} {reason}\r\ncontent-length: 0\r\n\r\n".encode())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:  # the run is over: requests still held are dropped
            return
        finally:
            writer.close()

    def count_between(self, start: float, end: float) -> int:
        return sum(1 for at in self.arrivals if start <= at < end)


async def queue_backlog(environment: Environment, count: int) -> None:
    """``count`` workflow.updated events for the environment's endpoints, queued by Herald's own emit."""
    from herald.kit.db import create_engine, create_sessionmaker
    from herald.webhooks.events import emit

    engine = create_engine(environment.store.url, pool_size=1)
    try:
        sessions = create_sessionmaker(engine)
        for start in range(0, count, 2000):
            async with sessions() as session, session.begin():
                items = [{"name": f"backlog {n}", "n": n} for n in range(start, min(start + 2000, count))]
                await emit(session, environment.environment_id, environment.organization_id, "workflow.updated", items)
    finally:
        await engine.dispose()


async def measure(options: argparse.Namespace) -> dict[str, Any]:
    folder = harness.make_folder()
    store = await Store.postgres(options.postgres) if options.postgres else Store.sqlite(folder)
    environment = Environment(folder, store, extra_env={"HERALD_OUTBOUND_ALLOW": harness.HOST})
    backlog_receiver = Receiver(options.hold if options.mode == "slow" else 0.0, 204 if options.mode == "slow" else 503)
    other_receiver = Receiver(0.0, 204)
    await backlog_receiver.start()
    await other_receiver.start()
    try:
        api_key = await asyncio.to_thread(environment.prepare)
        deployment = await environment.start_herald("uvicorn", api_key, options.workers)
        async with httpx.AsyncClient(
            base_url=deployment.base_url, headers={"Authorization": f"ApiKey {api_key}"}, timeout=30
        ) as client:
            for url, types in ((backlog_receiver.url, ["workflow.updated"]), (other_receiver.url, ["message.sent"])):
                (await client.post("/v1/webhooks/endpoints", json={"url": url, "eventTypes": types})).raise_for_status()
            created = await client.post(
                "/v1/workflows",
                json={"name": "backlog probe", "active": True, "steps": [{"template": {"type": "in_app", "content": "hi"}}]},
            )
            created.raise_for_status()
            workflow = created.json()["data"]["triggers"][0]["identifier"]
            started = time.monotonic()
            await queue_backlog(environment, options.backlog)
            print(f"{options.backlog} webhook events queued in {time.monotonic() - started:.1f} s")
            await asyncio.sleep(options.settle)

            health: list[float] = []
            stop_polling = asyncio.Event()

            async def poll_health() -> None:
                async with httpx.AsyncClient(base_url=deployment.base_url, timeout=30) as poller:
                    while not stop_polling.is_set():
                        asked = time.monotonic()
                        await poller.get("/v1/health-check")
                        health.append(time.monotonic() - asked)
                        await asyncio.sleep(max(0.0, 0.1 - (time.monotonic() - asked)))

            polling = asyncio.create_task(poll_health())
            sent_at = time.monotonic()
            sent_wall = time.time()
            answer = await client.post(
                "/v1/events/trigger", json={"name": workflow, "to": {"subscriberId": "backlog-probe"}, "payload": {}}
            )
            answer.raise_for_status()
            transaction = answer.json()["data"]["transactionId"]
            seen_after: float | None = None
            stored_after: float | None = None
            while time.monotonic() - sent_at < options.timeout:
                found = (await client.get("/v1/messages", params={"transactionId": transaction})).json()["data"]
                if found:
                    seen_after = time.monotonic() - sent_at
                    from herald.kit.time import parse_iso

                    stored_after = parse_iso(found[0]["createdAt"]).timestamp() - sent_wall
                    break
                await asyncio.sleep(0.05)
            sent_before_message = backlog_receiver.count_between(0, sent_at + (seen_after or options.timeout))
            other_after: float | None = None
            while time.monotonic() - sent_at < options.timeout and not other_receiver.arrivals:
                await asyncio.sleep(0.05)
            if other_receiver.arrivals:
                other_after = other_receiver.arrivals[0] - sent_at
            observed_from = time.monotonic()
            await asyncio.sleep(options.observe)
            stop_polling.set()
            await polling
            attempts_observed = backlog_receiver.count_between(observed_from, time.monotonic())
        deployment.stop()
        return {
            "store": store.label,
            "workers": options.workers,
            "mode": options.mode,
            "backlog": options.backlog,
            "hold_s": options.hold if options.mode == "slow" else 0.0,
            "trigger_to_message_stored_s": stored_after,
            "trigger_to_message_seen_s": seen_after,
            "other_endpoint_event_after_s": other_after,
            "backlog_requests_before_message": sent_before_message,
            "backlog_requests_per_minute_after": attempts_observed * 60.0 / options.observe if options.observe else None,
            "health_median_ms": statistics.median(health) * 1000 if health else None,
            "health_max_ms": max(health) * 1000 if health else None,
            "health_polls": len(health),
        }
    finally:
        await backlog_receiver.stop()
        await other_receiver.stop()
        environment.stop_all()
        await store.drop()
        harness.remove_folder(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhook_backlog", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("slow", "failing"), default="slow")
    parser.add_argument("--backlog", type=int, default=18000, help="webhook events queued for the endpoint")
    parser.add_argument("--hold", type=float, default=0.5, help="seconds the slow receiver holds each request")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between queueing the backlog and the trigger")
    parser.add_argument("--timeout", type=float, default=300.0, help="longest wait for the message")
    parser.add_argument("--observe", type=float, default=20.0, help="seconds the receiver is watched after the message")
    parser.add_argument("--workers", type=int, default=0, help="worker processes (0: the worker inside the API process)")
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="run on PostgreSQL (a database of its own on that server)")
    options = parser.parse_args(argv)
    result = asyncio.run(measure(options))
    if result["trigger_to_message_seen_s"] is None:
        print(f"the trigger's message was not stored within {options.timeout:g} s")
    for name, value in result.items():
        print(f"{name:36} {value if not isinstance(value, float) else round(value, 3)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
