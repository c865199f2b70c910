"""The framework's ceiling: FastAPI answering the trigger route with no store behind it.

It parses the same body into the same pydantic model as Herald's
``POST /v1/events/trigger``, renders the same response model with the same
JSON response class, and answers 201. Herald's trigger throughput is reported
as a fraction of what this endpoint does on the same server and machine.

Served by the harness as ``bench.bare_app:app`` (uvicorn or granian).
"""

from __future__ import annotations

from fastapi import FastAPI

from herald.events.schemas import TriggerEventRequest, TriggerEventResponse
from herald.kit.ids import new_transaction_id
from herald.kit.responses import JSONResponse
from herald.kit.schemas import DataResponse

app = FastAPI(title="bare trigger endpoint", default_response_class=JSONResponse, openapi_url=None, docs_url=None)


@app.get("/v1/health-check")
async def health_check() -> dict:
    return {"data": {"status": "ok"}}


@app.post("/v1/events/trigger", status_code=201, response_model=DataResponse[TriggerEventResponse])
async def trigger_event(body: TriggerEventRequest) -> dict:
    return {
        "data": {
            "acknowledged": True,
            "status": "processed",
            "transactionId": body.transactionId or new_transaction_id(),
        }
    }
