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
from herald.models import ExecutionDetail, Job, Notification, Subscriber, Workflow
from herald.notifications.repository import ActivityFilter, NotificationRepository
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
