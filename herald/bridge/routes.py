"""Novu's bridge routes: /v1/bridge/sync (what ``npx novu sync`` calls), /status, /validate, /diff, /controls and /preview."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import APIRouter, Path, Query, Request

from herald.bridge import client, controls, service
from herald.bridge.schemas import (
    BridgePreviewRequest,
    ControlValuesRequest,
    SyncRequest,
    ValidateRequest,
    ValidateResponse,
)
from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.schemas import ERROR_RESPONSES, DataResponse
from herald.workflows.schemas import Workflow as WorkflowSchema

router = APIRouter(prefix="/v1/bridge", tags=["Bridge"], responses=ERROR_RESPONSES)


def bridge_http(request: Request) -> httpx.AsyncClient:
    return client.process_client(request.app.state)


class SyncedWorkflow(WorkflowSchema):
    """A stored workflow with Novu's ``type`` and ``origin``: BRIDGE and external for a synced one."""

    type: str
    origin: str


@router.post(
    "/sync", status_code=201, response_model=DataResponse[list[SyncedWorkflow]], summary="Sync a bridge's workflows"
)
async def sync(
    body: SyncRequest,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    source: str | None = Query(default=None, max_length=32, description="Who syncs (the CLI sends cli)"),
) -> DataResponse[list[SyncedWorkflow]]:
    views = await service.sync(session, principal, body, http=bridge_http(request), box=request.app.state.secret_box)
    return DataResponse(
        data=[
            SyncedWorkflow.model_validate({**view.to_schema().model_dump(by_alias=True), "type": "BRIDGE", "origin": "external"})
            for view in views
        ]
    )


@router.get("/status", response_model=DataResponse[dict[str, Any]], summary="The health check of the environment's bridge")
async def status(request: Request, session: SessionDep, principal: PrincipalDep) -> DataResponse[dict[str, Any]]:
    answer = await service.status(session, principal, http=bridge_http(request), box=request.app.state.secret_box)
    return DataResponse(data=answer)


@router.post("/validate", response_model=DataResponse[ValidateResponse], summary="Whether a bridge URL answers")
async def validate(
    body: ValidateRequest, request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[ValidateResponse]:
    valid = await service.validate(
        session, principal, body.bridgeUrl, http=bridge_http(request), box=request.app.state.secret_box
    )
    return DataResponse(data=ValidateResponse(isValid=valid))


@router.post("/diff", response_model=DataResponse[dict[str, Any]], summary="The stored code-first workflows beside a sync's")
async def diff(body: SyncRequest, session: SessionDep, principal: PrincipalDep) -> DataResponse[dict[str, Any]]:
    return DataResponse(data=await service.diff(session, principal, body))


WorkflowIdPath = Path(min_length=1, max_length=300, description="The workflow's workflowId (its trigger identifier)")
StepIdPath = Path(min_length=1, max_length=64, description="The step's stepId, as the code names it")


@router.get(
    "/controls/{workflowId}/{stepId}",
    response_model=DataResponse[dict[str, Any] | None],
    summary="The control values saved for a code-first step (null when none)",
)
async def get_controls(
    session: SessionDep, principal: PrincipalDep, workflowId: str = WorkflowIdPath, stepId: str = StepIdPath
) -> DataResponse[dict[str, Any] | None]:
    return DataResponse(data=await controls.get(session, principal, workflowId, stepId))


@router.put(
    "/controls/{workflowId}/{stepId}",
    response_model=DataResponse[dict[str, Any]],
    summary="Save a code-first step's control values, sent to the bridge as its controls",
)
async def put_controls(
    body: ControlValuesRequest,
    session: SessionDep,
    principal: PrincipalDep,
    workflowId: str = WorkflowIdPath,
    stepId: str = StepIdPath,
) -> DataResponse[dict[str, Any]]:
    return DataResponse(data=await controls.put(session, principal, workflowId, stepId, body.variables))


@router.post(
    "/preview/{workflowId}/{stepId}",
    status_code=201,
    response_model=DataResponse[dict[str, Any]],
    summary="A code-first step as its bridge previews it",
)
async def preview(
    body: BridgePreviewRequest,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    workflowId: str = WorkflowIdPath,
    stepId: str = StepIdPath,
) -> DataResponse[dict[str, Any]]:
    answer = await controls.preview(
        session,
        principal,
        workflowId,
        stepId,
        body.model_dump(exclude_none=True),
        http=bridge_http(request),
        box=request.app.state.secret_box,
    )
    return DataResponse(data=answer)
