from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query

from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, compact
from herald.kit.time import isoformat
from herald.preferences import service
from herald.preferences.schemas import (
    BulkUpdateSubscriberPreferencesDto,
    GetPreferencesResponseDto,
    GetSubscriberPreferencesByLevelResponseDto,
    GetSubscriberPreferencesDto,
    GetSubscriberPreferencesResponseDto,
    GlobalPreference,
    PatchSubscriberPreferencesDto,
    UpdateSubscriberGlobalPreferenceResponseDto,
    UpdateSubscriberGlobalPreferencesRequestDto,
    UpdateSubscriberPreferenceRequestDto,
)
from herald.preferences.service import GlobalPreferenceView, SubscriberPreferencesView, WorkflowPreferenceView

SubscriberIdPath = Annotated[str, Path(description="The identifier the subscriber was created with")]
WorkflowIdPath = Annotated[str, Path(description="The workflow's _id (or its trigger identifier)")]

v1 = APIRouter(prefix="/v1/subscribers", tags=["Subscriber preferences"], responses=ERROR_RESPONSES)
v2 = APIRouter(prefix="/v2/subscribers", tags=["Subscriber preferences"], responses=ERROR_RESPONSES)


# Shapes -----------------------------------------------------------------------


def _template(view: WorkflowPreferenceView) -> dict[str, Any]:
    workflow = view.workflow
    return {
        "_id": workflow.id,
        "name": workflow.name,
        "critical": bool(workflow.critical),
        "triggers": [
            {
                "type": "event",
                "identifier": workflow.trigger_identifier,
                "variables": workflow.variables or [],
                "subscriberVariables": workflow.subscriber_variables or [],
            }
        ],
    }


def _shown(view: WorkflowPreferenceView, all_channels: bool) -> list[str]:
    return list(view.channels) if all_channels else list(view.step_channels)


def _v1_workflow(view: WorkflowPreferenceView, all_channels: bool = True) -> GetSubscriberPreferencesResponseDto:
    shown = _shown(view, all_channels)
    return GetSubscriberPreferencesResponseDto.model_validate(
        {
            "template": _template(view),
            "preference": {
                "enabled": view.enabled,
                "channels": {channel: view.channels[channel] for channel in shown},
                "overrides": [{"channel": channel, "source": view.sources[channel]} for channel in shown],
            },
        }
    )


def _v1_global(view: GlobalPreferenceView) -> GlobalPreference:
    return GlobalPreference.model_validate({"enabled": view.enabled, "channels": view.channels})


def _v2_workflow_info(view: WorkflowPreferenceView) -> dict[str, Any]:
    workflow = view.workflow
    return compact(
        {
            "slug": workflow.trigger_identifier,
            "identifier": workflow.trigger_identifier,
            "name": workflow.name,
            "updatedAt": isoformat(workflow.updated_at),
        }
    )


def _v2(preferences: SubscriberPreferencesView) -> GetSubscriberPreferencesDto:
    found = preferences.global_
    return GetSubscriberPreferencesDto.model_validate(
        {
            "global": compact({"enabled": found.enabled, "channels": found.channels, "schedule": found.schedule}),
            "workflows": [
                compact(
                    {
                        "enabled": view.enabled,
                        "channels": {channel: view.channels[channel] for channel in view.step_channels},
                        "overrides": [
                            {"channel": channel, "source": view.sources[channel]} for channel in view.step_channels
                        ],
                        "workflow": _v2_workflow_info(view),
                        "updatedAt": isoformat(view.updated_at),
                    }
                )
                for view in preferences.workflows
            ],
        }
    )


def _v2_template_level(view: WorkflowPreferenceView) -> GetPreferencesResponseDto:
    return GetPreferencesResponseDto.model_validate(
        {
            "level": "template",
            "enabled": view.enabled,
            "channels": {channel: view.channels[channel] for channel in view.step_channels},
            "workflow": service.workflow_summary(view.workflow),
        }
    )


# v1 ---------------------------------------------------------------------------


@v1.get(
    "/{subscriberId}/preferences",
    response_model=DataResponse[list[GetSubscriberPreferencesResponseDto]],
    summary="Get a subscriber's preferences",
)
async def list_subscriber_preferences(
    subscriberId: SubscriberIdPath,
    session: SessionDep,
    principal: PrincipalDep,
    includeInactiveChannels: Annotated[
        bool, Query(description="Every channel (true), or only those of the workflow's active steps")
    ] = True,
) -> DataResponse[list[GetSubscriberPreferencesResponseDto]]:
    """One entry per active workflow: its channels, merged from its preferenceSettings and the subscriber's own."""
    subscriber = await service.subscriber_for(session, principal, subscriberId)
    preferences = await service.read_preferences(session, subscriber)
    return DataResponse(data=[_v1_workflow(view, includeInactiveChannels) for view in preferences.workflows])


