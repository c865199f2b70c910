"""The activity feed (``/v1/notifications``): every notification and what happened to it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.pagination import PageDep, paginated
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, PaginatedResponse
from herald.notifications import service
from herald.notifications.repository import ActivityFilter
from herald.notifications.schemas import (
    ActivityGraphDay,
    ActivityNotification,
    ActivityStats,
    Channel,
)

# Values per repeatable filter; more is refused (422), not truncated.
MAX_FILTER_VALUES = 100
MAX_GRAPH_DAYS = 366
DEFAULT_GRAPH_DAYS = 32

router = APIRouter(prefix="/v1/notifications", tags=["Activity"], responses=ERROR_RESPONSES)


def _values(description: str) -> Any:
    return Query(max_length=MAX_FILTER_VALUES, description=description)


@router.get("", response_model=PaginatedResponse[ActivityNotification], summary="List notifications (activity feed)")
async def list_notifications(
    page: PageDep,
    session: SessionDep,
    principal: PrincipalDep,
    channels: Annotated[list[Channel] | None, _values("Only notifications with a step of one of these channels")] = None,
    templates: Annotated[list[str] | None, _values("Only notifications of these workflows (their _id)")] = None,
    emails: Annotated[list[str] | None, _values("Only notifications of subscribers with one of these emails")] = None,
    subscriberIds: Annotated[
        list[str] | None, _values("Only notifications of these subscribers (their subscriberId)")
    ] = None,
    transactionId: Annotated[list[str] | None, _values("Only notifications of these transactions")] = None,
    after: Annotated[str | None, Query(description="Only notifications created at or after this ISO 8601 date")] = None,
    before: Annotated[str | None, Query(description="Only notifications created at or before this ISO 8601 date")] = None,
) -> PaginatedResponse[ActivityNotification]:
    """Notifications of the environment, newest first, each with its steps (jobs) and their execution details.

    Filters combine with AND; the values of one repeatable filter with OR.
    ``totalCount`` is the number of notifications that match.
    """
    filters = ActivityFilter(
        channels=channels,
        subscriber_ids=subscriberIds,
        emails=emails,
        transaction_ids=transactionId,
        workflow_ids=templates,
        after=service.parse_date("after", after),
        before=service.parse_date("before", before),
    )
    items, total = await service.list_activity(session, principal, filters, offset=page.offset, limit=page.limit)
    return PaginatedResponse[ActivityNotification](**paginated(items, page, total))


@router.get("/stats", response_model=DataResponse[ActivityStats], summary="Notifications sent in the last week and month")
async def get_activity_stats(session: SessionDep, principal: PrincipalDep) -> DataResponse[ActivityStats]:
    return DataResponse(data=await service.activity_stats(session, principal))


@router.get(
    "/graph/stats", response_model=DataResponse[list[ActivityGraphDay]], summary="Notifications per day"
)
async def get_activity_graph_stats(
    session: SessionDep,
    principal: PrincipalDep,
    days: Annotated[int, Query(ge=1, le=MAX_GRAPH_DAYS, description="How many days back to count")] = DEFAULT_GRAPH_DAYS,
) -> DataResponse[list[ActivityGraphDay]]:
    """One entry per UTC day that has notifications, newest day first."""
    return DataResponse(data=await service.activity_graph(session, principal, days))


@router.get("/{notificationId}", response_model=DataResponse[ActivityNotification], summary="Get a notification")
async def get_notification(
    notificationId: str, session: SessionDep, principal: PrincipalDep
) -> DataResponse[ActivityNotification]:
    return DataResponse(data=await service.get_activity(session, principal, notificationId))
