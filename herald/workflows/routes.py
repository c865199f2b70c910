from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.pagination import PageDep, paginated
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, PaginatedResponse
from herald.workflows import service
from herald.workflows.schemas import (
    CreateWorkflowRequest,
    NotificationGroup,
    UpdateWorkflowRequest,
    UpdateWorkflowStatusRequest,
    Workflow,
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


# The app registers one router per feature module.
router = APIRouter()
router.include_router(workflows_router)
router.include_router(groups_router)
