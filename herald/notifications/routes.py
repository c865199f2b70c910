"""The activity feed (``/v1/notifications``): every notification and what happened to it."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from fastapi import APIRouter, Query, Request

from herald.analytics import charts
from herald.kit.auth import PrincipalDep
from herald.kit.db import SessionDep
from herald.kit.errors import ValidationFailed
from herald.kit.pagination import PageDep, paginated
from herald.kit.schemas import ERROR_RESPONSES, DataResponse, PaginatedResponse
from herald.notifications import runs, service
from herald.notifications.repository import ActivityFilter
from herald.notifications.schemas import (
    ActivityGraphDay,
    ActivityNotification,
    ActivityStats,
    Channel,
    WorkflowRunDetail,
    WorkflowRunsPage,
)

# Values per repeatable filter; more is refused (422), not truncated.
MAX_FILTER_VALUES = 100
MAX_GRAPH_DAYS = 366
DEFAULT_GRAPH_DAYS = 32

router = APIRouter(prefix="/v1/notifications", tags=["Activity"], responses=ERROR_RESPONSES)


# The repeatable filters; each may also be written name[]=value, as Novu's
# query parser (qs) and the clients built on it send lists.
REPEATABLE_FILTERS = ("channels", "templates", "emails", "subscriberIds", "transactionId")
KNOWN_PARAMETERS = frozenset({"page", "limit", "after", "before", *REPEATABLE_FILTERS})
# What a caller may mean by a name this endpoint does not take.
SUGGESTIONS = {"channel": "channels", "subscriberId": "subscriberIds", "template": "templates", "email": "emails"}


def _values(description: str) -> Any:
    return Query(max_length=MAX_FILTER_VALUES, description=description)


def _bracketed(request: Request, name: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    """The values given as ``name[]=`` (the OpenAPI document names each filter once, without brackets)."""
    key = f"{name}[]"
    values = request.query_params.getlist(key)
    if len(values) > MAX_FILTER_VALUES:
        raise ValidationFailed.field(key, f"{key} takes at most {MAX_FILTER_VALUES} values", len(values))
    for value in values:
        if allowed is not None and value not in allowed:
            raise ValidationFailed.field(key, f"{key} must be one of {', '.join(allowed)}", value)
    return values


def _check_parameters(request: Request) -> None:
    """Refuse a query parameter this endpoint does not take, rather than answer as if it was not there.

    An ignored filter would answer every notification of the environment;
    a 422 says which name is wrong (``channel`` for ``channels``, ...).
    """
    for name in request.query_params:
        if name in KNOWN_PARAMETERS or name.removesuffix("[]") in REPEATABLE_FILTERS:
            continue
        hint = f"; did you mean {SUGGESTIONS[name]}?" if name in SUGGESTIONS else ""
        known = ", ".join(sorted(KNOWN_PARAMETERS))
        raise ValidationFailed.field(
            name, f"{name} is not a query parameter of this endpoint{hint} (it takes {known})", request.query_params.get(name)
        )


def _merged(*lists: list[Any] | None) -> list[Any] | None:
    values = [value for values in lists if values for value in values]
    return values or None


@router.get("", response_model=PaginatedResponse[ActivityNotification], summary="List notifications (activity feed)")
async def list_notifications(
    request: Request,
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

    Filters combine with AND; the values of one repeatable filter with OR. A
    repeatable filter may be given as ``channels=a&channels=b`` or
    ``channels[]=a&channels[]=b``; an unknown query parameter is refused (422).
    ``totalCount`` counts the notifications that match, up to 10,000 past the page.
    """
    _check_parameters(request)
    filters = ActivityFilter(
        channels=_merged(channels, _bracketed(request, "channels", get_args(Channel))),
        subscriber_ids=_merged(subscriberIds, _bracketed(request, "subscriberIds")),
        emails=_merged(emails, _bracketed(request, "emails")),
        transaction_ids=_merged(transactionId, _bracketed(request, "transactionId")),
        workflow_ids=_merged(templates, _bracketed(request, "templates")),
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


# -- /v1/activity: what Novu's dashboard reads (runs: herald/notifications/runs.py; charts: herald/analytics) --

activity_router = APIRouter(prefix="/v1/activity", tags=["Activity"], responses=ERROR_RESPONSES)
RunStatus = Literal["success", "error", "pending"]


@activity_router.get("/workflow-runs", response_model=WorkflowRunsPage, summary="List workflow runs")
async def list_workflow_runs(
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=100, description="Runs per page")] = 10,
    cursor: Annotated[str | None, Query(max_length=64, description="The nextCursor of the page before")] = None,
    workflowIds: Annotated[list[str] | None, _values("Only runs of these workflows (their _id)")] = None,
    subscriberIds: Annotated[list[str] | None, _values("Only runs of these subscribers (their subscriberId)")] = None,
    transactionIds: Annotated[list[str] | None, _values("Only runs of these transactions")] = None,
    statuses: Annotated[list[RunStatus] | None, _values("Only runs in these statuses")] = None,
    channels: Annotated[list[Channel] | None, _values("Only runs with a step of one of these channels")] = None,
    createdGte: Annotated[str | None, Query(description="Only runs created at or after this ISO 8601 date")] = None,
    createdLte: Annotated[str | None, Query(description="Only runs created at or before this ISO 8601 date")] = None,
) -> WorkflowRunsPage:
    """The environment's workflow runs (one workflow for one subscriber), newest first, as the console's Activity.

    Keyset pages: ``nextCursor`` is the ``cursor`` of the next page; a
    channel or status filter is checked on a bounded window of runs per page,
    so a page may hold fewer than ``limit`` and still have a next one.
    """
    statuses_given = _merged(statuses, _bracketed(request, "statuses", get_args(RunStatus))) or []
    filters = ActivityFilter(
        channels=_merged(channels, _bracketed(request, "channels", get_args(Channel))),
        subscriber_ids=_merged(subscriberIds, _bracketed(request, "subscriberIds")),
        transaction_ids=_merged(transactionIds, _bracketed(request, "transactionIds")),
        workflow_ids=_merged(workflowIds, _bracketed(request, "workflowIds")),
        statuses=[runs.RUN_STATUSES[status] for status in statuses_given] or None,
        after=service.parse_date("createdGte", createdGte),
        before=service.parse_date("createdLte", createdLte),
    )
    return await runs.workflow_runs(session, principal, filters, cursor=cursor, limit=limit)


