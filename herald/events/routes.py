from __future__ import annotations

from fastapi import APIRouter, Request

from herald.bridge import client as bridge_client
from herald.bridge import stateless
from herald.bridge.service import signing_key
from herald.events import service
from herald.events.schemas import (
    BroadcastEventRequest,
    BulkTriggerEventRequest,
    TriggerEventRequest,
    TriggerEventResponse,
)
from herald.kit.auth import API_KEY_SECURITY, Principal, PrincipalDep, authenticate
from herald.kit.db import SessionDep, session_scope
from herald.kit.groupcommit import GroupCommit
from herald.kit.responses import JSONResponse
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, RequestRoute, json_body_openapi, parse_json_body

router = APIRouter(prefix="/v1/events", tags=["Events"], responses=ERROR_RESPONSES)


async def trigger_event(request: Request) -> JSONResponse:
    """Start a workflow run for the recipients in ``to``.

    The trigger is recorded durably before the answer; ``status`` says whether
    it will run (``processed``) or why not. A ``transactionId`` already used in
    the environment is not run again (``status: error``).
    """
    # The hot path: the caller and the body are taken here rather than as FastAPI
    # parameters (dependency solving cost more than the rest of the route), with
    # the same checks and the same error answers.
    principal = await authenticate(request)
    body = parse_json_body(TriggerEventRequest, await request.body())
    service.check_recipient_count(body.to, request.app.state.settings.max_recipients)
    if body.bridgeUrl is not None:
        return await _trigger_stateless(request, principal, body)
    # Concurrent triggers are written together (herald/kit/groupcommit.py).
    recorder: GroupCommit[service.Trigger, service.TriggerResult | Exception] = request.app.state.trigger_recorder
    result = await recorder.submit(service.Trigger(principal, body, box=request.app.state.secret_box))
    if isinstance(result, Exception):
        raise result
    return JSONResponse({"data": result.as_response()}, status_code=201)


async def _trigger_stateless(request: Request, principal: Principal, body: TriggerEventRequest) -> JSONResponse:
    """A trigger naming its bridge: the workflow is discovered there, then the trigger recorded with it.

    Two transactions: none is held open while the bridge is asked (up to its timeout).
    """
    state = request.app.state
    async for session in session_scope(state.sessionmaker):
        secret_key = await signing_key(session, principal.environment_id, state.secret_box)
        synced_id = await stateless.synced_workflow_id(session, principal, body.name)
    workflow = await stateless.target(
        principal, body, http=bridge_client.process_client(state), secret_key=secret_key, synced_id=synced_id
    )
    async for session in session_scope(state.sessionmaker):
        result = await service.trigger_event(session, principal, body, box=state.secret_box, workflow=workflow)
    return JSONResponse({"data": result.as_response()}, status_code=201)


# Added first, so it is matched first: the hot path (see RequestRoute).
router.add_api_route(
    "/trigger",
    trigger_event,
    methods=["POST"],
    status_code=201,
    response_model=DataResponse[TriggerEventResponse],
    summary="Trigger event",
    openapi_extra={**json_body_openapi(TriggerEventRequest), **API_KEY_SECURITY},
    route_class_override=RequestRoute,
)


@router.post(
    "/trigger/bulk",
    status_code=201,
    response_model=DataResponse[list[TriggerEventResponse]],
    summary="Trigger up to 100 events",
)
async def trigger_bulk(
    body: BulkTriggerEventRequest, request: Request, session: SessionDep, principal: PrincipalDep
) -> dict:
    # A request-shape limit, like the 100 events: one event over it refuses the whole request.
    limit = request.app.state.settings.max_recipients
    for index, event in enumerate(body.events):
        service.check_recipient_count(event.to, limit, f"events.{index}.to")
    results = await service.trigger_bulk(session, principal, body.events, box=request.app.state.secret_box)
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
