"""Logging that never carries a secret.

The HTTP client logs every request at INFO with its full URL ("HTTP Request:
POST https://hooks.slack.com/services/T000/B000/XXXX ..."), and a webhook's
URL is its credential; its transport layers (httpcore, h2, hpack) log
connections, frames and headers at DEBUG, Authorization included. Herald
records what it sent in the message and the execution details instead, so
these loggers are kept to warnings whatever ``HERALD_LOG_LEVEL`` is.

The server logs each websocket it accepts at INFO with the path and query
("WebSocket /socket.io/?EIO=4&transport=websocket&token=eyJ..."), and the
Inbox's socket carries the subscriber's session token in the query, as
@novu/js sends it: those values are masked in the server's lines.
"""

from __future__ import annotations

import logging
import re
from typing import Any

HTTP_CLIENT_LOGGERS = ("httpx", "httpcore", "h2", "hpack")


def quiet_http_client_logs() -> None:
    """Keep the HTTP client's own request lines (URLs, headers) out of the logs."""
    for name in HTTP_CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


# The server's own loggers: the websocket lines ("uvicorn.error") and, when turned on, the access lines.
SERVER_LOGGERS = ("uvicorn.error", "uvicorn.access")
# Query parameters that carry a credential: the Inbox socket's session token, and the names other clients use.
_SECRET_IN_QUERY = re.compile(r"(?i)([?&](?:token|access_token|apikey|api_key|subscriberhash)=)[^&\s\"]*")
MASK = "***"


def mask_query_secrets(text: str) -> str:
    """``text`` with the values of credential query parameters replaced by ``***``."""
    return _SECRET_IN_QUERY.sub(lambda match: match.group(1) + MASK, text)


class QuerySecretsFilter(logging.Filter):
    """Masks credentials in the query of the URLs a record carries, in its message and its arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = mask_query_secrets(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_masked(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _masked(value) for key, value in record.args.items()}
        return True


def _masked(value: Any) -> Any:
    return mask_query_secrets(value) if isinstance(value, str) else value


def mask_server_log_secrets() -> None:
    """Put :class:`QuerySecretsFilter` on the server's loggers (once; uvicorn's logging set-up keeps it)."""
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, QuerySecretsFilter) for existing in logger.filters):
            logger.addFilter(QuerySecretsFilter())
