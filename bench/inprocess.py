"""The trigger route's own CPU cost, with no server, network or worker in the way.

    python -m bench.inprocess [--requests 20000] [--concurrency 1,32]

Drives ``POST /v1/events/trigger`` by calling the ASGI app directly, from
``--concurrency`` clients in this process, against a fresh SQLite store with
no worker, and does the same with the framework's ceiling
(``bench/bare_app.py``). It prints requests/s and the CPU each request took.
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

ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]],
    Awaitable[None],
]
WORKFLOW = "inprocess"


def prepare_store(folder: Path) -> str:
    """A migrated SQLite store with an organization; returns the Development API key."""
    os.environ["HERALD_DATABASE_URL"] = f"sqlite:///{folder / 'herald.db'}"
    os.environ.setdefault("HERALD_LOG_LEVEL", "warning")
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


async def measure(app: ASGIApp, api_key: str, requests: int, concurrency: int) -> tuple[float, float, Counter[int]]:
    """Requests/s, CPU µs per request and the statuses, for ``requests`` triggers from ``concurrency`` clients."""
    bodies = iter(
        [json.dumps({"name": WORKFLOW, "to": f"sub-{i % 1000}", "payload": {"n": i}}).encode() for i in range(requests)]
    )
    statuses: Counter[int] = Counter()

    async def client() -> None:
        for body in bodies:
            status, _ = await call(app, "POST", "/v1/events/trigger", body, api_key)
            statuses[status] += 1

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return requests / wall, cpu / requests * 1e6, statuses


async def run(which: str, api_key: str, requests: int, concurrencies: list[int]) -> None:
    if which == "bare":
        from bench.bare_app import app
    else:
        from herald.app import create_app
        from herald.config import load_settings
        from herald.kit.heap import settle_heap

        app = create_app(load_settings(run_worker=False))
        settle_heap()  # as `herald serve` does
    async with app.router.lifespan_context(app):
        if which == "herald":
            steps = [{"template": {"type": "in_app", "content": "Hi {{payload.n}}"}}]
            body = json.dumps({"name": WORKFLOW, "active": True, "steps": steps}).encode()
            status, answer = await call(app, "POST", "/v1/workflows", body, api_key)
            if status != 201:
                raise RuntimeError(f"creating the workflow answered {status}: {answer[:300]!r}")
        await measure(app, api_key, min(requests, 2000), max(concurrencies))  # warm-up
        for concurrency in concurrencies:
            rate, cpu_us, statuses = await measure(app, api_key, requests, concurrency)
            print(
                f"{which:6s} concurrency {concurrency:3d}: {rate:7,.0f} req/s · {cpu_us:5.0f} µs CPU a request · statuses {dict(statuses)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--concurrency", default="1,32", help="comma list (default 1,32)")
    args = parser.parse_args()
    concurrencies = [int(value) for value in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="herald-inprocess-") as folder:
        api_key = prepare_store(Path(folder))
        for which in ("bare", "herald"):
            uvloop.run(run(which, api_key, args.requests, concurrencies))


if __name__ == "__main__":
    main()
