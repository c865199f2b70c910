"""Context models, named as Novu's context DTOs."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from herald.kit.schemas import RequestSchema, Schema

# Novu's context type and id: letters, digits, hyphens and underscores (and, for
# the id, dots, colons and @); neither may be empty. A key is "type:id".
CONTEXT_TYPE_PATTERN = r"^[a-zA-Z0-9_-]+$"
CONTEXT_ID_PATTERN = r"^[a-zA-Z0-9_.:@-]+$"
MAX_CONTEXT_PART = 100


class ContextEntity(Schema):
    """``GetContextResponseDto``."""

    type: str
    id: str
    data: dict[str, Any]
    createdAt: str
    updatedAt: str


class ContextList(Schema):
    data: list[ContextEntity]
    next: str | None
    previous: str | None
    totalCount: int
    totalCountCapped: bool


class CreateContextRequest(RequestSchema):
    type: str = Field(min_length=1, max_length=MAX_CONTEXT_PART, pattern=CONTEXT_TYPE_PATTERN)
    id: str = Field(min_length=1, max_length=MAX_CONTEXT_PART, pattern=CONTEXT_ID_PATTERN)
    data: dict[str, Any] = Field(default_factory=dict)


class UpdateContextRequest(RequestSchema):
    data: dict[str, Any]
