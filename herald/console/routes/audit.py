"""The Audit log page: every change, newest first, filtered by action, actor, resource and time."""

from __future__ import annotations

from datetime import datetime, timedelta
from urllib.parse import urlencode

from fastapi import APIRouter
from starlette.responses import Response

from herald.audit import service
from herald.audit.repository import AuditFilter
from herald.console.deps import ConsoleDep
from herald.kit.time import parse_iso

router = APIRouter()

FILTERS = ("action", "actor", "resource", "from", "to")


def _day(value: str, *, end: bool = False) -> datetime | None:
    """A date (``2026-11-29``) or date-time from the form; the end of a day is the next day's start."""
    if not value:
        return None
    try:
        moment = parse_iso(value)
    except ValueError:
        return None
    return moment + timedelta(days=1) if end and len(value) <= 10 else moment


@router.get("/audit")
async def audit_log(console: ConsoleDep) -> Response:
    console.authorize("audit.read")
    query = console.request.query_params
    values = {name: (query.get(name) or "").strip()[:200] for name in FILTERS}
    since, until = _day(values["from"]), _day(values["to"], end=True)
    if values["from"] and since is None:
        console.fail("from", "Enter a date like 2026-11-29")
    if values["to"] and until is None:
        console.fail("to", "Enter a date like 2026-11-29")
    filters = AuditFilter(
        action=values["action"] or None,
        actor=values["actor"] or None,
        resource=values["resource"] or None,
        since=since,
        until=until,
    )
    page = await service.list_entries(
        console.db, console.organization_id, after=(query.get("after") or "")[:64] or None, filters=filters
    )
    names = {env.id: env.name for env in console.environments}
    older = None
    if page.next:
        older = "/console/audit?" + urlencode({**{k: v for k, v in values.items() if v}, "after": page.next})
    return console.render(
        "audit.html",
        title="Audit log",
        status_code=422 if console.errors else 200,
        entries=page.entries,
        filters=values,
        environment_names=names,
        older=older,
        first_page="/console/audit?" + urlencode({k: v for k, v in values.items() if v}) if query.get("after") else None,
    )
