"""``herald dev-smtp``: a local SMTP server that prints every email it receives.

Point a ``nodemailer`` integration at it (host 127.0.0.1, port 2525,
``ignoreTls: true``) to see what Herald sends without a real mail provider.
Nothing is relayed anywhere.
"""

from __future__ import annotations

import email
import email.policy
import logging
import sys
import threading
from typing import Any, TextIO

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import Envelope, Session


def describe(envelope: Envelope) -> str:
    """A short, readable summary of one received email."""
    message = email.message_from_bytes(envelope.content or b"", policy=email.policy.default)
    text = ""
    part = message.get_body(preferencelist=("plain", "html")) if message.is_multipart() else message
    if part is not None:
        text = part.get_content().strip()
    lines = [
        "─" * 60,
        f"From:    {message.get('From', envelope.mail_from)}",
        f"To:      {', '.join(envelope.rcpt_tos)}",
        f"Subject: {message.get('Subject', '')}",
        "",
        text[:2000],
    ]
    return "\n".join(lines)


class PrintingHandler:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.received: list[Envelope] = []

    async def handle_DATA(self, server: Any, session: Session, envelope: Envelope) -> str:
        self.received.append(envelope)
        print(describe(envelope), file=self.out, flush=True)
        return "250 Message accepted for delivery"


def start(host: str = "127.0.0.1", port: int = 2525, out: TextIO = sys.stdout) -> tuple[Controller, PrintingHandler]:
    handler = PrintingHandler(out)
    controller = Controller(handler, hostname=host, port=port)
    controller.start()
    return controller, handler


def serve_forever(host: str, port: int) -> None:
    # aiosmtpd logs every connection at INFO; the printed emails are what matters here.
    logging.getLogger("mail.log").setLevel(logging.WARNING)
    controller, _ = start(host, port)
    print(f"Herald dev SMTP server listening on {host}:{port}; emails are printed here, never relayed.", flush=True)
    print(
        'Use it with: {"providerId": "nodemailer", "channel": "email", "active": true, "credentials": '
        f'{{"host": "{host}", "port": "{port}", "from": "herald@example.com", "ignoreTls": true}}}}',
        flush=True,
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        controller.stop()
