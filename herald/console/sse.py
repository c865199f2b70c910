"""Server-sent events (``text/event-stream``) for the console's live parts.

:func:`event_stream` turns waiting for a signal into a stream a browser's
``EventSource`` reads: an event when the signal came, a comment line every
``heartbeat`` seconds otherwise (so proxies keep the connection and a gone
browser is noticed), and an end after ``lifetime`` seconds (the browser
reconnects by itself, after ``retry`` ms), so no stream lives for ever.
The page's script reacts to an event by fetching the fresh rows (a fragment
URL), so an event carries no data of its own and nothing can leak through it.

:func:`activity_events` is the stream of "this environment's activity
changed" (herald.realtime.activity), which the Activity page listens to.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import StreamingResponse

from herald.realtime.activity import ActivityHub

HEARTBEAT_SECONDS = 15.0
LIFETIME_SECONDS = 600.0
RETRY_MS = 3000


def format_event(event: str, data: str = "{}") -> bytes:
    lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
    return f"event: {event}\n{lines}\n".encode()


async def event_stream(
    request: Request,
    wait: Callable[[float], Awaitable[bool]],
    event: str,
    *,
    heartbeat: float = HEARTBEAT_SECONDS,
    lifetime: float = LIFETIME_SECONDS,
) -> AsyncIterator[bytes]:
    """Yield ``event`` each time ``wait(timeout)`` says the signal came; comments in between."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + lifetime
    yield f"retry: {RETRY_MS}\n: connected\n\n".encode()
    while loop.time() < ends:
        changed = await wait(min(heartbeat, max(0.0, ends - loop.time())))
        if await request.is_disconnected():
            return
        yield format_event(event) if changed else b": keep-alive\n\n"


def sse_response(stream: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        # No buffering by a proxy in front (nginx honours this header).
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def activity_events(request: Request, hub: ActivityHub, environment_id: str) -> StreamingResponse:
    """``event: activity`` whenever this environment's activity changes (a new run, a step's outcome)."""

    async def stream() -> AsyncIterator[bytes]:
        async with hub.watch(environment_id) as watch:
            async for chunk in event_stream(request, watch.wait, "activity"):
                yield chunk

    return sse_response(stream())
