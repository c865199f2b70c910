"""Live parts: the server-sent events the pages' scripts listen to (herald.console.sse)."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from herald.console.deps import ConsoleDep
from herald.console.sse import activity_events

router = APIRouter()


@router.get("/live/activity")
async def activity_stream(console: ConsoleDep) -> Response:
    """``event: activity`` each time the chosen environment's activity changes (a new run, a step's outcome).

    The Activity page's script fetches its fresh rows on each event.
    """
    console.authorize("activity.read")
    assert console.environment is not None
    return activity_events(console.request, console.request.app.state.activity, console.environment.id)