@v1.get(
    "/{subscriberId}/preferences/{parameter}",
    response_model=DataResponse[list[GetSubscriberPreferencesByLevelResponseDto]],
    summary="Get a subscriber's preferences at one level",
)
async def get_subscriber_preferences_by_level(
    subscriberId: SubscriberIdPath,
    parameter: Annotated[Literal["global", "template"], Path(description="global, or template (one per workflow)")],
    session: SessionDep,
    principal: PrincipalDep,
    includeInactiveChannels: Annotated[bool, Query()] = True,
) -> DataResponse[list[GetSubscriberPreferencesByLevelResponseDto]]:
    subscriber = await service.subscriber_for(session, principal, subscriberId)
    if parameter == "global":
        found = await service.read_global(session, subscriber)
        return DataResponse(data=[GetSubscriberPreferencesByLevelResponseDto(level="global", preference=_v1_global(found))])
    preferences = await service.read_preferences(session, subscriber)
    entries = []
    for view in preferences.workflows:
        shaped = _v1_workflow(view, includeInactiveChannels)
        entries.append(
            GetSubscriberPreferencesByLevelResponseDto(level="template", template=shaped.template, preference=shaped.preference)
        )
    return DataResponse(data=entries)


@v1.patch(
    "/{subscriberId}/preferences/{parameter}",
    response_model=DataResponse[GetSubscriberPreferencesResponseDto],
    summary="Update a subscriber's preference for one workflow",
)
async def update_subscriber_preference(
    subscriberId: SubscriberIdPath,
    parameter: WorkflowIdPath,
    body: UpdateSubscriberPreferenceRequestDto,
    session: SessionDep,
    principal: PrincipalDep,
) -> DataResponse[GetSubscriberPreferencesResponseDto]:
    """``{channel: {type, enabled}}`` turns one channel of the workflow on or off; ``{enabled}`` the whole workflow."""
    subscriber = await service.subscriber_for(session, principal, subscriberId)
    workflow = (await service.require_workflows(session, subscriber, [parameter]))[parameter]
    channels = {body.channel.type: body.channel.enabled} if body.channel is not None else None
    view = await service.update_workflow(session, subscriber, workflow, enabled=body.enabled, channels=channels)
    return DataResponse(data=_v1_workflow(view))


@v1.patch(
    "/{subscriberId}/preferences",
    response_model=DataResponse[UpdateSubscriberGlobalPreferenceResponseDto],
    summary="Update a subscriber's global preference",
)
async def update_subscriber_global_preferences(
    subscriberId: SubscriberIdPath,
    body: UpdateSubscriberGlobalPreferencesRequestDto,
    session: SessionDep,
    principal: PrincipalDep,
) -> DataResponse[UpdateSubscriberGlobalPreferenceResponseDto]:
    """``{enabled}`` turns every channel on or off for every workflow; ``preferences`` sets channels one by one."""
    subscriber = await service.subscriber_for(session, principal, subscriberId)
    channels = {item.type: item.enabled for item in body.preferences or []}
    view = await service.update_global(session, subscriber, enabled=body.enabled, channels=channels)
    return DataResponse(data=UpdateSubscriberGlobalPreferenceResponseDto(preference=_v1_global(view)))


# v2 ---------------------------------------------------------------------------

CRITICALITY = {"critical": True, "nonCritical": False, "all": None}


@v2.get(
    "/{subscriberId}/preferences",
    response_model=DataResponse[GetSubscriberPreferencesDto],
    summary="Get a subscriber's preferences",
)
async def get_subscriber_preferences_v2(
    subscriberId: SubscriberIdPath,
    session: SessionDep,
    principal: PrincipalDep,
    criticality: Annotated[
        Literal["critical", "nonCritical", "all"], Query(description="Which workflows to list")
    ] = "nonCritical",
) -> DataResponse[GetSubscriberPreferencesDto]:
    """The global preference, and one per active workflow (by default those that are not critical)."""
    subscriber = await service.subscriber_for(session, principal, subscriberId)
    preferences = await service.read_preferences(session, subscriber, critical=CRITICALITY[criticality])
    return DataResponse(data=_v2(preferences))


@v2.patch(
    "/{subscriberId}/preferences",
    response_model=DataResponse[GetSubscriberPreferencesDto],
    summary="Update a subscriber's global or workflow preference",
)
async def update_subscriber_preferences_v2(
    subscriberId: SubscriberIdPath, body: PatchSubscriberPreferencesDto, session: SessionDep, principal: PrincipalDep
) -> DataResponse[GetSubscriberPreferencesDto]:
    """Without ``workflowId``: the global channels and ``schedule``; with it, that workflow's channels."""
    subscriber = await service.subscriber_for(session, principal, subscriberId)
    await service.update_global_or_workflow(
        session,
        subscriber,
        body.workflowId,
        channels=body.channels.given() if body.channels is not None else None,
        schedule=body.schedule.model_dump(exclude_none=True) if body.schedule is not None else service.UNCHANGED,
    )
    return DataResponse(data=_v2(await service.read_preferences(session, subscriber, critical=False)))


@v2.patch(
    "/{subscriberId}/preferences/bulk",
    response_model=DataResponse[list[GetPreferencesResponseDto]],
    summary="Update a subscriber's preferences for several workflows",
)
async def bulk_update_subscriber_preferences_v2(
    subscriberId: SubscriberIdPath, body: BulkUpdateSubscriberPreferencesDto, session: SessionDep, principal: PrincipalDep
) -> DataResponse[list[GetPreferencesResponseDto]]:
    """Up to 100 workflows' channels at once; an unknown workflow answers 404 and nothing changes."""
    subscriber = await service.subscriber_for(session, principal, subscriberId)
    views = await service.update_workflows(
        session, subscriber, [(item.workflowId, item.channels.given()) for item in body.preferences]
    )
    return DataResponse(data=[_v2_template_level(view) for view in views])


router = APIRouter()
router.include_router(v1)
router.include_router(v2)
