"""The Subscribers pages: search, a subscriber's page, and the CSV import with its progress."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import urlencode

from fastapi import APIRouter
from starlette.background import BackgroundTask
from starlette.datastructures import UploadFile
from starlette.responses import Response

from herald.console.deps import Console, ConsoleDep
from herald.console.sse import HEARTBEAT_SECONDS, LIFETIME_SECONDS, RETRY_MS, format_event, sse_response
from herald.kit.errors import ValidationFailed
from herald.messages import service as messages
from herald.preferences.service import read_preferences
from herald.subscribers import imports
from herald.subscribers import service as subscribers
from herald.subscribers.channels import channels_as_set

router = APIRouter()

RECENT_MESSAGES = 20
# How often a progress stream looks at the store too, for an import another process runs.
PROGRESS_POLL_SECONDS = 1.0


@router.get("/subscribers")
async def subscribers_page(console: ConsoleDep) -> Response:
    console.authorize("subscribers.read")
    query = console.request.query_params
    search = (query.get("search") or "").strip()[: subscribers.MAX_FIND_TEXT]
    before = (query.get("before") or "").strip()[:64] or None
    rows, older = await subscribers.find_subscribers(console.db, console.principal, search, before=before)
    return console.render(
        "subscribers.html",
        title="Subscribers",
        subscribers=rows,
        search=search,
        older="/console/subscribers?" + urlencode({k: v for k, v in {"search": search, "before": older}.items() if v}) if older else None,
        first_page="/console/subscribers?" + urlencode({"search": search} if search else {}) if before else None,
    )


async def _import_page(console: Console, *, status_code: int = 200) -> Response:
    console.authorize("subscribers.read")
    recent = await imports.recent_imports(console.db, console.principal)
    return console.render(
        "subscribers_import.html",
        title="Import subscribers",
        status_code=status_code,
        imports=recent,
        max_megabytes=imports.MAX_FILE_BYTES // (1024 * 1024),
        max_rows=imports.MAX_ROWS,
        columns=imports.ATTRIBUTES,
    )


@router.get("/subscribers/import")
async def import_form(console: ConsoleDep) -> Response:
    return await _import_page(console)


@router.post("/subscribers/import")
async def import_file(console: ConsoleDep) -> Response:
    """Store the file as an import and start its task once this request's transaction is committed."""
    console.authorize("subscribers.import")
    form = await console.form()
    upload = form.get("file")
    if not isinstance(upload, UploadFile) or not upload.filename:
        console.fail("file", "Choose a CSV file to import")
        return await _import_page(console, status_code=422)
    content = await upload.read(imports.MAX_FILE_BYTES + 1)
    try:
        started = await imports.start_import(
            console.db, console.principal, filename=upload.filename, content=content, member_email=console.member.email
        )
    except ValidationFailed as exc:
        console.errors_from(exc, "file")
        return await _import_page(console, status_code=422)
    console.record(
        "subscriber_import.started",
        "subscriber_import",
        started.id,
        changes={"filename": started.filename, "lines": started.total_rows, "bytes": started.size_bytes},
    )
    response = console.redirect(f"/console/subscribers/import/{started.id}", flash="The import has started")
    return _starting(console, response, started.id)


def _starting(console: Console, response: Response, import_id: str) -> Response:
    """``response``, which starts the import's task once sent (the request's transaction is committed by then)."""
    runner = imports.runner_of(console.request.app.state)

    async def begin() -> None:
        runner.start(import_id)

    response.background = BackgroundTask(begin)
    return response


async def _import_page_of(console: Console, import_id: str, template: str) -> Response:
    """An import's page or its progress part; an import whose process stopped is taken up again here."""
    console.authorize("subscribers.read")
    found = await imports.get_import(console.db, console.principal, import_id)
    claimed = await imports.runner_of(console.request.app.state).take_up_if_stalled(console.db, found)
    response = console.render(template, title=f"Import of {found.filename}", job=found)
    return _starting(console, response, found.id) if claimed else response


@router.get("/subscribers/import/{import_id}")
async def import_progress(console: ConsoleDep, import_id: str) -> Response:
    return await _import_page_of(console, import_id, "subscribers_import_progress.html")


@router.get("/subscribers/import/{import_id}/progress")
async def import_progress_fragment(console: ConsoleDep, import_id: str) -> Response:
    """The progress part of the page, for its script to swap in at each event."""
    return await _import_page_of(console, import_id, "subscribers_import_status.html")


@router.get("/subscribers/import/{import_id}/events")
async def import_events(console: ConsoleDep, import_id: str) -> Response:
    """``event: progress`` each time the import moves, ``event: done`` when it ends (and the stream with it)."""
    console.authorize("subscribers.read")
    found = await imports.get_import(console.db, console.principal, import_id)
    runner = imports.runner_of(console.request.app.state)
    sessionmaker = console.request.app.state.sessionmaker
    request, principal = console.request, console.principal

    async def stream() -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        ends = quiet_since = loop.time()
        ends += LIFETIME_SECONDS
        yield f"retry: {RETRY_MS}\n: connected\n\n".encode()
        seen: tuple[str, int] | None = (found.status, found.processed_rows)
        while seen is not None and seen[0] not in imports.FINISHED and loop.time() < ends:
            await runner.wait_for_progress(found.id, PROGRESS_POLL_SECONDS)
            if await request.is_disconnected():
                return
            async with sessionmaker() as session:
                now = await imports.progress_of(session, principal, found.id)
            if now != seen:
                seen, quiet_since = now, loop.time()
                yield format_event("progress")
            elif loop.time() - quiet_since >= HEARTBEAT_SECONDS:
                quiet_since = loop.time()
                yield b": keep-alive\n\n"
        if seen is not None and seen[0] in imports.FINISHED:
            yield format_event("done")

    return sse_response(stream())


@router.get("/subscribers/{subscriber_id}")
async def subscriber_page(console: ConsoleDep, subscriber_id: str) -> Response:
    console.authorize("subscribers.read")
    subscriber, topics = await subscribers.get_subscriber(console.db, console.principal, subscriber_id[:255], include_topics=True)
    preferences = await read_preferences(console.db, subscriber)
    recent, total = await messages.list_messages(
        console.db,
        console.principal,
        subscriber_id=subscriber.subscriber_id,
        channel=None,
        transaction_ids=None,
        offset=0,
        limit=RECENT_MESSAGES,
    )
    return console.render(
        "subscriber.html",
        title=f"Subscriber {subscriber.subscriber_id}",
        subscriber=subscriber,
        topics=topics or [],
        channels=channels_as_set(list(subscriber.channels or [])),
        preferences=preferences,
        messages=recent,
        total_messages=total,
    )
