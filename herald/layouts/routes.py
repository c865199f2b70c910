from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response

from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.pagination import MAX_PAGE_SIZE, PageParams, paginated
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, PaginatedResponse
from herald.layouts import service
from herald.layouts.schemas import (
    CreatedLayout,
    CreateLayoutDto,
    CreateLayoutRequestDto,
    DuplicateLayoutDto,
    GenerateLayoutPreviewResponseDto,
    GetLayoutUsageResponseDto,
    LayoutDto,
    LayoutPreviewRequestDto,
    LayoutResponseDto,
    ListLayoutResponseDto,
    UpdateLayoutDto,
    UpdateLayoutRequestDto,
)

LayoutIdPath = Annotated[str, Path(description="The layout's identifier (layoutId) or its _id")]

v1 = APIRouter(prefix="/v1/layouts", tags=["Layouts"], responses=ERROR_RESPONSES)
v2 = APIRouter(prefix="/v2/layouts", tags=["Layouts"], responses=ERROR_RESPONSES)


# --------------------------------------------------------------------------- v1


@v1.post("", status_code=201, response_model=DataResponse[CreatedLayout], summary="Create a layout")
async def create_layout_v1(
    body: CreateLayoutRequestDto, session: SessionDep, principal: PrincipalDep
) -> DataResponse[CreatedLayout]:
    """The content must place the email with ``{{{body}}}``. The environment's first layout becomes its default."""
    layout = await service.create_v1(session, principal, body)
    return DataResponse(data=CreatedLayout(id=layout.id))


@v1.get("", response_model=PaginatedResponse[LayoutDto], summary="List layouts")
async def list_layouts_v1(
    session: SessionDep,
    principal: PrincipalDep,
    page: Annotated[int, Query(ge=0, le=1_000_000, description="Page number, from 0")] = 0,
    pageSize: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Layouts per page")] = 10,
    sortBy: Annotated[Literal["createdAt", "updatedAt", "name"], Query(description="Sort field")] = "createdAt",
    orderBy: Annotated[int, Query(ge=-1, le=1, description="1 ascending, -1 descending")] = -1,
) -> dict[str, Any]:
    params = PageParams(page=page, limit=pageSize)
    rows, total = await service.list_page(
        session, principal, offset=params.offset, limit=params.limit, order_by=sortBy, descending=orderBy < 0
    )
    return paginated([service.to_v1(row) for row in rows], params, total)


@v1.get("/{layoutId}", response_model=DataResponse[LayoutDto], summary="Get a layout")
async def get_layout_v1(
    layoutId: LayoutIdPath, session: SessionDep, principal: PrincipalDep
) -> DataResponse[LayoutDto]:
    return DataResponse(data=service.to_v1(await service.require_layout(session, principal, layoutId)))


@v1.patch("/{layoutId}", response_model=DataResponse[LayoutDto], summary="Update a layout")
async def update_layout_v1(
    layoutId: LayoutIdPath, body: UpdateLayoutRequestDto, session: SessionDep, principal: PrincipalDep
) -> DataResponse[LayoutDto]:
    """Only the fields sent change; ``isDefault: true`` makes it the environment's default."""
    return DataResponse(data=service.to_v1(await service.update_v1(session, principal, layoutId, body)))


@v1.delete("/{layoutId}", status_code=204, response_class=Response, summary="Delete a layout")
async def delete_layout_v1(layoutId: LayoutIdPath, session: SessionDep, principal: PrincipalDep) -> Response:
    """The default layout, and a layout a workflow's email step names, answer 409."""
    await service.delete_v1(session, principal, layoutId)
    return Response(status_code=204)


@v1.post("/{layoutId}/default", status_code=204, response_class=Response, summary="Make a layout the default")
async def set_default_layout_v1(layoutId: LayoutIdPath, session: SessionDep, principal: PrincipalDep) -> Response:
    """The layout wraps the emails whose step names no layout; the previous default no longer does."""
    await service.set_default(session, principal, layoutId)
    return Response(status_code=204)


# --------------------------------------------------------------------------- v2


