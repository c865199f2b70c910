"""``GET /v1/health-check``: ready when the store answers; 503 otherwise."""

from __future__ import annotations

from fastapi import APIRouter, Request
from sqlalchemy import text

from herald.kit.errors import ServiceUnavailableError
from herald.kit.schemas import DataResponse, Schema

router = APIRouter(tags=["Health"])


class HealthStatus(Schema):
    status: str
    database: str


@router.get("/v1/health-check", response_model=DataResponse[HealthStatus], responses={503: {"description": "The store does not answer"}})
async def health_check(request: Request) -> DataResponse[HealthStatus]:
    try:
        async with request.app.state.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except Exception as exc:
        raise ServiceUnavailableError(f"The database does not answer: {type(exc).__name__}") from exc
    return DataResponse(data=HealthStatus(status="ok", database="up"))
