"""The error envelope: every 4xx and 5xx answers in Novu's shape.

``{statusCode, timestamp, path, message, error}``, plus ``errors`` for
validation failures (422) and ``errorId`` for unexpected failures (500), so
SDKs that parse Novu's errors parse ours.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from herald.kit.responses import JSONResponse
from herald.kit.time import isoformat, utcnow

logger = logging.getLogger("herald.errors")

INTERNAL_ERROR_MESSAGE = "Internal server error, contact support and provide them with the errorId"


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


class NotFoundError(HeraldError):
    status_code = 404


class ConflictError(HeraldError):
    status_code = 409


class PayloadTooLargeError(HeraldError):
    status_code = 413


class UnprocessableError(HeraldError):
    status_code = 422


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
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _is_malformed_json(errors: Sequence[dict[str, Any]]) -> bool:
    return any(error.get("type") == "json_invalid" for error in errors)


async def handle_herald_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HeraldError)
    return error_response(exc.status_code, request.url.path, exc.message, headers=exc.headers, **exc.extra)


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
    error_id = str(uuid.uuid4())
    logger.error(
        "unexpected error errorId=%s method=%s path=%s", error_id, request.method, request.url.path, exc_info=exc
    )
    return error_response(500, request.url.path, INTERNAL_ERROR_MESSAGE, errorId=error_id)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HeraldError, handle_herald_error)
    app.add_exception_handler(RequestValidationError, handle_validation_error)
    app.add_exception_handler(StarletteHTTPException, handle_http_exception)
    app.add_exception_handler(Exception, handle_unexpected_error)
