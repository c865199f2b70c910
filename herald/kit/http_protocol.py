"""uvicorn's httptools protocol with a bound on request heads.

httptools (llhttp) keeps a header's value until its line ends and uvicorn
keeps every header line of a head, with no limit on either: eight clients
sending 100 MB header values took an API process to 1.45 GB before any
middleware (or API key check) could see the request. uvicorn's own bound,
``h11_max_incomplete_event_size``, is h11's only, and h11 parses a head in
Python where httptools does it in C: a trigger's request cost 517 µs of
protocol in ``H11Protocol`` against 125 in ``HttpToolsProtocol`` and 133 in
this one (``python -m bench.http_protocol``, medians of nine turns, a busy
2-core machine, 2026-11-29).

:class:`HeadLimitedProtocol` counts the bytes of a head in progress as they
arrive and its header lines once it is whole:

- a head over :data:`MAX_HEAD_BYTES` or with more than :data:`MAX_HEADER_LINES`
  lines is answered 431 (Novu's error body) and its connection closed, before
  more of it is kept;
- a head that is not complete ``head_timeout`` seconds after its first byte
  (or after the connection opened) is closed: a client cannot hold a
  connection by sending its head a byte at a time.

Everything else is uvicorn's own ``HttpToolsProtocol``. It reads uvicorn's
internals (``headers``, ``url``, ``cycle``, ``send_400_response``) as uvicorn
0.54.0 and httptools 0.9.0 have them, the versions in requirements.lock
(``PINNED``): with others installed :func:`uvicorn_http_options` logs a
warning and serves with h11 and its own head limit (64 KB, no time limit),
slower but bounded, until this is checked against them.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from herald.kit.errors import error_body
from herald.kit.pinned import is_pinned
from herald.kit.responses import dumps

PINNED = {"uvicorn": "0.54.0", "httptools": "0.9.0"}
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADER_LINES = 100
HEAD_TOO_LARGE_MESSAGE = (
    f"The request's headers are larger than {MAX_HEAD_BYTES // 1024} KB or have more than {MAX_HEADER_LINES} lines"
)


class HeadTooLarge(Exception):
    """Raised from ``on_headers_complete``: httptools stops and uvicorn's ``send_400_response`` is called."""


class HeadLimitedProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` that refuses heads over 64 KB or 100 lines (431) and closes heads slower than ``head_timeout``."""

    head_timeout: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Whether what arrives is a head, and its bytes so far (with what followed it in the same reads).
        self.head_open = True
        self.head_bytes = 0
        self.head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.head_timer = self.loop.call_later(self.head_timeout, self.head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self.cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.head_open:
            self.head_bytes += len(data)
        super().data_received(data)
        if self.head_open and self.head_bytes and not self.transport.is_closing():
            # A head still in progress: httptools would keep all of it.
            if self.head_bytes > MAX_HEAD_BYTES:
                self.refuse_head()
            # Its time runs from here unless it already does (a head whole in one read, nearly
            # every head, never sets a timer).
            elif self.head_timer is None:
                self.head_timer = self.loop.call_later(self.head_timeout, self.head_timed_out)

    # Parser callbacks ----------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        self.head_open = False
        if self.head_timer is not None:
            self.cancel_head_timer()
        # uvicorn's on_header keeps each line in self.headers. Only a head whose reads came to more
        # than the limit can be over it: the sum is made for those alone.
        if len(self.headers) > MAX_HEADER_LINES or (
            self.head_bytes > MAX_HEAD_BYTES
            and len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers) > MAX_HEAD_BYTES
        ):
            raise HeadTooLarge
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # What arrives next is the next request's head.
        self.head_open = True
        self.head_bytes = 0

    # Refusals ------------------------------------------------------------------------------

    def send_400_response(self, msg: str) -> None:
        # Called while handling httptools' error, whose context is what a callback raised.
        error = sys.exc_info()[1]
        if error is not None and isinstance(error.__context__, HeadTooLarge):
            self.refuse_head()
            return
        super().send_400_response(msg)

    def refuse_head(self) -> None:
        """Answer 431 and close; only close when an earlier request's answer is being written."""
        self.cancel_head_timer()
        if self.cycle is None or self.cycle.response_complete:
            body = dumps(error_body(431, "", HEAD_TOO_LARGE_MESSAGE))
            self.transport.write(
                b"".join(
                    [
                        STATUS_LINE[431],
                        b"content-type: application/json\r\n",
                        b"content-length: %d\r\n" % len(body),
                        b"connection: close\r\n\r\n",
                        body,
                    ]
                )
            )
        self.transport.close()

    def head_timed_out(self) -> None:
        self.head_timer = None
        if not self.head_open or self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined head behind a request still being answered: its time starts after.
            self.head_timer = self.loop.call_later(self.head_timeout, self.head_timed_out)
            return
        self.transport.close()

    def cancel_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None


def uvicorn_http_options(head_timeout: float) -> dict[str, Any]:
    """How uvicorn serves HTTP (``herald serve``, and the tests' server): heads bounded, closed after ``head_timeout`` seconds."""
    if not is_pinned(
        PINNED,
        "herald.kit.http_protocol",
        "serving HTTP with h11 and its own 64 KB head limit (slower, no head timeout)",
    ):
        return {"http": "h11", "h11_max_incomplete_event_size": MAX_HEAD_BYTES}
    return {"http": type("HeraldHttpProtocol", (HeadLimitedProtocol,), {"head_timeout": head_timeout})}
