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

import json
import logging
import re
from datetime import UTC, datetime
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


# HERALD_LOG_FORMAT: text for a terminal, json for a log pipeline.
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a line carries besides its message: ``extra={"fields": {...}}``, without the empty ones."""
    fields = getattr(record, "fields", None)
    if not isinstance(fields, dict):
        return {}
    return {key: value for key, value in fields.items() if value is not None}


class TextFormatter(logging.Formatter):
    """``time level logger message``, then the line's fields as ``key=value``."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        line = super().formatMessage(record)
        fields = fields_of(record)
        if not fields:
            return line
        return line + " " + " ".join(f"{key}={value}" for key, value in fields.items())


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, the line's fields,
    and ``exception`` with the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in fields_of(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(level: str, log_format: str = "text") -> None:
    """The process's one log handler (standard error), in ``log_format``; the server's loggers go through it too."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    # Python's warnings become log lines, in the same format.
    logging.captureWarnings(True)
    # No format reads them, and a record looks each one up (the access log writes a record a request).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging.logAsyncioTasks = False
    quiet_http_client_logs()
    mask_server_log_secrets()