@v2.post("", status_code=201, response_model=DataResponse[LayoutResponseDto], summary="Create a layout")
async def create_layout(
    body: CreateLayoutDto, session: SessionDep, principal: PrincipalDep
) -> DataResponse[LayoutResponseDto]:
    """A layout with a plain HTML body placing the email at ``{{content}}``; set it with PUT."""
    return DataResponse(data=service.to_v2(await service.create_v2(session, principal, body)))


@v2.get("", response_model=DataResponse[ListLayoutResponseDto], summary="List layouts")
async def list_layouts(
    session: SessionDep,
    principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Layouts per page")] = 10,
    offset: Annotated[int, Query(ge=0, le=10_000_000, description="Layouts to skip")] = 0,
    orderDirection: Annotated[Literal["ASC", "DESC"], Query(description="Sort direction")] = "DESC",
    orderBy: Annotated[Literal["createdAt", "updatedAt", "name"], Query(description="Sort field")] = "createdAt",
    query: Annotated[str | None, Query(max_length=300, description="Part of the name or layoutId")] = None,
) -> DataResponse[ListLayoutResponseDto]:
    rows, total = await service.list_page(
        session,
        principal,
        offset=offset,
        limit=limit,
        order_by=orderBy,
        descending=orderDirection == "DESC",
        query=query,
    )
    return DataResponse(data=ListLayoutResponseDto(layouts=[service.to_v2(row) for row in rows], totalCount=total))


@v2.get("/{layoutId}", response_model=DataResponse[LayoutResponseDto], summary="Get a layout")
async def get_layout(
    layoutId: LayoutIdPath, session: SessionDep, principal: PrincipalDep
) -> DataResponse[LayoutResponseDto]:
    return DataResponse(data=service.to_v2(await service.require_layout(session, principal, layoutId)))


@v2.put("/{layoutId}", response_model=DataResponse[LayoutResponseDto], summary="Update a layout")
async def update_layout(
    layoutId: LayoutIdPath, body: UpdateLayoutDto, session: SessionDep, principal: PrincipalDep
) -> DataResponse[LayoutResponseDto]:
    """Name and translation setting as sent; ``controlValues.email`` (html) replaces the body."""
    return DataResponse(data=service.to_v2(await service.update_v2(session, principal, layoutId, body)))


@v2.delete("/{layoutId}", status_code=204, response_class=Response, summary="Delete a layout")
async def delete_layout(layoutId: LayoutIdPath, session: SessionDep, principal: PrincipalDep) -> Response:
    """Emails whose step names the layout are sent without it from then on (their execution details say so)."""
    await service.delete_v2(session, principal, layoutId)
    return Response(status_code=204)


@v2.post(
    "/{layoutId}/duplicate",
    status_code=201,
    response_model=DataResponse[LayoutResponseDto],
    summary="Duplicate a layout",
)
async def duplicate_layout(
    layoutId: LayoutIdPath, body: DuplicateLayoutDto, session: SessionDep, principal: PrincipalDep
) -> DataResponse[LayoutResponseDto]:
    return DataResponse(data=service.to_v2(await service.duplicate(session, principal, layoutId, body)))


@v2.post(
    "/{layoutId}/preview",
    status_code=201,
    response_model=DataResponse[GenerateLayoutPreviewResponseDto],
    summary="Preview a layout",
)
async def preview_layout(
    layoutId: LayoutIdPath, body: LayoutPreviewRequestDto, session: SessionDep, principal: PrincipalDep
) -> DataResponse[GenerateLayoutPreviewResponseDto]:
    """The layout (or ``controlValues.email.body``) rendered around a placeholder for the email."""
    return DataResponse(data=await service.preview(session, principal, layoutId, body))


@v2.get("/{layoutId}/usage", response_model=DataResponse[GetLayoutUsageResponseDto], summary="Workflows using a layout")
async def layout_usage(
    layoutId: LayoutIdPath, session: SessionDep, principal: PrincipalDep
) -> DataResponse[GetLayoutUsageResponseDto]:
    """The workflows with an email step that names this layout."""
    return DataResponse(data=GetLayoutUsageResponseDto(workflows=await service.usage(session, principal, layoutId)))


router = APIRouter()
router.include_router(v1)
router.include_router(v2)
