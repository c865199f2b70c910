"""Activity feed use cases: what happened to each notification, step by step.

A notification is one run of a workflow for one subscriber; its jobs are the
workflow's steps for that subscriber, each with the execution details the
engine recorded. The steps shown are the snapshot taken when the event was
accepted, so a later edit of the workflow does not rewrite history.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.auth import Principal
from herald.kit.errors import NotFoundError, ValidationFailed
from herald.kit.schemas import compact
from herald.kit.time import isoformat, parse_iso, utcnow
from herald.messages.repository import MessageRepository
from herald.messages.schemas import Message as MessageSchema
from herald.messages.service import to_schema as message_schema
from herald.models import ExecutionDetail, Job, Notification, Subscriber, Workflow
from herald.notifications.repository import (
    WAITING_JOB_STATUSES,
    ActivityFilter,
    NotificationRepository,
    run_status,
)
from herald.notifications.schemas import (
    ActivityExecutionDetail,
    ActivityGraphDay,
    ActivityJob,
    ActivityNotification,
    ActivityStats,
)

# Novu's own provider id: what Novu records on a job whose provider is not (yet)
# known, and the provider of in-app messages. Novu's SDKs require a providerId
# on every job, so a job that never reached a provider carries this one.
NOVU_PROVIDER_ID = "novu"
WEEK_DAYS = 7
MONTH_DAYS = 30


def parse_date(field: str, value: str | None) -> datetime | None:
    """An ISO 8601 date or date-time from the query string; a 422 naming the field when it is not one."""
    if value is None:
        return None
    try:
        return parse_iso(value)
    except ValueError:
        raise ValidationFailed.field(
            field, f"{field} must be an ISO 8601 date or date-time, e.g. 2024-05-01T12:00:00Z", value
        ) from None


@dataclass
class _Related:
    """Everything a page of notifications refers to, fetched once per page."""

    jobs: dict[str, list[Job]]
    details: dict[str, list[ExecutionDetail]]
    subscribers: dict[str, Subscriber]
    workflows: dict[str, Workflow]
    # Event id -> (steps snapshot, overrides).
    events: dict[str, tuple[list[Any], dict[str, Any]]]
    digested_into: dict[str, str]


async def _related(repository: NotificationRepository, environment_id: str, notifications: Sequence[Notification]) -> _Related:
    ids = [notification.id for notification in notifications]
    jobs = await repository.jobs_of(environment_id, ids)
    details = await repository.details_of(environment_id, ids)
    subscribers = await repository.subscribers(environment_id, list({n.subscriber_id for n in notifications}))
    workflows = await repository.workflows(environment_id, list({n.workflow_id for n in notifications}))
    events = await repository.event_snapshots(environment_id, list({n.event_id for n in notifications}))

    jobs_by_notification: dict[str, list[Job]] = defaultdict(list)
    notification_of_job: dict[str, str] = {}
    for job in jobs:
        if job.notification_id is not None:
            jobs_by_notification[job.notification_id].append(job)
            notification_of_job[job.id] = job.notification_id
    details_by_job: dict[str, list[ExecutionDetail]] = defaultdict(list)
    for detail in details:
        if detail.job_id is not None:
            details_by_job[detail.job_id].append(detail)

    # A digest merged into another notification's digest: Novu names that
    # notification as ``_digestedNotificationId``.
    masters = {job.notification_id: job.merged_into for job in jobs if job.merged_into and job.notification_id}
    missing = [master for master in set(masters.values()) if master not in notification_of_job]
    notification_of_job.update(await repository.notification_ids_of_jobs(environment_id, missing))
    digested_into = {
        notification_id: notification_of_job[master]
        for notification_id, master in masters.items()
        if master in notification_of_job and notification_of_job[master] != notification_id
    }
    return _Related(
        jobs=jobs_by_notification,
        details=details_by_job,
        subscribers={subscriber.id: subscriber for subscriber in subscribers},
        workflows={workflow.id: workflow for workflow in workflows},
        events=events,
        digested_into=digested_into,
    )


def _raw(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _detail_to_schema(detail: ExecutionDetail) -> ActivityExecutionDetail:
    return ActivityExecutionDetail.model_validate(
        compact({
            "_id": detail.id,
            "_jobId": detail.job_id,
            "_notificationId": detail.notification_id,
            "_subscriberId": detail.subscriber_id,
            "status": detail.status,
            "detail": detail.detail,
            "isRetry": detail.is_retry,
            "isTest": False,
            "providerId": detail.provider_id,
            "raw": _raw(detail.raw),
            "source": detail.source,
            "createdAt": isoformat(detail.created_at),
        })
    )


def _find_step(steps: list[Any], job: Job) -> dict[str, Any] | None:
    for step in steps:
        if isinstance(step, dict) and job.step_id in (step.get("_id"), step.get("uuid")):
            return step
    # The engine names a step that has neither _id nor uuid by its position.
    if job.step_index is not None and job.step_id == str(job.step_index):
        active = [step for step in steps if isinstance(step, dict) and step.get("active", True)]
        if job.step_index < len(active):
            return active[job.step_index]
    return None


def _step(steps: list[Any], job: Job) -> dict[str, Any]:
    step = _find_step(steps, job)
    if step is None:
        # The event (and so its snapshot) is gone: say what the job itself knows.
        step_id = job.step_id or job.id
        return {"_id": step_id, "_templateId": step_id, "active": True, "filters": [], "template": {"type": job.step_type}}
    shaped = {**step, "active": step.get("active", True), "filters": step.get("filters") or []}
    shaped.setdefault("_id", job.step_id or job.id)
    shaped.setdefault("_templateId", shaped["_id"])
    return shaped


def _provider_id(job: Job, details: list[ExecutionDetail]) -> str:
    for detail in reversed(details):
        if detail.provider_id:
            return detail.provider_id
    from_result = (job.result or {}).get("providerId")
    return from_result if isinstance(from_result, str) and from_result else NOVU_PROVIDER_ID


def _digest(job: Job, step: dict[str, Any]) -> dict[str, Any] | None:
    if job.step_type != "digest":
        return None
    metadata = step.get("metadata")
    if not isinstance(metadata, dict) or "type" not in metadata:
        return None
    digest = dict(metadata)
    events = (job.result or {}).get("events")
    if isinstance(events, list):
        digest["events"] = events
    return digest


def _job_to_schema(job: Job, details: list[ExecutionDetail], steps: list[Any], overrides: dict[str, Any] | None, payload: dict[str, Any]) -> ActivityJob:
    step = _step(steps, job)
    return ActivityJob.model_validate(
        compact({
            "_id": job.id,
            "type": job.step_type,
            "digest": _digest(job, step),
            "executionDetails": [_detail_to_schema(detail) for detail in details],
            "step": step,
            "overrides": overrides,
            "payload": payload,
            "providerId": _provider_id(job, details),
            "status": job.status,
            "updatedAt": isoformat(job.updated_at),
        })
    )


def _subscriber(subscriber: Subscriber | None) -> dict[str, Any] | None:
    if subscriber is None:
        return None
    return compact({
        "_id": subscriber.id,
        "subscriberId": subscriber.subscriber_id,
        "firstName": subscriber.first_name,
        "lastName": subscriber.last_name,
        "email": subscriber.email,
        "phone": subscriber.phone,
    })


def _template(workflow: Workflow | None) -> dict[str, Any] | None:
    if workflow is None:
        return None
    return {
        "_id": workflow.id,
        "name": workflow.name,
        "triggers": [{"type": "event", "identifier": workflow.trigger_identifier, "variables": workflow.variables or []}],
    }


def _to_schema(notification: Notification, related: _Related) -> ActivityNotification:
    steps, overrides = related.events.get(notification.event_id, ([], {}))
    payload = notification.payload or {}
    return ActivityNotification.model_validate(
        compact({
            "_id": notification.id,
            "_environmentId": notification.environment_id,
            "_organizationId": notification.organization_id,
            "_subscriberId": notification.subscriber_id,
            "transactionId": notification.transaction_id,
            "_templateId": notification.workflow_id,
            "_digestedNotificationId": related.digested_into.get(notification.id),
            "createdAt": isoformat(notification.created_at),
            "channels": notification.channels or [],
            "to": notification.to or None,
            "payload": payload,
            "subscriber": _subscriber(related.subscribers.get(notification.subscriber_id)),
            "template": _template(related.workflows.get(notification.workflow_id)),
            "jobs": [
                _job_to_schema(job, related.details.get(job.id, []), steps, overrides or None, payload)
                for job in related.jobs.get(notification.id, [])
            ],
        })
    )


async def list_activity(
    session: AsyncSession, principal: Principal, filters: ActivityFilter, *, offset: int, limit: int
) -> tuple[list[ActivityNotification], int]:
    """A page of the environment's notifications, newest first, with their jobs; and the number that match."""
    repository = NotificationRepository(session)
    notifications, total = await repository.page(principal.environment_id, filters, offset=offset, limit=limit)
    related = await _related(repository, principal.environment_id, notifications)
    return [_to_schema(notification, related) for notification in notifications], total