@activity_router.get(
    "/workflow-runs/{workflowRunId}", response_model=DataResponse[WorkflowRunDetail], summary="Retrieve a workflow run"
)
async def get_workflow_run(
    workflowRunId: str, session: SessionDep, principal: PrincipalDep
) -> DataResponse[WorkflowRunDetail]:
    """One run with its steps and each step's execution details."""
    return DataResponse(data=await runs.workflow_run(session, principal, workflowRunId))


@activity_router.get("/charts", response_model=DataResponse[dict[str, Any]], summary="Retrieve activity charts")
async def get_charts(
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    reportType: Annotated[list[charts.ReportType] | None, _values("The report types to answer")] = None,
    createdAtGte: Annotated[str | None, Query(description="Period start, ISO 8601 (default: 7 days before its end)")] = None,
    createdAtLte: Annotated[str | None, Query(description="Period end, ISO 8601 (default: now)")] = None,
) -> DataResponse[dict[str, Any]]:
    """The dashboard's charts, each under its report type; metrics carry ``currentPeriod`` and ``previousPeriod``."""
    report_types = _merged(reportType, _bracketed(request, "reportType", charts.REPORT_TYPES))
    if not report_types:
        raise ValidationFailed.field("reportType", f"reportType must be one or more of {', '.join(charts.REPORT_TYPES)}")
    data = await charts.charts(
        session,
        principal,
        report_types,
        service.parse_date("createdAtGte", createdAtGte),
        service.parse_date("createdAtLte", createdAtLte),
    )
    return DataResponse(data=data)
