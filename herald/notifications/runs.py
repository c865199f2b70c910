"""``/v1/activity/workflow-runs``: the runs Novu's dashboard lists, from the console's Activity queries.

A workflow run is a notification (one workflow for one subscriber). The list
is the console's Activity page (``NotificationRepository.newest``: keyset
pages by index, a channel or status filter checked on a bounded window), and
each run is shaped from the activity feed's own answer (``activities_of``), so
the three views agree. Novu's run ``status`` is ``error`` when a step failed,
``pending`` while one is still to run, else ``success``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.auth import Principal
from herald.kit.errors import NotFoundError
from herald.kit.schemas import compact
from herald.models import Notification
from herald.notifications.repository import ActivityFilter, NotificationRepository, run_status
from herald.notifications.schemas import (
    ActivityJob,
    ActivityNotification,
    WorkflowRun,
    WorkflowRunDetail,
    WorkflowRunsPage,
)
from herald.notifications.service import ACTIVITY_SCAN, activities_of

# Novu's run statuses -> the console's (herald/notifications/repository.py RUN_STATUSES).
RUN_STATUSES = {"success": "completed", "error": "failed", "pending": "pending"}
_NOVU_STATUS = {value: key for key, value in RUN_STATUSES.items()}
CHANNEL_STEPS = ("in_app", "email", "sms", "chat", "push")


def _lifecycle(jobs: Sequence[ActivityJob], status: str) -> str:
    """Novu's ``deliveryLifecycleStatus`` of a run, from its steps."""
    if status == "error":
        return "errored"
    if status == "pending":
        return "pending"
    statuses = [job.status for job in jobs]
    if any(job.status == "completed" and job.type in CHANNEL_STEPS for job in jobs):
        return "sent"
    for final in ("merged", "canceled"):
        if final in statuses:
            return final
    return "skipped" if statuses else "pending"


def _steps(activity: ActivityNotification) -> list[dict[str, Any]]:
    steps = []
    for job in activity.jobs:
        details = job.executionDetails
        created = details[0].createdAt if details else activity.createdAt
        steps.append(
            compact(
                {
                    "stepRunId": job.id,
                    "stepId": job.step.name or job.step.id,
                    "stepType": job.type,
                    "stepName": job.step.name or job.type,
                    "providerId": job.providerId or None,
                    "status": job.status,
                    "createdAt": created,
                    "updatedAt": job.updatedAt or created,
                    "digest": job.digest,
                    "executionDetails": [
                        compact(
                            {
                                "_id": detail.id,
                                "createdAt": detail.createdAt,
                                "status": detail.status,
                                "detail": detail.detail,
                                "providerId": detail.providerId,
                                "raw": detail.raw,
                            }
                        )
                        for detail in details
                    ],
                }
            )
        )
    return steps


def _run(activity: ActivityNotification, notification: Notification, *, with_steps: bool) -> dict[str, Any]:
    status = _NOVU_STATUS[run_status([job.status for job in activity.jobs])]
    steps = _steps(activity)
    updated = max([activity.createdAt, *(step["updatedAt"] for step in steps)])
    template = activity.template
    return compact(
        {
            "id": activity.id,
            "workflowRunId": activity.id,
            "workflowId": activity.template_id,
            "workflowName": template.name if template is not None else "(deleted workflow)",
            "organizationId": activity.organization_id,
            "environmentId": activity.environment_id,
            "subscriberId": activity.subscriber_id,
            "internalSubscriberId": activity.subscriber_id,
            "externalSubscriberId": activity.subscriber.subscriberId if activity.subscriber is not None else None,
            "status": status,
            "deliveryLifecycleStatus": _lifecycle(activity.jobs, status),
            "triggerIdentifier": template.triggers[0].identifier if template is not None and template.triggers else "",
            "transactionId": activity.transactionId,
            "channels": [str(channel) for channel in activity.channels],
            "payload": activity.payload,
            "isDigest": any(job.type == "digest" for job in activity.jobs),
            "digestedWorkflowRunId": activity.digested_notification_id,
            "createdAt": activity.createdAt,
            "updatedAt": updated,
            "steps": steps if with_steps else None,
        }
    )


async def workflow_runs(
    session: AsyncSession, principal: Principal, filters: ActivityFilter, *, cursor: str | None, limit: int
) -> WorkflowRunsPage:
    """Up to ``limit`` runs, newest first, older than the run ``cursor`` (a ``nextCursor`` given before)."""
    repository = NotificationRepository(session)
    older_than = await repository.get(principal.environment_id, cursor) if cursor else None
    if cursor and older_than is None:
        raise NotFoundError(f"Workflow run with id {cursor} not found (cursor)")
    notifications, next_cursor = await repository.newest(
        principal.environment_id, filters, older_than=older_than, limit=limit, scan=ACTIVITY_SCAN
    )
    activities = await activities_of(repository, principal.environment_id, notifications)
    runs = [
        WorkflowRun.model_validate(_run(activity, notification, with_steps=False))
        for activity, notification in zip(activities, notifications, strict=True)
    ]
    return WorkflowRunsPage(data=runs, nextCursor=next_cursor, hasMore=next_cursor is not None, pageSize=limit)


async def workflow_run(session: AsyncSession, principal: Principal, run_id: str) -> WorkflowRunDetail:
    repository = NotificationRepository(session)
    notification = await repository.get(principal.environment_id, run_id)
    if notification is None:
        raise NotFoundError(f"Workflow run with id {run_id} not found")
    [activity] = await activities_of(repository, principal.environment_id, [notification])
    run = _run(activity, notification, with_steps=True)
    overrides = next((job.overrides for job in activity.jobs if job.overrides), None)
    return WorkflowRunDetail.model_validate({**run, "payload": activity.payload, **compact({"overrides": overrides})})
