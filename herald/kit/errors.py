"""The error envelope: every 4xx and 5xx answers in Novu's shape.

``{statusCode, timestamp, path, message, error}``, plus ``errors`` for
validation failures (422) and ``errorId`` for unexpected failures (500), so
SDKs that parse Novu's errors parse ours.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterable, Sequence
from http import HTTPStatus
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from herald.kit.responses import JSONResponse
from herald.kit.time import isoformat, utcnow

logger = logging.getLogger("herald.errors")

INTERNAL_ERROR_MESSAGE = "Internal server error, contact support and provide them with the errorId"
STORE_UNAVAILABLE_MESSAGE = "The database is not reachable at the moment; retry the request shortly"
# Seconds a client should wait before retrying a request the store could not take.
STORE_RETRY_AFTER = "1"

# Errors that say the store could not be reached or is restarting, rather than
# that the request or the code is wrong. Connection errors from the pool come
# raw (asyncpg raises ConnectionRefusedError on connect); errors on a live
# connection come wrapped by SQLAlchemy, which marks them connection_invalidated.
_UNREACHABLE = (
    ConnectionError,
    TimeoutError,
    socket.gaierror,
    sa_exc.TimeoutError,  # the pool had no connection to give within its timeout
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,  # starting up or shutting down
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
    asyncpg.ConnectionDoesNotExistError,
)


class HeraldError(Exception):
    """An error with an HTTP status that the caller can act on."""

    status_code = 400

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code
        self.headers = headers
        self.extra = extra


class BadRequestError(HeraldError):
    status_code = 400


class UnauthorizedError(HeraldError):
    status_code = 401


class ForbiddenError(HeraldError):
    """The caller is known but may not do this (a role, a protected environment, a missing CSRF token)."""

    status_code = 403


class TooManyRequestsError(HeraldError):
    status_code = 429


class NotFoundError(HeraldError):
    status_code = 404


class ConflictError(HeraldError):
    status_code = 409


class PayloadTooLargeError(HeraldError):
    status_code = 413


class UnprocessableError(HeraldError):
    status_code = 422


class MisconfiguredError(HeraldError):
    """The server cannot answer as set up (a 500 whose message tells the operator what to fix)."""

    status_code = 500


class ServiceUnavailableError(HeraldError):
    status_code = 503


class ValidationFailed(HeraldError):
    """A 422 with per-field messages, raised by services for rules pydantic cannot express."""

    status_code = 422

    def __init__(self, errors: dict[str, dict[str, Any]], message: str = "Validation Error") -> None:
        super().__init__(message, errors=errors)

    @classmethod
    def field(cls, field: str, message: str, value: Any = None) -> ValidationFailed:
        return cls({field: {"messages": [message], "value": value}})


def error_body(status_code: int, path: str, message: Any, **extra: Any) -> dict[str, Any]:
    """Novu's error body. A 422 always carries ``errors`` (Novu's SDKs require it on
    every 422): one without field errors names its message under ``general``."""
    try:
        reason = HTTPStatus(status_code).phrase
    except ValueError:
        reason = "Error"
    body: dict[str, Any] = {
        "statusCode": status_code,
        "timestamp": isoformat(utcnow()),
        "path": path,
        "message": message,
        "error": reason,
    }
    body.update(extra)
    if status_code == 422 and "errors" not in body:
        body["errors"] = {"general": {"messages": [message], "value": None}}
    return body


def error_response(
    status_code: int,
    path: str,
    message: Any,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    return JSONResponse(error_body(status_code, path, message, **extra), status_code=status_code, headers=headers)


# Segments pydantic adds to a location to name the member of a union it tried.
_UNION_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "function-after", "function-before"}


def _field_name(loc: Sequence[Any]) -> str:
    parts: list[str] = []
    for part in loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc:
        if isinstance(part, int):
            parts.append(str(part))
            continue
        text = str(part)
        if text in _UNION_TAGS or "[" in text or "(" in text:
            continue
        parts.append(text)
    return ".".join(parts) or "general"


def _message(field: str, error: dict[str, Any]) -> str:
    if error.get("type") == "missing":
        return f"{field} should not be null or undefined"
    text = str(error.get("msg", "is invalid"))
    return f"{field}: {text[0].lower() + text[1:] if text else text}"


def validation_errors(raw_errors: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    errors: dict[str, dict[str, Any]] = {}
    for error in raw_errors:
        field = _field_name(error.get("loc", ()))
        entry = errors.setdefault(field, {"messages": [], "value": None})
        message = _message(field, error)
        if message not in entry["messages"]:
            entry["messages"].append(message)
        if error.get("type") != "missing" and entry["value"] is None:
            entry["value"] = _jsonable(error.get("input"))
    return errors


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (bytes, bytearray)):  # a body that is not JSON: shown as the text it is
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _is_malformed_json(errors: Sequence[dict[str, Any]]) -> bool:
    return any(error.get("type") == "json_invalid" for error in errors)


def is_store_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) means the database could not be reached.

    Such a failure is the caller's to retry, so it answers 503 with
    ``Retry-After``, not a 500 that reads like a bug. Anything else stays a 500.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _UNREACHABLE):
            return True
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, sa_exc.OperationalError) and "database is locked" in str(current):
            return True  # SQLite's busy timeout ran out behind another writer
        current = current.__cause__ or current.__context__
    return False


def store_unavailable_response(path: str, exc: BaseException) -> JSONResponse:
    logger.warning("the database is unavailable (%s: %s); answered 503 on %s", type(exc).__name__, exc, path)
    return error_response(503, path, STORE_UNAVAILABLE_MESSAGE, headers={"Retry-After": STORE_RETRY_AFTER})


def internal_error_response(path: str, method: str, exc: BaseException) -> JSONResponse:
    """A 500 whose ``errorId`` is also in the log line, with the traceback."""
    error_id = str(uuid.uuid4())
    logger.error("unexpected error errorId=%s method=%s path=%s", error_id, method, path, exc_info=exc)
    return error_response(500, path, INTERNAL_ERROR_MESSAGE, errorId=error_id)


async def handle_herald_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HeraldError)
    extra = exc.extra
    if exc.status_code == 500:
        # The operator's to fix: logged with the errorId the caller sees, without a traceback.
        extra = {**extra, "errorId": str(uuid.uuid4())}
        logger.error("%s errorId=%s method=%s path=%s", exc.message, extra["errorId"], request.method, request.url.path)
    return error_response(exc.status_code, request.url.path, exc.message, headers=exc.headers, **extra)


async def handle_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if _is_malformed_json(errors):
        detail = next(e for e in errors if e.get("type") == "json_invalid")
        reason = (detail.get("ctx") or {}).get("error", "invalid JSON")
        return error_response(400, request.url.path, f"Request body is not valid JSON: {reason}")
    return error_response(422, request.url.path, "Validation Error", errors=validation_errors(errors))


async def handle_http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    message = exc.detail
    if exc.status_code == 404 and message == "Not Found":
        message = f"Cannot {request.method} {request.url.path}"
    return error_response(exc.status_code, request.url.path, message, headers=getattr(exc, "headers", None))


async def handle_unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    if is_store_unavailable(exc):
        return store_unavailable_response(request.url.path, exc)
    return internal_error_response(request.url.path, request.method, exc)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HeraldError, handle_herald_error)
    app.add_exception_handler(RequestValidationError, handle_validation_error)
    app.add_exception_handler(StarletteHTTPException, handle_http_exception)
    # Store errors are answered where they are raised: an outage is logged as
    # one line per request, not one traceback. Anything else a route raises is
    # answered by herald.kit.asgi.LastResortMiddleware, outside the middlewares.
    for store_error in (*_UNREACHABLE, sa_exc.DBAPIError, asyncpg.PostgresError, asyncpg.InterfaceError):
        app.add_exception_handler(store_error, handle_unexpected_error)
