"""Novu's environment variables: /v1/environment-variables and /{variableKey}."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from herald.environment_variables import service
from herald.environment_variables.schemas import (
    CreateEnvironmentVariableRequest,
    EnvironmentVariableResponse,
    EnvironmentVariableUsage,
    UpdateEnvironmentVariableRequest,
)
from herald.environments import protection
from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.schemas import ERROR_RESPONSES, DataResponse

KeyPath = Annotated[str, Path(description="The variable's key")]

router = APIRouter(prefix="/v1/environment-variables", tags=["Environment variables"], responses=ERROR_RESPONSES)


@router.post(
    "",
    response_model=DataResponse[EnvironmentVariableResponse],
    summary="Create a variable",
    responses=protection.REFUSED,
)
async def create_variable(
    body: CreateEnvironmentVariableRequest, request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[EnvironmentVariableResponse]:
    box = request.app.state.secret_box
    variable = await service.create(session, principal, body, box)
    return DataResponse(data=service.to_schema(variable, principal, box))


@router.get("", response_model=DataResponse[list[EnvironmentVariableResponse]], summary="List variables")
async def list_variables(
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    search: Annotated[str | None, Query(max_length=256, description="Part of the key")] = None,
) -> DataResponse[list[EnvironmentVariableResponse]]:
    box = request.app.state.secret_box
    rows = await service.list_variables(session, principal, search)
    return DataResponse(data=[service.to_schema(row, principal, box) for row in rows])


@router.get("/{variableKey}", response_model=DataResponse[EnvironmentVariableResponse], summary="Get a variable")
async def get_variable(
    variableKey: KeyPath,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,  # noqa: N803
) -> DataResponse[EnvironmentVariableResponse]:
    variable = await service.require_variable(session, principal, variableKey)
    return DataResponse(data=service.to_schema(variable, principal, request.app.state.secret_box))


@router.patch(
    "/{variableKey}",
    response_model=DataResponse[EnvironmentVariableResponse],
    summary="Update a variable",
    responses=protection.REFUSED,
)
async def update_variable(
    variableKey: KeyPath,  # noqa: N803
    body: UpdateEnvironmentVariableRequest,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
) -> DataResponse[EnvironmentVariableResponse]:
    box = request.app.state.secret_box
    variable = await service.update(session, principal, variableKey, body, box)
    return DataResponse(data=service.to_schema(variable, principal, box))


@router.delete(
    "/{variableKey}", status_code=204, response_class=Response, summary="Delete a variable", responses=protection.REFUSED
)
async def delete_variable(variableKey: KeyPath, session: SessionDep, principal: PrincipalDep) -> Response:  # noqa: N803
    await service.delete(session, principal, variableKey)
    return Response(status_code=204)


@router.get(
    "/{variableKey}/usage",
    response_model=DataResponse[EnvironmentVariableUsage],
    summary="The workflows that read a variable",
)
async def variable_usage(
    variableKey: KeyPath,
    session: SessionDep,
    principal: PrincipalDep,  # noqa: N803
) -> DataResponse[EnvironmentVariableUsage]:
    return DataResponse(data=await service.usage(session, principal, variableKey))
