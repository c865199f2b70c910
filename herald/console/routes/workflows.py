"""The Workflows page: the environment's workflows with search and the active switch; a workflow's steps.

Editing a workflow's steps is not here yet: a workflow's page shows them as they are.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter
from starlette.responses import Response

from herald.console.deps import ConsoleDep
from herald.kit.pagination import PageParams
from herald.workflows import service

router = APIRouter()

PAGE_SIZE = 50
MAX_SEARCH = 200
# A page number past this is not a page anyone reads (and bounds the offset).
MAX_PAGE = 10_000


def _page_number(value: str | None) -> int:
    try:
        return min(max(int(value or "1"), 1), MAX_PAGE)
    except ValueError:
        return 1


def _link(search: str, page: int) -> str:
    query = {key: value for key, value in (("search", search), ("page", str(page) if page > 1 else "")) if value}
    return "/console/workflows" + ("?" + urlencode(query) if query else "")


def step_summary(step: dict[str, Any]) -> dict[str, Any]:
    """What the summary shows of a stored step: its name, type, whether active, subject, filters, variants."""
    template = step.get("template") if isinstance(step.get("template"), dict) else {}
    metadata = step.get("metadata") if isinstance(step.get("metadata"), dict) else {}
    return {
        "name": str(step.get("name") or template.get("type") or "step")[:300],
        "type": str(template.get("type") or "")[:32],
        "active": step.get("active", True) is not False,
        "subject": str(template.get("subject") or template.get("title") or "")[:300],
        "filters": len(step.get("filters") or []),
        "variants": len(step.get("variants") or []),
        "timing": ", ".join(
            f"{key} {metadata[key]}" for key in ("amount", "unit", "type") if isinstance(metadata.get(key), (str, int))
        )[:200],
    }


@router.get("/workflows")
async def workflows_page(console: ConsoleDep) -> Response:
    console.authorize("workflows.read")
    query = console.request.query_params
    search = (query.get("search") or "").strip()[:MAX_SEARCH]
    page = _page_number(query.get("page"))
    views, total = await service.list_workflows(
        console.db, console.principal, PageParams(page=page - 1, limit=PAGE_SIZE), search or None, search_tags=True
    )
    return console.render(
        "workflows.html",
        title="Workflows",
        workflows=[view.workflow for view in views],
        groups={view.workflow.id: view.group.name if view.group else "" for view in views},
        total=total,
        search=search,
        newer=_link(search, page - 1) if page > 1 else None,
        older=_link(search, page + 1) if page * PAGE_SIZE < total else None,
        back=_link(search, page),
    )


@router.get("/workflows/{workflow_id}")
async def workflow_page(workflow_id: str, console: ConsoleDep) -> Response:
    console.authorize("workflows.read")
    view = await service.get_workflow(console.db, console.principal, workflow_id[:64])
    return console.render(
        "workflow.html",
        title=view.workflow.name,
        workflow=view.workflow,
        group=view.group.name if view.group else "",
        steps=[step_summary(step) for step in (view.workflow.steps or []) if isinstance(step, dict)],
    )


@router.post("/workflows/{workflow_id}/active")
async def set_active(workflow_id: str, console: ConsoleDep) -> Response:
    """The row's switch: ``active`` is "true" or "false"; back to the list the form came from."""
    console.authorize("workflows.write")
    form = await console.form()
    active = console.field(form, "active", 8) == "true"
    view = await service.set_workflow_status(console.db, console.principal, workflow_id[:64], active)
    console.record("workflow.status.updated", "workflow", view.workflow.id, changes={"active": active})
    back = console.field(form, "next", 500)
    if not back.startswith("/console/workflows"):
        back = "/console/workflows"
    state = "active" if active else "inactive"
    return console.redirect(back, flash=f"{view.workflow.name} is now {state}")
