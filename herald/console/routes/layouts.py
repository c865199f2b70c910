"""The Layouts page: the environment's email layouts, each edited with a preview, and the default one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError
from starlette.responses import Response

from herald.console import security
from herald.console.deps import Console, ConsoleDep
from herald.engine.templates import TemplateError, TemplateProblem, check_template
from herald.kit.errors import ConflictError, ValidationFailed, validation_errors
from herald.layouts import service
from herald.layouts.schemas import CreateLayoutRequestDto, UpdateLayoutRequestDto
from herald.models import Layout
from herald.previews import service as previews

router = APIRouter()

MAX_LAYOUTS_LISTED = 200
MAX_CONTENT_CHARS = 100_000
SAMPLE_BODY = (
    "<h1>Hello {{ subscriber.firstName }}</h1>\n"
    "<p>This is a sample email: your emails' bodies go where the layout places them.</p>"
)
SAMPLE_CONTEXT: dict[str, Any] = {
    "subscriber": {"subscriberId": "sample", "firstName": "Ada", "lastName": "Lovelace", "email": "ada@example.com"},
    "payload": {},
}
DEFAULT_CONTENT = (
    "<!DOCTYPE html>\n<html lang=\"en\">\n<body>\n{{{body}}}\n"
    "<footer><p>Sent by {{ branding.name | default: 'us' }}</p></footer>\n</body>\n</html>\n"
)


async def _preview(console: Console, content: str) -> tuple[str | None, list[TemplateProblem]]:
    """The sample email inside ``content`` (through the preview service), or what stops it."""
    problems = check_template(content)
    if problems:
        return None, problems
    try:
        rendered = await previews.preview_layout(console.db, console.principal.environment_id, content, SAMPLE_CONTEXT, SAMPLE_BODY)
    except TemplateError as exc:
        return None, [TemplateProblem(exc.line, exc.column, exc.message)]
    security.allow_inline_styles(console.request.scope, rendered.html)
    return rendered.html, []


def _fields(console: Console, form: Any) -> dict[str, str]:
    return {
        "name": console.field(form, "name", 200),
        "identifier": console.field(form, "identifier", 200),
        "description": console.field(form, "description", 1000),
        "content": (form.get("content") or "")[:MAX_CONTENT_CHARS] if isinstance(form.get("content"), str) else "",
    }


def _show_problems(console: Console, problems: list[TemplateProblem]) -> None:
    for problem in problems[:1]:
        console.fail("content", f"The layout cannot be used: {problem}")


async def _edit_page(
    console: Console, layout: Layout | None, values: dict[str, str], *, status_code: int = 200, preview_now: bool = True
) -> Response:
    preview, problems = await _preview(console, values["content"]) if preview_now else (None, [])
    _show_problems(console, problems)
    title = f"Layout {layout.name}" if layout is not None else "New layout"
    return console.render(
        "layouts_edit.html",
        title=title,
        status_code=status_code,
        layout=layout,
        values=values,
        preview=preview,
        problems=problems,
        may_write=console.allows("layouts.write"),
    )


def _values_of(layout: Layout) -> dict[str, str]:
    return {
        "name": layout.name,
        "identifier": layout.identifier,
        "description": layout.description or "",
        "content": layout.content or "",
    }


def _refused(console: Console, exc: ValidationError | ValidationFailed | ConflictError) -> int:
    if isinstance(exc, ValidationError):
        errors = validation_errors(exc.errors())
        for name, entry in errors.items():
            console.fail(name if name in ("name", "identifier", "content") else "name", entry["messages"][0])
        return 422
    console.errors_from(exc, "name")
    return exc.status_code


@router.get("/layouts")
async def layouts_page(console: ConsoleDep) -> Response:
    console.authorize("workflows.read")
    rows, total = await service.list_page(console.db, console.principal, offset=0, limit=MAX_LAYOUTS_LISTED, order_by="name", descending=False)
    return console.render(
        "layouts.html", title="Layouts", layouts=rows, total=total, may_write=console.allows("layouts.write")
    )


@router.get("/layouts/new")
async def new_layout(console: ConsoleDep) -> Response:
    console.authorize("layouts.write")
    return await _edit_page(console, None, {"name": "", "identifier": "", "description": "", "content": DEFAULT_CONTENT})


@router.post("/layouts/new")
async def create_layout(console: ConsoleDep) -> Response:
    console.authorize("layouts.write")
    form = await console.form()
    values = _fields(console, form)
    if form.get("intent") == "preview":
        return await _edit_page(console, None, values)
    try:
        body = CreateLayoutRequestDto.model_validate({**values, "description": values["description"] or None})
        layout = await service.create_v1(console.db, console.principal, body)
    except (ValidationError, ValidationFailed, ConflictError) as exc:
        status_code = _refused(console, exc)
        return await _edit_page(console, None, values, status_code=status_code, preview_now=False)
    console.record("layout.created", "layout", layout.id, changes={"name": layout.name, "identifier": layout.identifier})
    return console.redirect(f"/console/layouts/{layout.id}", flash=f"Layout {layout.name} created")


@router.get("/layouts/{layout_id}")
async def layout_page(layout_id: str, console: ConsoleDep) -> Response:
    console.authorize("workflows.read")
    layout = await service.require_layout(console.db, console.principal, layout_id[:200])
    return await _edit_page(console, layout, _values_of(layout))


@router.post("/layouts/{layout_id}")
async def update_layout(layout_id: str, console: ConsoleDep) -> Response:
    console.authorize("layouts.write")
    form = await console.form()
    values = _fields(console, form)
    layout = await service.require_layout(console.db, console.principal, layout_id[:200])
    if form.get("intent") == "preview":
        return await _edit_page(console, layout, values)
    before = _values_of(layout)
    try:
        body = UpdateLayoutRequestDto.model_validate(values)
        layout = await service.update_v1(console.db, console.principal, layout.id, body)
    except (ValidationError, ValidationFailed, ConflictError) as exc:
        status_code = _refused(console, exc)
        return await _edit_page(console, layout, values, status_code=status_code, preview_now=False)
    changed = sorted(name for name, value in values.items() if before.get(name) != value)
    console.record("layout.updated", "layout", layout.id, changes={"fields": changed})
    return console.redirect(f"/console/layouts/{layout.id}", flash=f"Layout {layout.name} saved")


@router.post("/layouts/{layout_id}/default")
async def make_default(layout_id: str, console: ConsoleDep) -> Response:
    console.authorize("layouts.write")
    layout = await service.set_default(console.db, console.principal, layout_id[:200])
    console.record("layout.default_set", "layout", layout.id, changes={"name": layout.name})
    return console.redirect("/console/layouts", flash=f"{layout.name} is the default layout")