async def activities_of(
    repository: NotificationRepository, environment_id: str, notifications: Sequence[Notification]
) -> list[ActivityNotification]:
    """The notifications as the activity feed answers them (their jobs, details, subscriber and workflow)."""
    related = await _related(repository, environment_id, notifications)
    return [_to_schema(notification, related) for notification in notifications]


async def get_activity(session: AsyncSession, principal: Principal, notification_id: str) -> ActivityNotification:
    repository = NotificationRepository(session)
    notification = await repository.get(principal.environment_id, notification_id)
    if notification is None:
        raise NotFoundError(f"Notification with id {notification_id} not found")
    related = await _related(repository, principal.environment_id, [notification])
    return _to_schema(notification, related)


async def activity_stats(session: AsyncSession, principal: Principal) -> ActivityStats:
    now = utcnow()
    weekly, monthly = await NotificationRepository(session).counts_since(
        principal.environment_id, now - timedelta(days=WEEK_DAYS), now - timedelta(days=MONTH_DAYS)
    )
    return ActivityStats(weeklySent=weekly, monthlySent=monthly)


async def activity_graph(session: AsyncSession, principal: Principal, days: int) -> list[ActivityGraphDay]:
    """Notifications per UTC day over the last ``days`` days, newest day first."""
    since = utcnow() - timedelta(days=days)
    groups = await NotificationRepository(session).daily_groups(principal.environment_id, since)
    counts: dict[str, int] = defaultdict(int)
    templates: dict[str, dict[str, None]] = defaultdict(dict)
    channels: dict[str, dict[str, None]] = defaultdict(dict)
    for day, workflow_id, day_channels, count in groups:
        counts[day] += count
        templates[day][workflow_id] = None
        for channel in day_channels:
            channels[day][channel] = None
    return [
        ActivityGraphDay.model_validate(
            {"_id": day, "count": counts[day], "templates": sorted(templates[day]), "channels": sorted(channels[day])}
        )
        for day in sorted(counts, reverse=True)
    ]


