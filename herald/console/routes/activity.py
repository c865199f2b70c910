"""The Activity page (runs newest first, search, filters, live new runs) and a run's page (why it did what it did)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter
from starlette.responses import Response

from herald.console import security
from herald.console.deps import Console, ConsoleDep
from herald.console.rendering import render_html
from herald.kit.pagination import PageParams
from herald.kit.time import utcnow
from herald.notifications import service
from herald.notifications.repository import RUN_STATUSES, ActivityFilter
from herald.notifications.schemas import CHANNELS
from herald.workflows import service as workflows

router = APIRouter()

FILTERS = ("search", "workflow", "channel", "status", "since")
# A subscriberId, an email (320), a phone number or a transactionId (255): longer is none of them.
MAX_SEARCH = 320
# The Workflow select lists this many workflows, newest first.
MAX_WORKFLOW_OPTIONS = 100
SINCE = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7), "30d": timedelta(days=30)}
SINCE_OPTIONS = (("", "Any time"), ("1h", "Last hour"), ("24h", "Last 24 hours"), ("7d", "Last 7 days"), ("30d", "Last 30 days"))
STATUS_LABELS = {"failed": "Failed", "pending": "In progress", "completed": "Completed"}
# What a run's page shows at most of a payload, a provider's raw answer, an email's HTML.
MAX_PAYLOAD_CHARS = 20_000
MAX_RAW_CHARS = 2_000
MAX_EMAIL_HTML = 300_000


def _values(console: Console) -> dict[str, str]:
    query = console.request.query_params
    values = {name: (query.get(name) or "").strip()[:MAX_SEARCH] for name in FILTERS}
    if values["channel"] and values["channel"] not in CHANNELS:
        console.fail("channel", "Choose a channel from the list")
    if values["status"] and values["status"] not in RUN_STATUSES:
        console.fail("status", "Choose a status from the list")
    if values["since"] and values["since"] not in SINCE:
        console.fail("since", "Choose a time from the list")
    if len(values["workflow"]) > 64:
        console.fail("workflow", "Choose a workflow from the list")
    return values


def _filter(values: dict[str, str], console: Console) -> ActivityFilter:
    valid = {name: value for name, value in values.items() if value and name not in console.errors}
    since = SINCE.get(valid.get("since", ""))
    return ActivityFilter(
        search=valid.get("search"),
        workflow_ids=[valid["workflow"]] if "workflow" in valid else None,
        channels=[valid["channel"]] if "channel" in valid else None,
        statuses=[valid["status"]] if "status" in valid else None,
        after=utcnow() - since if since is not None else None,
    )


def _query(values: dict[str, str], **extra: str) -> str:
    return urlencode({**{name: value for name, value in values.items() if value}, **extra})


@router.get("/activity")
async def activity(console: ConsoleDep) -> Response:
    console.authorize("activity.read")
    values = _values(console)
    older_than = (console.request.query_params.get("older") or "")[:64] or None
    rows, next_cursor = await service.activity_page(console.db, console.principal, _filter(values, console), older_than=older_than)
    found, _ = await workflows.list_workflows(console.db, console.principal, PageParams(page=0, limit=MAX_WORKFLOW_OPTIONS))
    query = _query(values)
    return console.render(
        "activity.html",
        title="Activity",
        status_code=422 if console.errors else 200,
        rows=rows,
        filters=values,
        filtered=any(values.values()),
        workflow_options=[("", "All workflows")] + [(view.workflow.id, view.workflow.name) for view in found],
        channel_options=[("", "All channels")] + [(channel, service.STEP_LABELS[channel]) for channel in CHANNELS],
        status_options=[("", "All statuses")] + [(status, STATUS_LABELS[status]) for status in RUN_STATUSES],
        since_options=SINCE_OPTIONS,
        status_labels=STATUS_LABELS,
        step_labels=service.STEP_LABELS,
        page_size=service.ACTIVITY_PAGE_SIZE,
        scan=service.ACTIVITY_SCAN,
        # Live rows only on the first page: a later page would move under its reader.
        live_rows="/console/activity/rows" + (f"?{query}" if query else "") if older_than is None else None,
        older="/console/activity?" + _query(values, older=next_cursor) if next_cursor else None,
        newest="/console/activity" + (f"?{query}" if query else "") if older_than else None,
    )


@router.get("/activity/rows")
async def activity_rows(console: ConsoleDep) -> Response:
    """The first page's rows alone (``<tr>`` elements), which the page's script puts in when a run comes or changes."""
    console.authorize("activity.read")
    values = _values(console)
    rows, _ = await service.activity_page(console.db, console.principal, _filter(values, console))
    context = {"rows": rows, "status_labels": STATUS_LABELS, "step_labels": service.STEP_LABELS}
    return render_html("activity_rows.html", context, headers={"Cache-Control": "no-store"})


def _bounded_json(value: Any, limit: int) -> str:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"\n… (cut: {len(text) - limit:,} more characters)"


def _bounded_text(value: str | None, limit: int) -> str:
    if not value:
        return ""
    return value if len(value) <= limit else value[:limit] + f"… (cut: {len(value) - limit:,} more characters)"


@router.get("/activity/{notification_id}")
async def run_page(notification_id: str, console: ConsoleDep) -> Response:
    console.authorize("activity.read")
    run = await service.run_view(console.db, console.principal, notification_id[:64])
    activity = run.activity
    steps = [
        {
            "label": service.step_label(job, position),
            "job": job,
            "messages": run.messages.get(job.id, []),
        }
        for position, job in enumerate(activity.jobs, start=1)
    ]
    for messages in run.messages.values():
        for message in messages:
            if message.channel == "email" and isinstance(message.content, str):
                security.allow_inline_styles(console.request.scope, _bounded_text(message.content, MAX_EMAIL_HTML))
    workflow_name = activity.template.name if activity.template is not None else "(deleted workflow)"
    return console.render(
        "run.html",
        title=f"Run of {workflow_name}",
        run=run,
        activity=activity,
        workflow_name=workflow_name,
        steps=steps,
        status_labels=STATUS_LABELS,
        step_labels=service.STEP_LABELS,
        payload=_bounded_json(activity.payload, MAX_PAYLOAD_CHARS),
        bounded_text=_bounded_text,
        max_raw=MAX_RAW_CHARS,
        max_email_html=MAX_EMAIL_HTML,
    )
