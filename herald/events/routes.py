from __future__ import annotations

from fastapi import APIRouter, Request

from herald.events import service
from herald.events.schemas import (
    BroadcastEventRequest,
    BulkTriggerEventRequest,
    TriggerEventRequest,
    TriggerEventResponse,
)
from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.groupcommit import GroupCommit
from herald.kit.schemas import ERROR_RESPONSES, DataResponse

router = APIRouter(prefix="/v1/events", tags=["Events"], responses=ERROR_RESPONSES)


@router.post("/trigger", status_code=201, response_model=DataResponse[TriggerEventResponse], summary="Trigger event")
async def trigger_event(body: TriggerEventRequest, principal: PrincipalDep, request: Request) -> dict:
    """Start a workflow run for the recipients in ``to``.

    The trigger is recorded durably before the answer; ``status`` says whether
    it will run (``processed``) or why not. A ``transactionId`` already used in
    the environment is not run again (``status: error``).
    """
    # Concurrent triggers are written together (herald/kit/groupcommit.py).
    recorder: GroupCommit[service.Trigger, service.TriggerResult | Exception] = request.app.state.trigger_recorder
    result = await recorder.submit(service.Trigger(principal, body))
    if isinstance(result, Exception):
        raise result
    return {"data": result.as_response()}


@router.post(
    "/trigger/bulk",
    status_code=201,
    response_model=DataResponse[list[TriggerEventResponse]],
    summary="Trigger up to 100 events",
)
async def trigger_bulk(
    body: BulkTriggerEventRequest, session: SessionDep, principal: PrincipalDep
) -> dict:
    results = await service.trigger_bulk(session, principal, body.events)
    return {"data": [result.as_response() for result in results]}


@router.post(
    "/trigger/broadcast",
    status_code=201,
    response_model=DataResponse[TriggerEventResponse],
    summary="Trigger an event for every subscriber",
)
async def trigger_broadcast(
    body: BroadcastEventRequest, session: SessionDep, principal: PrincipalDep
) -> dict:
    result = await service.trigger_event(session, principal, body, broadcast=True)
    return {"data": result.as_response()}


@router.delete(
    "/trigger/{transactionId}", response_model=DataResponse[bool], summary="Cancel a triggered event's pending steps"
)
async def cancel_triggered_event(transactionId: str, session: SessionDep, principal: PrincipalDep) -> dict:
    return {"data": await service.cancel_transaction(session, principal, transactionId)}
