"""The Inbox's preferences (``/v1/inbox/preferences``) as @novu/js 3.19 calls them, for the token's subscriber.

One implementation with the API-key routes: everything goes through
herald/preferences/service.py, into the rows the engine reads when a step runs.
What the Inbox adds is its shape (one list of ``level: global | template``
entries) and its rule that a critical workflow's preference cannot be changed.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query

from herald.inbox import service as inbox_service
from herald.inbox.query import SeverityQuery, TagsQuery
from herald.inbox.schemas import (
    BulkUpdateInboxPreferencesRequest,
    InboxPreference,
    UpdateInboxGlobalPreferenceRequest,
    UpdateInboxPreferenceRequest,
)
from herald.kit.auth import SubscriberPrincipalDep
from herald.kit.db import SessionDep
from herald.kit.schemas import DataResponse, compact
from herald.preferences import service
from herald.preferences.service import GlobalPreferenceView, WorkflowPreferenceView

# Included by herald/inbox/routes.py under /v1/inbox.
router = APIRouter(prefix="/preferences")

CRITICALITY = {"critical": True, "nonCritical": False, "all": None}
WorkflowIdPath = Annotated[str, Path(description="The workflow's _id (what @novu/js sends) or its trigger identifier")]


def _global(view: GlobalPreferenceView) -> InboxPreference:
    """The global preference: the channels some active workflow delivers on (``service.in_use``), as Novu's Inbox."""
    return InboxPreference.model_validate(
        compact({"level": "global", "enabled": view.enabled, "channels": view.channels, "schedule": view.schedule})
    )


def _workflow(view: WorkflowPreferenceView) -> InboxPreference:
    """A workflow's preference: the channels of its active steps, as Novu's Inbox answers them."""
    return InboxPreference.model_validate(
        {
            "level": "template",
            "enabled": view.enabled,
            "channels": {channel: view.channels[channel] for channel in view.step_channels},
            "overrides": [{"channel": channel, "source": view.sources[channel]} for channel in view.step_channels],
            "workflow": service.workflow_summary(view.workflow),
        }
    )


@router.get("", response_model=DataResponse[list[InboxPreference]], summary="List the subscriber's preferences")
async def list_preferences(
    session: SessionDep,
    principal: SubscriberPrincipalDep,
    criticality: Annotated[
        Literal["critical", "nonCritical", "all"], Query(description="Which workflows to list")
    ] = "nonCritical",
    tags: TagsQuery = None,
    bracketed_tags: Annotated[list[str] | None, Query(alias="tags[]", description="As tags")] = None,
    severity: SeverityQuery = None,
    bracketed_severity: Annotated[list[str] | None, Query(alias="severity[]", description="As severity")] = None,
) -> DataResponse[list[InboxPreference]]:
    """The global preference, then one per active workflow (by default those that are not critical); ``tags[]``
    keeps the workflows with one of the tags, ``severity[]`` those of one of the severities."""
    subscriber = await service.subscriber_of_token(session, principal)
    preferences = await service.read_preferences(
        session,
        subscriber,
        critical=CRITICALITY[criticality],
        # As @novu/js sends them (tags[]=a&tags[]=b), or unbracketed.
        tags=[*(bracketed_tags or []), *(tags or [])] or None,
        severities=inbox_service.severities([*(bracketed_severity or []), *(severity or [])] or None),
        channels_in_use=True,
    )
    return DataResponse(data=[_global(preferences.global_), *(_workflow(view) for view in preferences.workflows)])


@router.get("/global", response_model=DataResponse[InboxPreference], summary="Get the subscriber's global preference")
async def get_global_preference(session: SessionDep, principal: SubscriberPrincipalDep) -> DataResponse[InboxPreference]:
    subscriber = await service.subscriber_of_token(session, principal)
    return DataResponse(data=_global(await service.in_use(session, subscriber, await service.read_global(session, subscriber))))


@router.patch("", response_model=DataResponse[InboxPreference], summary="Update the subscriber's global preference")
async def update_global_preference(
    body: UpdateInboxGlobalPreferenceRequest, session: SessionDep, principal: SubscriberPrincipalDep
) -> DataResponse[InboxPreference]:
    """The channels named (``{"email": false}``) turn off or on in every workflow; ``schedule`` replaces the stored one."""
    subscriber = await service.subscriber_of_token(session, principal)
    view = await service.update_global(
        session,
        subscriber,
        channels=body.given(),
        schedule=body.schedule.model_dump(exclude_none=True) if body.schedule is not None else service.UNCHANGED,
    )
    return DataResponse(data=_global(await service.in_use(session, subscriber, view)))


@router.patch(
    "/bulk", response_model=DataResponse[list[InboxPreference]], summary="Update the subscriber's preferences for several workflows"
)
async def bulk_update_preferences(
    body: BulkUpdateInboxPreferencesRequest, session: SessionDep, principal: SubscriberPrincipalDep
) -> DataResponse[list[InboxPreference]]:
    """Up to 100 workflows (``_id`` or identifier) at once; an unknown one answers 404, a critical one 400, and then
    nothing changes."""
    subscriber = await service.subscriber_of_token(session, principal)
    views = await service.update_workflows(
        session, subscriber, [(item.workflowId, item.given()) for item in body.preferences], refuse_critical=True
    )
    return DataResponse(data=[_workflow(view) for view in views])


@router.patch(
    "/{workflowId}", response_model=DataResponse[InboxPreference], summary="Update the subscriber's preference for a workflow"
)
async def update_workflow_preference(
    workflowId: WorkflowIdPath, body: UpdateInboxPreferenceRequest, session: SessionDep, principal: SubscriberPrincipalDep
) -> DataResponse[InboxPreference]:
    """The channels named turn off or on for this workflow; a critical workflow answers 400, as in Novu."""
    subscriber = await service.subscriber_of_token(session, principal)
    workflow = await service.require_changeable_workflow(session, subscriber, workflowId)
    return DataResponse(data=_workflow(await service.update_workflow(session, subscriber, workflow, channels=body.given())))