# -- the console's Activity page and a run's page -------------------------------------------------

ACTIVITY_PAGE_SIZE = 50
# Runs a page of Activity checks at most against a channel or status filter (the rest is found by index).
ACTIVITY_SCAN = 2_000
# A run's page shows at most this many of its messages (a run makes one per channel step, a few per chat or push).
MAX_RUN_MESSAGES = 50
STEP_LABELS = {
    "in_app": "In-app",
    "email": "Email",
    "sms": "SMS",
    "chat": "Chat",
    "push": "Push",
    "digest": "Digest",
    "delay": "Delay",
    "throttle": "Throttle",
    "custom": "Custom",
    "http_request": "HTTP request",
}


@dataclass(frozen=True)
class ActivityRow:
    """One run as the Activity page lists it."""

    id: str
    transaction_id: str
    created_at: datetime
    workflow_name: str
    subscriber_id: str
    subscriber_email: str | None
    channels: list[str]
    status: str


async def activity_page(
    session: AsyncSession,
    principal: Principal,
    filters: ActivityFilter,
    *,
    older_than: str | None = None,
    limit: int = ACTIVITY_PAGE_SIZE,
) -> tuple[list[ActivityRow], str | None]:
    """Up to ``limit`` runs, newest first, older than the run ``older_than``; and the cursor of the next page, if any.

    Keyset pagination: a page costs the same whatever its depth, and there is
    no count of every match (which would read them all). A channel or status
    filter is checked on at most :data:`ACTIVITY_SCAN` runs per page, so a
    page may show fewer than ``limit`` runs and still have older ones after
    it. An ``older_than`` that is not a run of the environment starts at the newest.
    """
    repository = NotificationRepository(session)
    cursor = await repository.get(principal.environment_id, older_than) if older_than else None
    notifications, next_cursor = await repository.newest(
        principal.environment_id, filters, older_than=cursor, limit=limit, scan=ACTIVITY_SCAN
    )
    ids = [notification.id for notification in notifications]
    statuses = await repository.step_statuses(principal.environment_id, ids)
    subscribers = {s.id: s for s in await repository.subscribers(principal.environment_id, list({n.subscriber_id for n in notifications}))}
    workflows = {w.id: w for w in await repository.workflows(principal.environment_id, list({n.workflow_id for n in notifications}))}
    rows = []
    for notification in notifications:
        subscriber = subscribers.get(notification.subscriber_id)
        workflow = workflows.get(notification.workflow_id)
        rows.append(
            ActivityRow(
                id=notification.id,
                transaction_id=notification.transaction_id,
                created_at=notification.created_at,
                workflow_name=workflow.name if workflow is not None else "(deleted workflow)",
                subscriber_id=subscriber.subscriber_id if subscriber is not None else "(deleted subscriber)",
                subscriber_email=subscriber.email if subscriber is not None else None,
                channels=[str(channel) for channel in notification.channels or []],
                status=run_status(statuses.get(notification.id, [])),
            )
        )
    return rows, next_cursor


