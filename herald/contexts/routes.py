from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from herald.contexts import service
from herald.contexts.schemas import ContextEntity, ContextList, CreateContextRequest, UpdateContextRequest
from herald.kit.auth import PrincipalDep
from herald.kit.cursor import CursorDep
from herald.kit.db import SessionDep
from herald.kit.schemas import ERROR_RESPONSES, DataResponse

TypePath = Annotated[str, Path(description="The context's type (tenant, app, ...)")]
IdPath = Annotated[str, Path(description="The context's id within its type")]

router = APIRouter(prefix="/v2/contexts", tags=["Contexts"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, response_model=DataResponse[ContextEntity], summary="Create a context")
async def create_context(
    body: CreateContextRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[ContextEntity]:
    """A context of this type and id that exists already answers 409."""
    context = await service.create_context(session, principal, body)
    return DataResponse(data=service.to_schema(context))


@router.get("", response_model=ContextList, summary="List contexts")
async def list_contexts(
    cursor: CursorDep,
    session: SessionDep,
    principal: PrincipalDep,
    id: Annotated[str | None, Query(max_length=100, description="Only contexts with this id")] = None,
    search: Annotated[str | None, Query(max_length=100, description="Only contexts whose id contains this")] = None,
) -> dict[str, Any]:
    page = await service.list_contexts(session, principal, cursor, key=id, search=search)
    return page.answer([service.to_schema(row) for row in page.items])


@router.get("/{type}/{id}", response_model=DataResponse[ContextEntity], summary="Get a context")
async def get_context(
    type: TypePath, id: IdPath, session: SessionDep, principal: PrincipalDep
) -> DataResponse[ContextEntity]:
    context = await service.require_context(session, principal, type, id)
    return DataResponse(data=service.to_schema(context))


@router.patch("/{type}/{id}", response_model=DataResponse[ContextEntity], summary="Update a context's data")
async def update_context(
    type: TypePath, id: IdPath, body: UpdateContextRequest, session: SessionDep, principal: PrincipalDep
) -> DataResponse[ContextEntity]:
    context = await service.update_context(session, principal, type, id, body.data)
    return DataResponse(data=service.to_schema(context))


@router.delete("/{type}/{id}", status_code=204, response_class=Response, summary="Delete a context")
async def delete_context(type: TypePath, id: IdPath, session: SessionDep, principal: PrincipalDep) -> Response:
    await service.delete_context(session, principal, type, id)
    return Response(status_code=204)
