"""What parsing a trigger's request costs in each HTTP protocol uvicorn could serve it with.

    python -m bench.http_protocol [--requests 20000] [--turns 9]

Feeds one trigger request (the head an SDK sends and a small JSON body),
again and again on one keep-alive connection, to uvicorn's
``HttpToolsProtocol``, Herald's :class:`herald.kit.http_protocol.HeadLimitedProtocol`
(``herald serve``'s) and uvicorn's ``H11Protocol``, each with an app that reads
the body and answers 201, over a transport that writes nowhere: what the
protocol adds per request and no network. Prints the median of ``--turns``
turns in µs a request. h11's own head limit (``h11_max_incomplete_event_size``)
was the alternative to the head limits of herald/kit/http_protocol.py.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from herald.kit.http_protocol import uvicorn_http_options

BODY = b'{"name":"order-shipped","to":"subscriber-1","payload":{"order":"A-1"}}'
REQUEST = (
    b"POST /v1/events/trigger HTTP/1.1\r\nHost: 127.0.0.1:3000\r\nUser-Agent: python-httpx/0.27\r\n"
    b"Accept: */*\r\nAccept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
    b"Authorization: ApiKey 0123456789abcdef0123456789abcdef\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n" % len(BODY)
) + BODY


class NullTransport:
    def __init__(self) -> None:
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 3000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"data":{}}'})


async def turn(protocol_class: type[asyncio.Protocol], requests: int) -> float:
    """µs a request on one connection."""
    config = Config(app, log_level="warning", access_log=False)
    config.load()
    protocol = protocol_class(config=config, server_state=ServerState(), app_state={})  # type: ignore[call-arg]
    protocol.connection_made(NullTransport())  # type: ignore[arg-type]
    started = time.perf_counter()
    for _ in range(requests):
        protocol.data_received(REQUEST)  # type: ignore[attr-defined]
        # The request's task reads the body and answers.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    return (time.perf_counter() - started) / requests * 1e6


async def main(requests: int, turns: int) -> None:
    protocols: list[type[asyncio.Protocol]] = [HttpToolsProtocol, uvicorn_http_options(30.0)["http"], H11Protocol]
    results: dict[str, list[float]] = {protocol.__name__: [] for protocol in protocols}
    for _ in range(turns):
        for protocol in protocols:
            results[protocol.__name__].append(await turn(protocol, requests))
    for name, values in results.items():
        print(f"{name:20} {statistics.median(values):7.1f} µs a request (median of {turns})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--turns", type=int, default=9)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.requests, arguments.turns))
