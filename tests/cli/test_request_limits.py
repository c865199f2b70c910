"""What a client may send before Herald reads its request, against a real ``herald serve``.

Raw sockets, as a client that does not play by the rules would send: a head
(request line and headers) over 64 KB or 100 lines is answered 431 and its
connection closed; a head not complete in ``HERALD_HEAD_TIMEOUT_SECONDS`` is
closed; a body declared larger than ``HERALD_MAX_BODY`` is answered 413
before it is sent. Each exchange waits at most ``WAIT`` seconds, the bound
of a test that would otherwise hang on a server that keeps waiting.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fixtures.processes import HeraldProcesses

WAIT = 20.0
HEAD = b"GET /v1/health-check HTTP/1.1\r\nHost: herald\r\n"


@pytest.fixture(scope="module")
async def address(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, int]]:
    root: Path = tmp_path_factory.mktemp("request-limits")
    herald = HeraldProcesses(
        database_url=f"sqlite:///{root / 'herald.db'}", data_dir=root / "data", log_dir=root / "logs"
    )
    herald.migrate()
    try:
        # A short head timeout, so its test waits two seconds rather than thirty (not shorter: an event
        # loop held up that long on a busy machine could close a head that came whole). Starting may be slow
        # on a busy machine too.
        process = await herald.serve(timeout=120, HERALD_HEAD_TIMEOUT_SECONDS="2")
        assert process.url is not None
        host, port = process.url.removeprefix("http://").split(":")
        yield host, int(port)
    finally:
        herald.stop_all()


def exchange(address: tuple[str, int], data: bytes) -> bytes:
    """Send ``data``, then read until the server closes the connection: all it answered."""
    with socket.create_connection(address, timeout=WAIT) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we sent: what it answered first is still to be read
        received = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return received
            except TimeoutError:
                raise AssertionError(
                    f"the server kept the connection open {WAIT:g} s; it answered {received[:200]!r}"
                ) from None
            if not chunk:
                return received
            received += chunk


def status_and_body(answer: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def test_a_head_over_64_kb_is_answered_431_and_closed(address: tuple[str, int]) -> None:
    # Still going: no end of line, no end of head. httptools would keep it all.
    status, body = status_and_body(exchange(address, HEAD + b"X-Filler: " + b"a" * 70_000))
    assert status == 431
    assert body["statusCode"] == 431
    assert "64 KB" in str(body["message"])


def test_a_whole_head_over_64_kb_sent_at_once_is_answered_431(address: tuple[str, int]) -> None:
    lines = b"".join(b"X-Filler-%d: %s\r\n" % (number, b"a" * 8000) for number in range(9))
    status, _ = status_and_body(exchange(address, HEAD + lines + b"\r\n"))
    assert status == 431


def test_more_than_100_header_lines_are_answered_431(address: tuple[str, int]) -> None:
    lines = b"".join(b"X-Line-%d: 1\r\n" % number for number in range(100))
    status, body = status_and_body(exchange(address, HEAD + lines + b"\r\n"))
    assert status == 431
    assert "100 lines" in str(body["message"])


def test_a_head_of_100_lines_under_64_kb_is_served(address: tuple[str, int]) -> None:
    # Host, 98 more and Connection: 100 lines, about 60 KB.
    lines = b"".join(b"X-Line-%d: %s\r\n" % (number, b"a" * 600) for number in range(98))
    answer = exchange(address, HEAD + lines + b"Connection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_a_head_not_complete_in_time_is_closed(address: tuple[str, int]) -> None:
    assert exchange(address, HEAD) == b""


def test_a_connection_that_sends_nothing_is_closed(address: tuple[str, int]) -> None:
    assert exchange(address, b"") == b""


def test_a_body_declared_over_the_max_body_is_refused_before_it_is_sent(address: tuple[str, int]) -> None:
    # HERALD_MAX_BODY's default, 1 MB, and one byte more; the body itself never comes.
    head = (
        b"POST /v1/events/trigger HTTP/1.1\r\nHost: herald\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (1024 * 1024 + 1)
    )
    status, body = status_and_body(exchange(address, head))
    assert status == 413
    assert body["message"] == "Request body is larger than the limit of 1024 KB for this route"
