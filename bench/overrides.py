"""What the httpcore network backend override buys on the path it serves now: HTTP/2 provider requests (APNs).

    python -m bench.overrides [--requests 3000] [--concurrency 1,16] [--turns 3]

HTTP/1.1 provider requests go through aiohttp (herald/providers/http1.py); the
providers' httpx transport carries HTTP/2 alone (APNs, ``send_raw(...,
http2=True)``). This sends POSTs with a small JSON body over HTTP/2 with TLS to
a local server in a process of its own (tests/fixtures/peers.py's
``Http2Peer``, ALPN ``h2`` only, as Apple's), through Herald's
``OutboundTransport`` built two ways: httpcore's pool over httpcore's default
anyio network backend, or over Herald's asyncio one (kit/asyncio_network.py);
the outbound policy's check stays in front of both. The two take turns,
``--turns`` times, and it prints the client process's CPU per request (user plus
system) of each, best and median of the turns. (Until 2026-11-29 it also
measured a connection pool of Herald's own, which gained nothing here and was
removed: docs/performance.md.)
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from typing import Any

import httpcore
import httpx


def _serve(ready: Any, stop: Any) -> None:
    from tests.fixtures.peers import Http2Peer

    peer = Http2Peer()
    peer.route("POST", "/3/device/{token}", lambda request: _ok())
    peer.start()
    ready.send((peer.url, str(peer.tls.cert)))
    stop.wait()
    peer.stop()


def _ok() -> Any:
    from starlette.responses import Response

    return Response(status_code=200, headers={"apns-id": "bench"})


def transport(backend: str, cafile: str) -> httpx.AsyncHTTPTransport:
    import ssl

    from herald.kit.asyncio_network import AsyncioBackend
    from herald.kit.outbound import GuardedAsyncBackend, OutboundPolicy
    from herald.providers.http import OutboundTransport

    policy = OutboundPolicy.allowing(("127.0.0.0/8",))
    context = ssl.create_default_context(cafile=cafile)
    built = OutboundTransport(policy, verify=context, http2=True)
    inner = AsyncioBackend() if backend == "asyncio" else httpcore.AnyIOBackend()
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
    built._pool = httpcore.AsyncConnectionPool(
        ssl_context=context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        http1=True,
        http2=True,
        network_backend=GuardedAsyncBackend(policy, inner),
    )
    return built


async def measure(url: str, cafile: str, backend: str, requests: int, concurrency: int) -> float:
    """CPU µs a request, after a warm-up on the same connection."""
    body = b'{"aps":{"alert":{"title":"Hi","body":"A notification"}}}'
    async with httpx.AsyncClient(transport=transport(backend, cafile), base_url=url, trust_env=False) as client:
        counter = iter(range(requests + 200))

        async def one_client() -> None:
            for n in counter:
                response = await client.post(f"/3/device/token{n % 50}", content=body, headers={"apns-topic": "bench"})
                if response.status_code != 200 or response.http_version != "HTTP/2":
                    raise RuntimeError(f"answered {response.status_code} over {response.http_version}")

        for _ in range(200):  # warm-up: the connection and its TLS handshake
            await client.post("/3/device/warm", content=body)
        started = time.process_time()
        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        return (time.process_time() - started) / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    receiving, sending = multiprocessing.Pipe(duplex=False)
    stop = multiprocessing.Event()
    server = multiprocessing.Process(target=_serve, args=(sending, stop), daemon=True)
    server.start()
    url, cafile = receiving.recv()
    variants = ["anyio", "asyncio"]
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, httpcore {httpcore.__version__}")
    try:
        for concurrency in [int(value) for value in args.concurrency.split(",")]:
            figures: dict[str, list[float]] = {variant: [] for variant in variants}
            for _ in range(args.turns):
                for variant in variants:
                    figures[variant].append(asyncio.run(measure(url, cafile, variant, args.requests, concurrency)))
            for backend, values in figures.items():
                print(
                    f"concurrency {concurrency:3d} · backend {backend:7s}: "
                    f"best {min(values):6.1f} µs, median {statistics.median(values):6.1f} µs CPU a request"
                )
    finally:
        stop.set()
        server.join(timeout=10)


if __name__ == "__main__":
    main()
