"""The trigger route's own CPU cost, with no server, network or worker in the way.

    python -m bench.inprocess [--requests 20000] [--concurrency 1,32] [--postgres URL] [--route trigger|subscriber]

Drives ``POST /v1/events/trigger`` (or, with ``--route subscriber``,
``POST /v1/subscribers`` creating a new subscriber each time) by calling the ASGI app directly, from
``--concurrency`` clients in this process, against a fresh SQLite store (or,
with ``--postgres``, a fresh database on that server, dropped after) with no
worker, and does the same with the framework's ceiling
(``bench/bare_app.py``). It prints requests/s and the CPU each request took;
on PostgreSQL also the CPU the database's backends spent on it.
``make bench`` measures what a user meets (server, network, delivery sharing
the machine); this isolates what Herald's own code adds per trigger, which is
what a change to the trigger path moves. At concurrency 1 each trigger has a
transaction of its own; at 32 the group commit (herald/kit/groupcommit.py)
writes up to 32 together.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvloop

from bench.harness import UNLIMITED, Store, cpu_seconds

ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]],
    Awaitable[None],
]
WORKFLOW = "inprocess"


def trigger_body(label: str, number: int) -> bytes:
    return json.dumps({"name": WORKFLOW, "to": f"sub-{number % 1000}", "payload": {"n": number}}).encode()


def subscriber_body(label: str, number: int) -> bytes:
    """A subscriber no earlier request created: each request is a create."""
    subscriber_id = f"user-{label}-{number}"
    return json.dumps(
        {
            "subscriberId": subscriber_id,
            "email": f"{subscriber_id}@example.com",
            "firstName": "Ada",
            "data": {"plan": "pro"},
        }
    ).encode()


# The routes measured: each one's path, and the body of a measurement's numbered request.
ROUTES: dict[str, tuple[str, Callable[[str, int], bytes]]] = {
    "trigger": ("/v1/events/trigger", trigger_body),
    "subscriber": ("/v1/subscribers", subscriber_body),
}


def prepare_store(url: str) -> str:
    """A migrated store with an organization; returns the Development API key."""
    os.environ["HERALD_DATABASE_URL"] = url
    os.environ.setdefault("HERALD_LOG_LEVEL", "warning")
    for name, value in UNLIMITED.items():  # a measurement, not a client to hold back
        os.environ.setdefault(name, value)
    herald = str(Path(sys.executable).with_name("herald"))
    subprocess.run([herald, "migrate"], check=True, capture_output=True)
    boot = subprocess.run([herald, "bootstrap", "--json"], check=True, capture_output=True, text=True)
    return str(json.loads(boot.stdout)["environments"][0]["apiKey"])


async def call(app: ASGIApp, method: str, path: str, body: bytes, api_key: str) -> tuple[int, bytes]:
    """One request through the app as a server would make it; returns status and body."""
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    status, chunks = 0, []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"herald"),
            (b"authorization", f"ApiKey {api_key}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    await app(scope, receive, send)
    return status, b"".join(chunks)


async def measure(
    app: ASGIApp,
    api_key: str,
    requests: int,
    concurrency: int,
    store: Store | None = None,
    route: str = "trigger",
    label: str = "run",
) -> tuple[float, float, float, Counter[int]]:
    """Requests/s, CPU µs per request here and in the database's backends, and the statuses.

    For ``requests`` requests to ``route`` from ``concurrency`` clients;
    ``label`` keeps each measurement's request numbers (and so its new
    subscribers) apart from the others'.
    """
    path, body_of = ROUTES[route]
    bodies = iter([body_of(label, number) for number in range(requests)])
    statuses: Counter[int] = Counter()

    async def client() -> None:
        for body in bodies:
            status, _ = await call(app, "POST", path, body, api_key)
            statuses[status] += 1

    before = _backend_cpu(store)
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    # A backend that started during the run started at 0; one that ended is not counted.
    database = sum(seconds - before.get(pid, 0.0) for pid, seconds in _backend_cpu(store).items())
    return requests / wall, cpu / requests * 1e6, database / requests * 1e6, statuses


def _backend_cpu(store: Store | None) -> dict[int, float]:
    """CPU seconds used so far by each PostgreSQL backend serving the store (none for SQLite)."""
    return {pid: cpu_seconds(pid) for pid in store.backend_pids()} if store is not None else {}


async def run(
    which: str,
    api_key: str,
    requests: int,
    concurrencies: list[int],
    store: Store | None = None,
    route: str = "trigger",
) -> None:
    if which == "bare":
        from bench.bare_app import app
    else:
        from herald.app import create_app
        from herald.config import load_settings
        from herald.kit import tracing
        from herald.kit.heap import settle_heap

        tracing.configure()  # as `herald serve` does: on only when the OTEL_* variables ask
        app = create_app(load_settings(run_worker=False))
        settle_heap()  # as `herald serve` does
    async with app.router.lifespan_context(app):
        if which == "herald":
            steps = [{"template": {"type": "in_app", "content": "Hi {{payload.n}}"}}]
            body = json.dumps({"name": WORKFLOW, "active": True, "steps": steps}).encode()
            status, answer = await call(app, "POST", "/v1/workflows", body, api_key)
            if status != 201:
                raise RuntimeError(f"creating the workflow answered {status}: {answer[:300]!r}")
        await measure(app, api_key, min(requests, 2000), max(concurrencies), route=route, label="warm-up")
        for concurrency in concurrencies:
            rate, cpu_us, database_us, statuses = await measure(
                app, api_key, requests, concurrency, store, route, label=f"c{concurrency}"
            )
            database = f" + {database_us:4.0f} µs in the database" if which == "herald" and store is not None else ""
            print(
                f"{which:6s} concurrency {concurrency:3d}: {rate:7,.0f} req/s · {cpu_us:5.0f} µs CPU a request{database}"
                f" · statuses {dict(statuses)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--concurrency", default="1,32", help="comma list (default 1,32)")
    parser.add_argument(
        "--postgres", metavar="URL", help="admin URL of a PostgreSQL server on 127.0.0.1 (default: SQLite)"
    )
    parser.add_argument(
        "--route",
        choices=sorted(ROUTES),
        default="trigger",
        help="the route measured (default trigger; the bare endpoint only with trigger)",
    )
    args = parser.parse_args()
    concurrencies = [int(value) for value in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="herald-inprocess-") as folder:
        store = uvloop.run(Store.postgres(args.postgres)) if args.postgres else Store.sqlite(Path(folder))
        try:
            api_key = prepare_store(store.url)
            for which in ("bare", "herald") if args.route == "trigger" else ("herald",):
                uvloop.run(
                    run(
                        which,
                        api_key,
                        args.requests,
                        concurrencies,
                        store if store.kind == "postgres" else None,
                        args.route,
                    )
                )
        finally:
            uvloop.run(store.drop())


if __name__ == "__main__":
    main()
