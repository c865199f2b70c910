from __future__ import annotations

import io

import aiosmtplib

from herald.devtools.smtp import start
from tests.fixtures.server import free_port


async def test_dev_smtp_prints_what_it_receives() -> None:
    out = io.StringIO()
    port = free_port()
    controller, handler = start("127.0.0.1", port, out)
    try:
        await aiosmtplib.send(
            "From: a@example.com\r\nTo: b@example.com\r\nSubject: Hello there\r\n\r\nThe body\r\n",
            sender="a@example.com",
            recipients=["b@example.com"],
            hostname="127.0.0.1",
            port=port,
            start_tls=False,
        )
    finally:
        controller.stop()
    assert len(handler.received) == 1
    printed = out.getvalue()
    assert "Subject: Hello there" in printed
    assert "To:      b@example.com" in printed
    assert "The body" in printed
