from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response

from herald.bridge.client import process_client
from herald.environments import protection
from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.pagination import PageDep, paginated
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, PaginatedResponse
from herald.workflows import service, service_v2
from herald.workflows.schemas import (
    CreateWorkflowRequest,
    NotificationGroup,
    UpdateWorkflowRequest,
    UpdateWorkflowStatusRequest,
    Workflow,
)
from herald.workflows.schemas_v2 import (
    CreateWorkflowV2Request,
    GeneratePreviewRequest,
    GeneratePreviewResponse,
    ListWorkflowResponse,
    PatchWorkflowV2Request,
    StepResponse,
    SyncWorkflowRequest,
    UpdateWorkflowV2Request,
    WorkflowResponse,
)

workflows_router = APIRouter(prefix="/v1/workflows", tags=["Workflows"], responses=ERROR_RESPONSES)
groups_router = APIRouter(prefix="/v1/notification-groups", tags=["Workflows"], responses=ERROR_RESPONSES)


@workflows_router.post("", status_code=201, response_model=DataResponse[Workflow], summary="Create a workflow")
async def create_workflow(
    body: CreateWorkflowRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[Workflow]:
    """Create a workflow in the caller's environment.

    The trigger identifier is ``triggerIdentifier`` when given, else the
    slugified name; it is unique among the environment's workflows.
    """
    view = await service.create_workflow(session, principal, body)
    return DataResponse(data=view.to_schema())


@workflows_router.get("", response_model=PaginatedResponse[Workflow], summary="List workflows")
async def list_workflows(
    session: SessionDep,
    principal: PrincipalDep,
    page: PageDep,
    query: Annotated[
        str | None, Query(max_length=300, description="Part of the name or trigger identifier, any case")
    ] = None,
) -> PaginatedResponse[Workflow]:
    views, total = await service.list_workflows(session, principal, page, query)
    return PaginatedResponse[Workflow].model_validate(
        paginated([view.to_schema() for view in views], page, total)
    )


@workflows_router.get("/{workflowId}", response_model=DataResponse[Workflow], summary="Get a workflow")
async def get_workflow(workflowId: str, session: SessionDep, principal: PrincipalDep) -> DataResponse[Workflow]:
    view = await service.get_workflow(session, principal, workflowId)
    return DataResponse(data=view.to_schema())


@workflows_router.put("/{workflowId}", response_model=DataResponse[Workflow], summary="Update a workflow")
async def update_workflow(
    workflowId: str, body: UpdateWorkflowRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[Workflow]:
    """Replace the fields sent; ``steps``, when sent, replace every step (steps sent back with their ``_id`` keep their ids)."""
    view = await service.update_workflow(session, principal, workflowId, body)
    return DataResponse(data=view.to_schema())


@workflows_router.put("/{workflowId}/status", response_model=DataResponse[Workflow], summary="Activate or deactivate a workflow")
async def update_workflow_status(
    workflowId: str, body: UpdateWorkflowStatusRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[Workflow]:
    view = await service.set_workflow_status(session, principal, workflowId, body.active)
    return DataResponse(data=view.to_schema())


@workflows_router.delete("/{workflowId}", response_model=DataResponse[bool], summary="Delete a workflow")
async def delete_workflow(workflowId: str, session: SessionDep, principal: PrincipalDep) -> DataResponse[bool]:
    await service.delete_workflow(session, principal, workflowId)
    return DataResponse(data=True)


@groups_router.get("", response_model=DataResponse[list[NotificationGroup]], summary="List notification groups")
async def list_notification_groups(session: SessionDep, principal: PrincipalDep) -> DataResponse[list[NotificationGroup]]:
    groups = await service.list_notification_groups(session, principal)
    return DataResponse(data=[service.group_to_schema(group) for group in groups])


# Novu's v2 workflows: the same workflows, addressed by _id, trigger identifier (workflowId) or slug.
v2 = APIRouter(prefix="/v2/workflows", tags=["Workflows"], responses=ERROR_RESPONSES)


def _v2(workflow: object) -> DataResponse[WorkflowResponse]:
    return DataResponse(data=WorkflowResponse.model_validate(service_v2.to_v2(workflow)))  # type: ignore[arg-type]


@v2.post("", status_code=201, response_model=DataResponse[WorkflowResponse], summary="Create a workflow (v2)")
async def create_workflow_v2(
    body: CreateWorkflowV2Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[WorkflowResponse]:
    """Steps are given as controls; the workflow triggers by ``workflowId`` like any v1 workflow."""
    return _v2(await service_v2.create_workflow(session, principal, body))


@v2.get("", response_model=DataResponse[ListWorkflowResponse], summary="Search workflows (v2)")
async def list_workflows_v2(
    session: SessionDep,
    principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    orderDirection: Annotated[Literal["ASC", "DESC"], Query()] = "DESC",
    orderBy: Annotated[Literal["createdAt", "updatedAt", "name", "lastTriggeredAt"], Query()] = "createdAt",
    query: Annotated[str | None, Query(max_length=300, description="Part of the name or workflowId, any case")] = None,
    tags: Annotated[list[str] | None, Query(max_length=16)] = None,
    status: Annotated[list[Literal["ACTIVE", "INACTIVE", "ERROR"]] | None, Query()] = None,
) -> DataResponse[ListWorkflowResponse]:
    rows, total = await service_v2.search_workflows(
        session,
        principal,
        offset=offset,
        limit=limit,
        query=query,
        tags=tags or [],
        statuses=status or [],
        order_by=orderBy,
        descending=orderDirection == "DESC",
    )
    answer = {"workflows": [service_v2.to_list_item(row) for row in rows], "totalCount": total}
    return DataResponse(data=ListWorkflowResponse.model_validate(answer))


@v2.get("/{workflowId}", response_model=DataResponse[WorkflowResponse], summary="Get a workflow (v2)")
async def get_workflow_v2(
    workflowId: str, session: SessionDep, principal: PrincipalDep
) -> DataResponse[WorkflowResponse]:
    return _v2(await service_v2.get_workflow(session, principal, workflowId))


@v2.put("/{workflowId}", response_model=DataResponse[WorkflowResponse], summary="Update a workflow (v2)")
async def update_workflow_v2(
    workflowId: str, body: UpdateWorkflowV2Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[WorkflowResponse]:
    """The steps sent replace all steps; a step sent with its ``_id`` or ``stepId`` keeps its ids."""
    return _v2(await service_v2.update_workflow(session, principal, workflowId, body))


@v2.patch(
    "/{workflowId}", response_model=DataResponse[WorkflowResponse], summary="Change some fields of a workflow (v2)"
)
async def patch_workflow_v2(
    workflowId: str, body: PatchWorkflowV2Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[WorkflowResponse]:
    return _v2(await service_v2.patch_workflow(session, principal, workflowId, body))


@v2.delete("/{workflowId}", status_code=204, response_class=Response, summary="Delete a workflow (v2)")
async def delete_workflow_v2(workflowId: str, session: SessionDep, principal: PrincipalDep) -> Response:
    await service_v2.delete_workflow(session, principal, workflowId)
    return Response(status_code=204)


@v2.put(
    "/{workflowId}/sync",
    response_model=DataResponse[WorkflowResponse],
    summary="Copy a workflow to another environment",
    responses=protection.REFUSED,
)
async def sync_workflow_v2(
    workflowId: str, body: SyncWorkflowRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[WorkflowResponse]:
    """Into an environment of the same organization; a copy already there (same workflowId) is brought up to date.

    A protected target (Production) refuses with 403: its own keys publish into it instead.
    """
    return _v2(await service_v2.sync_workflow(session, principal, workflowId, body.targetEnvironmentId))


@v2.get("/{workflowId}/steps/{stepId}", response_model=DataResponse[StepResponse], summary="Get a step (v2)")
async def get_step_v2(
    workflowId: str, stepId: str, session: SessionDep, principal: PrincipalDep
) -> DataResponse[StepResponse]:
    step = await service_v2.get_step(session, principal, workflowId, stepId)
    return DataResponse(data=StepResponse.model_validate(step))


@v2.post(
    "/{workflowId}/step/{stepId}/preview",
    status_code=201,
    response_model=DataResponse[GeneratePreviewResponse],
    summary="Render a step for a payload and subscriber",
)
async def generate_preview_v2(
    workflowId: str, stepId: str, body: GeneratePreviewRequest, request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[GeneratePreviewResponse]:
    # A code-first step is rendered by its bridge (herald/bridge), through the process's client for bridges.
    bridge = service_v2.BridgeAccess(process_client(request.app.state), request.app.state.secret_box)
    preview = await service_v2.generate_preview(session, principal, workflowId, stepId, body, bridge)
    return DataResponse(data=GeneratePreviewResponse.model_validate(preview))


# The app registers one router per feature module.
router = APIRouter()
router.include_router(workflows_router)
router.include_router(groups_router)
router.include_router(v2)
