"""The console's landing and the Environment select."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from herald.console.deps import ConsoleDep
from herald.console.rendering import safe_next
from herald.members import sessions

router = APIRouter()

# Where /console lands, the first that exists: Activity once it is built, else Members.
LANDINGS = ("/activity", "/members")


@router.get("/")
async def landing(console: ConsoleDep) -> Response:
    paths = console.request.app.state_page_paths
    target = next((path for path in LANDINGS if path in paths), "/members")
    return console.redirect("/console" + target)


@router.post("/environment")
async def choose_environment(console: ConsoleDep) -> Response:
    """Keep the chosen environment in the session: every page shows that one's data."""
    form = await console.form()
    environment_id = console.field(form, "environment", 64)
    chosen = next((env for env in console.environments if env.id == environment_id), None)
    back = safe_next(console.field(form, "next", 500), "/console")
    if chosen is None:
        return console.redirect(back, flash="That environment does not exist")
    assert console.signed_in is not None
    await sessions.choose_environment(console.db, console.signed_in, chosen.id)
    return console.redirect(back, flash=f"Showing {chosen.name}")
