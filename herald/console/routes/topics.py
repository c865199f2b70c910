"""The Topics pages: the environment's topics, a topic's members, adding and removing subscribers."""

from __future__ import annotations

import re

from fastapi import APIRouter
from pydantic import ValidationError
from starlette.responses import Response

from herald.console.deps import Console, ConsoleDep
from herald.kit.errors import ConflictError, HeraldError
from herald.topics import service
from herald.topics.schemas import CreateTopicRequest

router = APIRouter()

TOPICS_PER_PAGE = 50
MEMBERS_PER_PAGE = 50
# subscriberIds added at once from the form (the API's own bound).
MAX_ADDED = 100
_SEPARATORS = re.compile(r"[\s,;]+")


async def _topics_page(console: Console, *, status_code: int = 200, key: str = "", name: str = "") -> Response:
    console.authorize("subscribers.read")
    asked = console.request.query_params.get("page", "")[:6]
    page_number = int(asked) if asked.isdigit() and int(asked) > 0 else 1
    found = await service.topics_with_counts(console.db, console.principal, offset=(page_number - 1) * TOPICS_PER_PAGE, limit=TOPICS_PER_PAGE)
    return console.render(
        "topics.html",
        title="Topics",
        status_code=status_code,
        page=found,
        page_number=page_number,
        last_page=page_number * TOPICS_PER_PAGE >= found.total,
        key=key,
        name=name,
    )


@router.get("/topics")
async def topics_page(console: ConsoleDep) -> Response:
    return await _topics_page(console)


@router.post("/topics")
async def create_topic(console: ConsoleDep) -> Response:
    console.authorize("topics.write")
    form = await console.form()
    key, name = console.field(form, "key", 300), console.field(form, "name", 300)
    try:
        request = CreateTopicRequest(key=key, name=name or key)
        topic = await service.create_topic(console.db, console.principal, request)
    except ValidationError as exc:
        error = exc.errors()[0]
        field_name = str(error["loc"][0]) if error["loc"] else "key"
        console.fail(field_name, f"{'Key' if field_name == 'key' else 'Name'}: {error['msg']}")
        return await _topics_page(console, status_code=422, key=key, name=name)
    except ConflictError:
        console.fail("key", f"A topic with the key {key} exists already")
        return await _topics_page(console, status_code=409, key=key, name=name)
    console.record("topic.created", "topic", topic.key, changes={"key": topic.key, "name": topic.name})
    return console.redirect(f"/console/topics/{topic.key}", flash=f"Topic {topic.key} created")


def _subscriber_ids(text: str) -> list[str]:
    return [item for item in _SEPARATORS.split(text) if item]


async def _topic_page(console: Console, key: str, *, status_code: int = 200, added: str = "", not_found: list[str] | None = None) -> Response:
    console.authorize("subscribers.read")
    after = (console.request.query_params.get("after") or "").strip()[:64] or None
    page = await service.members_page(console.db, console.principal, key[:255], after=after, limit=MEMBERS_PER_PAGE)
    return console.render(
        "topic.html",
        title=f"Topic {page.topic.key}",
        status_code=status_code,
        page=page,
        first_page=after is not None,
        added=added,
        not_found=not_found or [],
    )


@router.get("/topics/{key}")
async def topic_page(console: ConsoleDep, key: str) -> Response:
    return await _topic_page(console, key)


@router.post("/topics/{key}/subscribers")
async def add_subscribers(console: ConsoleDep, key: str) -> Response:
    console.authorize("topics.write")
    form = await console.form()
    text = console.field(form, "subscriberIds", 30_000)
    await service.require_topic(console.db, console.principal, key[:255])
    ids = _subscriber_ids(text)
    if not ids:
        console.fail("subscriberIds", "Enter at least one subscriberId")
    elif len(ids) > MAX_ADDED:
        console.fail("subscriberIds", f"At most {MAX_ADDED} subscriberIds at once")
    if console.errors:
        return await _topic_page(console, key, status_code=422, added=text)
    try:
        assignment = await service.add_subscribers(console.db, console.principal, key, ids)
    except HeraldError as exc:
        console.errors_from(exc, "subscriberIds")
        return await _topic_page(console, key, status_code=exc.status_code, added=text)
    console.record(
        "topic.subscribers_added",
        "topic",
        key,
        changes={"subscriberIds": assignment.succeeded, "notFound": assignment.not_found},
    )
    if assignment.not_found:
        return await _topic_page(console, key, not_found=assignment.not_found, added=" ".join(assignment.not_found))
    return console.redirect(f"/console/topics/{key}", flash=f"{len(assignment.succeeded)} added to {key}")


@router.post("/topics/{key}/subscribers/remove")
async def remove_subscriber(console: ConsoleDep, key: str) -> Response:
    console.authorize("topics.write")
    form = await console.form()
    subscriber_id = console.field(form, "subscriberId", 255)
    await service.require_topic(console.db, console.principal, key[:255])
    await service.remove_subscribers(console.db, console.principal, key, [subscriber_id])
    console.record("topic.subscribers_removed", "topic", key, changes={"subscriberIds": [subscriber_id]})
    return console.redirect(f"/console/topics/{key}", flash=f"{subscriber_id} removed from {key}")
