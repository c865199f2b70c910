"""Base pydantic models and the response envelopes.

Field names are the wire names of Novu's API (``_id``, ``_environmentId``,
``providerId``); Python attributes use snake_case with the wire name as alias.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, ValidationError

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class Schema(BaseModel):
    """Response and request models: populated by either name, written by alias."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True, from_attributes=True)


class RequestSchema(Schema):
    """Request bodies keep unknown keys out of the way instead of failing on them.

    Novu's server does not reject unknown keys; SDKs send fields that not every
    server version knows, so refusing them would break clients.
    """

    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class DataResponse(Schema, Generic[T]):
    """``{"data": ...}``: the envelope of every successful answer."""

    data: T


class PaginatedResponse(Schema, Generic[T]):
    data: list[T]
    page: int
    pageSize: int
    totalCount: int
    hasMore: bool


def _is_none(value: object) -> bool:
    return value is None


def optional_field(alias: str | None = None, **kwargs: Any) -> Any:
    """An optional response field that is left out when unset, not sent as null.

    The spec types such fields as plain strings (``deletedAt: string``, not
    ``string | null``), so absent beats null for clients that validate types.
    """
    return Field(default=None, alias=alias, exclude_if=_is_none, **kwargs)


class ErrorResponse(Schema):
    """Novu's error body."""

    model_config = ConfigDict(extra="allow")

    statusCode: int
    timestamp: str
    path: str
    message: Any
    error: str = optional_field()
    errors: dict[str, Any] = optional_field()
    errorId: str = optional_field()


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": description}
    for code, description in {
        400: "Bad request",
        401: "Missing or unknown API key",
        404: "Not found",
        409: "Conflict",
        413: "Request body too large",
        422: "Validation failed",
        429: "Rate limit exceeded (Retry-After, RateLimit-* headers)",
    }.items()
}


def compact(values: dict[str, Any]) -> dict[str, Any]:
    """Drop keys whose value is None, so optional fields are left unset (and unsent)."""
    return {key: value for key, value in values.items() if value is not None}


def parse_json_body(model: type[M], body: bytes) -> M:
    """The request body as ``model``, parsed and validated in one pass by pydantic-core.

    For routes on the hot path, which take the body themselves instead of as
    a FastAPI parameter. Failures raise the RequestValidationError FastAPI
    raises for a body parameter, so they answer the same 400 (not JSON) or
    422 (per-field errors).
    """
    if not body:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise RequestValidationError([{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]) from None


class RequestRoute(APIRoute):
    """A route whose endpoint takes the ``Request`` and returns the ``Response`` itself.

    FastAPI's own handler solves the endpoint's parameters and validates and
    serializes what it returns. An endpoint on the hot path that
    authenticates, parses (:func:`parse_json_body`) and answers by itself
    needs none of that; on the trigger route, cProfile put that machinery at
    about a tenth of the request's CPU. The route is still declared as an ``APIRoute``: the
    OpenAPI document shows its body, answers and security as declared, and
    errors it raises get the same handlers as everywhere else. One without
    path parameters is answered by ``herald.app.HeraldApp`` before FastAPI's
    routing (``kit.asgi.DirectRoutes``).
    """

    def get_route_handler(self) -> Any:
        return self.endpoint


def json_body_openapi(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of a route that takes its body with :func:`parse_json_body`."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}},
        }
    }
