"""Novu's environments: v1 management (list, create, update, delete) and v2 change management."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from herald.environments import protection, service
from herald.environments.schemas import (
    CreateEnvironmentRequest,
    DiffEnvironmentRequest,
    DiffEnvironmentResponse,
    EnvironmentResponse,
    EnvironmentTag,
    PublishEnvironmentRequest,
    PublishEnvironmentResponse,
    UpdateEnvironmentRequest,
)
from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.schemas import ERROR_RESPONSES, DataResponse

EnvironmentIdPath = Annotated[str, Path(description="The environment's id")]

router = APIRouter(tags=["Environments"], responses=ERROR_RESPONSES)


@router.get("/v1/environments", response_model=DataResponse[list[EnvironmentResponse]], summary="List environments")
async def list_environments(session: SessionDep, principal: PrincipalDep) -> DataResponse[list[EnvironmentResponse]]:
    """The caller's organization's environments, oldest first (no API keys: a key is shown once, when made)."""
    return DataResponse(data=await service.list_environments(session, principal))


@router.post(
    "/v1/environments",
    status_code=201,
    response_model=DataResponse[EnvironmentResponse],
    summary="Create an environment",
)
async def create_environment(
    body: CreateEnvironmentRequest, request: Request, session: SessionDep, principal: PrincipalDep
) -> DataResponse[EnvironmentResponse]:
    """A new environment of the organization, with its API key (in ``apiKeys``, shown this once).

    At most ``HERALD_MAX_ENVIRONMENTS`` per organization (400 past it).
    """
    created = await service.create(
        session, principal, body, request.app.state.secret_box, max_environments=request.app.state.settings.max_environments
    )
    return DataResponse(data=created)


@router.put(
    "/v1/environments/{environmentId}",
    response_model=DataResponse[EnvironmentResponse],
    summary="Update an environment",
    responses=protection.REFUSED,
)
async def update_environment(
    environmentId: EnvironmentIdPath,
    body: UpdateEnvironmentRequest,
    session: SessionDep,
    principal: PrincipalDep,  # noqa: N803
) -> DataResponse[EnvironmentResponse]:
    """A protected environment is changed by its own keys only; ``protected`` itself too."""
    return DataResponse(data=await service.update(session, principal, environmentId, body))


@router.delete(
    "/v1/environments/{environmentId}",
    response_class=Response,
    summary="Delete an environment",
    responses=protection.REFUSED,
)
async def delete_environment(
    environmentId: EnvironmentIdPath,  # noqa: N803
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
) -> Response:
    """Refused for Development and Production; anything else goes with everything in it, its keys too."""
    await service.delete(session, principal, environmentId)
    request.app.state.api_keys.forget_environment(environmentId)
    return Response(status_code=200)


@router.get(
    "/v2/environments/{environmentId}/tags",
    response_model=DataResponse[list[EnvironmentTag]],
    summary="The workflow tags of an environment",
)
async def environment_tags(
    environmentId: EnvironmentIdPath,
    session: SessionDep,
    principal: PrincipalDep,  # noqa: N803
) -> DataResponse[list[EnvironmentTag]]:
    return DataResponse(data=await service.tags(session, principal, environmentId))


@router.post(
    "/v2/environments/{targetEnvironmentId}/diff",
    response_model=DataResponse[DiffEnvironmentResponse],
    summary="What publishing would change in an environment",
)
async def diff_environment(
    targetEnvironmentId: EnvironmentIdPath,  # noqa: N803
    session: SessionDep,
    principal: PrincipalDep,
    body: DiffEnvironmentRequest | None = None,
) -> DataResponse[DiffEnvironmentResponse]:
    """Source: ``sourceEnvironmentId``, or the caller's environment."""
    return DataResponse(
        data=await service.diff(session, principal, targetEnvironmentId, body or DiffEnvironmentRequest())
    )


@router.post(
    "/v2/environments/{targetEnvironmentId}/publish",
    response_model=DataResponse[PublishEnvironmentResponse],
    summary="Publish the source environment's changes to an environment",
    responses=protection.REFUSED,
)
async def publish_environment(
    targetEnvironmentId: EnvironmentIdPath,  # noqa: N803
    session: SessionDep,
    principal: PrincipalDep,
    body: PublishEnvironmentRequest | None = None,
) -> DataResponse[PublishEnvironmentResponse]:
    """Source: ``sourceEnvironmentId``, or the caller's environment; ``dryRun`` writes nothing.

    A protected target (Production) takes a publish from its own keys only, which name
    the source they pull from.
    """
    request = body or PublishEnvironmentRequest()
    return DataResponse(data=await service.publish(session, principal, targetEnvironmentId, request))
