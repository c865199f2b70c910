"""``GET /v1/health-check``: ready when the store answers and its schema is the one the code needs; 503 otherwise."""

from __future__ import annotations

from fastapi import APIRouter, Request
from sqlalchemy import text

from herald.kit.errors import ServiceUnavailableError
from herald.kit.schemas import DataResponse, Schema
from herald.migrations import read_revision, schema_mismatch

router = APIRouter(tags=["Health"])


class HealthStatus(Schema):
    status: str
    database: str


@router.get(
    "/v1/health-check",
    response_model=DataResponse[HealthStatus],
    responses={503: {"description": "The store does not answer, or has no schema or an older one than the code needs"}},
)
async def health_check(request: Request) -> DataResponse[HealthStatus]:
    state = request.app.state
    # Polled often: the schema's revision is read only until it is found at the
    # head (a running service never sees it go back), then the check is SELECT 1.
    at_head = state.schema_at_head
    try:
        async with state.engine.connect() as connection:
            if at_head:
                await connection.execute(text("SELECT 1"))
            else:
                revision = await connection.run_sync(read_revision)
    except Exception as exc:
        raise ServiceUnavailableError(f"The database does not answer: {type(exc).__name__}") from exc
    if not at_head:
        mismatch = schema_mismatch(revision)
        if mismatch is not None:
            raise ServiceUnavailableError(f"The database {mismatch}")
        state.schema_at_head = True
    return DataResponse(data=HealthStatus(status="ok", database="up"))
