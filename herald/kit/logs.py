"""Logging that never carries a secret.

The HTTP client logs every request at INFO with its full URL ("HTTP Request:
POST https://hooks.slack.com/services/T000/B000/XXXX ..."), and a webhook's
URL is its credential; its transport layers (httpcore, h2, hpack) log
connections, frames and headers at DEBUG, Authorization included. Herald
records what it sent in the message and the execution details instead, so
these loggers are kept to warnings whatever ``HERALD_LOG_LEVEL`` is.
"""

from __future__ import annotations

import logging

HTTP_CLIENT_LOGGERS = ("httpx", "httpcore", "h2", "hpack")


def quiet_http_client_logs() -> None:
    """Keep the HTTP client's own request lines (URLs, headers) out of the logs."""
    for name in HTTP_CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