@dataclass(frozen=True)
class Reason:
    """Why a step did not simply send: ``kind`` is failed, skipped, held, throttled, failed over, not sent,
    retrying or warning; ``text`` is the engine's own words (its execution details)."""

    step: str
    kind: str
    text: str


@dataclass
class RunView:
    activity: ActivityNotification
    status: str
    reasons: list[Reason]
    # Job id -> the messages that step made.
    messages: dict[str, list[MessageSchema]]


def step_label(job: ActivityJob, position: int) -> str:
    """"Step 2: Email (Welcome email)": where the step is, its channel, and its name when it has one."""
    name = job.step.name if job.step.name else None
    label = f"Step {position}: {STEP_LABELS.get(job.type, job.type)}"
    return f"{label} ({name})" if name and name.lower() != job.type else label


def _last(details: list[ActivityExecutionDetail], *statuses: str) -> ActivityExecutionDetail | None:
    return next((detail for detail in reversed(details) if detail.status in statuses), None)


def explain(job: ActivityJob, step: str) -> list[Reason]:
    """Why this step skipped, held, throttled, failed over or failed, in the engine's words (none when it simply ran)."""
    details = job.executionDetails
    reasons: list[Reason] = []
    if job.status == "failed":
        found = _last(details, "Failed")
        reasons.append(Reason(step, "failed", found.detail if found else "The step failed"))
    elif job.status == "skipped":
        found = _last(details, "Warning") or _last(details, "Success")
        reasons.append(Reason(step, "skipped", found.detail if found else "The step was skipped"))
    elif job.status == "canceled":
        found = _last(details, "Warning", "Success", "Failed")
        text = found.detail if found else "The step was canceled"
        kind = "throttled" if text.startswith("Throttled") else "not sent"
        reasons.append(Reason(step, kind, text))
    elif job.status in WAITING_JOB_STATUSES:
        found = _last(details, "Pending")
        if found is not None and found.detail.startswith("Held by"):
            reasons.append(Reason(step, "held", found.detail))
        elif found is not None and found.detail.startswith("Will retry"):
            failure = _last(details, "Failed")
            reasons.append(Reason(step, "retrying", f"{failure.detail}; {found.detail}" if failure else found.detail))
    elif job.status == "completed":
        sent = _last(details, "Success")
        if sent is not None and "(failover)" in sent.detail:
            before = [d.detail for d in details if d.status in ("Failed", "Warning") and d.createdAt <= sent.createdAt]
            reasons.append(Reason(step, "failed over", "; ".join([*before, sent.detail])))
        else:
            reasons.extend(Reason(step, "warning", d.detail) for d in details if d.status == "Warning")
    return reasons


async def run_view(session: AsyncSession, principal: Principal, notification_id: str) -> RunView:
    """A run with its steps, the messages they made, and why any step did not simply send."""
    activity = await get_activity(session, principal, notification_id)
    rows = await MessageRepository(session).of_notification(
        principal.environment_id, activity.transactionId, activity.id, limit=MAX_RUN_MESSAGES
    )
    messages: dict[str, list[MessageSchema]] = defaultdict(list)
    for row in rows:
        messages[row.job_id or ""].append(message_schema(row))
    reasons = [
        reason
        for position, job in enumerate(activity.jobs, start=1)
        for reason in explain(job, step_label(job, position))
    ]
    return RunView(
        activity=activity,
        status=run_status([job.status for job in activity.jobs]),
        reasons=reasons,
        messages=dict(messages),
    )
