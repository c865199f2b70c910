"""Subscriber use cases.

Writes follow Novu's upsert rules: only the attributes present in a body
change (an explicit null clears one), ``data`` is replaced as a whole, and
every change bumps ``__v``. Channel credentials belong to one active
integration of a chat or push provider; an entry is matched by provider and
integration, as Novu does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.errors import BadRequestError, ConflictError, NotFoundError, UnprocessableError, ValidationFailed
from herald.kit.ids import new_id
from herald.kit.time import isoformat, utcnow
from herald.models import Subscriber
from herald.subscribers.channels import TooManyDeviceTokens, mask_channels, merge_channel
from herald.subscribers.repository import SubscriberRepository, SubscriberSearch
from herald.subscribers.schemas import (
    BulkCreateSubscribersResponse,
    ChangedSubscriber,
    CreateSubscriberRequest,
    FailedSubscriber,
    SubscriberFieldsRequest,
    UpdateSubscriberChannelRequest,
)
from herald.subscribers.schemas import Subscriber as SubscriberSchema

# Request attribute -> column.
ATTRIBUTES = {
    "firstName": "first_name",
    "lastName": "last_name",
    "email": "email",
    "phone": "phone",
    "avatar": "avatar",
    "locale": "locale",
    "timezone": "timezone",
    "data": "data",
}


def not_found_message(subscriber_id: str) -> str:
    return f"Subscriber: {subscriber_id} was not found"


def to_schema(subscriber: Subscriber, box: SecretBox, topics: list[str] | None = None) -> SubscriberSchema:
    """The Subscriber object; its channels' secrets (webhookUrl) masked."""
    values: dict[str, Any] = {
        "_id": subscriber.id,
        "firstName": subscriber.first_name,
        "lastName": subscriber.last_name,
        "email": subscriber.email,
        "phone": subscriber.phone,
        "avatar": subscriber.avatar,
        "locale": subscriber.locale,
        "channels": mask_channels(box, subscriber.channels or []),
        "isOnline": subscriber.is_online,
        "lastOnlineAt": isoformat(subscriber.last_online_at),
        "__v": subscriber.version,
        "data": subscriber.data,
        "timezone": subscriber.timezone,
        "subscriberId": subscriber.subscriber_id,
        "_organizationId": subscriber.organization_id,
        "_environmentId": subscriber.environment_id,
        "deleted": bool(subscriber.deleted),
        "createdAt": isoformat(subscriber.created_at),
        "updatedAt": isoformat(subscriber.updated_at),
    }
    if topics is not None:
        values["topics"] = topics
    return SubscriberSchema.model_validate(values)


async def require_subscriber(session: AsyncSession, principal: Principal, subscriber_id: str) -> Subscriber:
    subscriber = await SubscriberRepository(session).get_by_subscriber_id(principal.environment_id, subscriber_id)
    if subscriber is None:
        raise NotFoundError(not_found_message(subscriber_id))
    return subscriber


async def get_subscriber(
    session: AsyncSession, principal: Principal, subscriber_id: str, *, include_topics: bool = False
) -> tuple[Subscriber, list[str] | None]:
    subscriber = await require_subscriber(session, principal, subscriber_id)
    topics = None
    if include_topics:
        topics = await SubscriberRepository(session).topic_keys_of(principal.environment_id, subscriber)
    return subscriber, topics


async def list_subscribers(
    session: AsyncSession, principal: Principal, *, offset: int, limit: int
) -> tuple[Sequence[Subscriber], int]:
    repository = SubscriberRepository(session)
    rows = await repository.list_page(principal.environment_id, offset=offset, limit=limit)
    return rows, await repository.count(principal.environment_id)


# orderBy -> column; Novu orders by _id unless told otherwise.
SEARCH_ORDER = {"_id": Subscriber.id, "createdAt": Subscriber.created_at, "updatedAt": Subscriber.updated_at}
SEARCH_MAX_LIMIT = 100


@dataclass
class SearchPage:
    subscribers: list[Subscriber]
    next: str | None
    previous: str | None
    total: int
    capped: bool


async def search_subscribers(
    session: AsyncSession,
    principal: Principal,
    search: SubscriberSearch,
    *,
    after: str | None,
    before: str | None,
    limit: int,
    order_by: str,
    order_direction: str,
    include_cursor: bool,
) -> SearchPage:
    """A page of the environment's subscribers that match, by keyset on (orderBy, _id).

    ``after``/``before`` are a subscriber's ``_id`` (what ``next``/``previous`` give): the page holds
    what follows or precedes that subscriber in the order, so subscribers added meanwhile never shift
    a page (ids grow with time, and new ones fall at one end of ``_id`` and ``createdAt`` orders).
    """
    column = SEARCH_ORDER.get(order_by)
    if column is None:
        raise ValidationFailed.field("orderBy", f"orderBy must be one of {', '.join(SEARCH_ORDER)}", order_by)
    if order_direction not in ("ASC", "DESC"):
        raise ValidationFailed.field("orderDirection", "orderDirection must be ASC or DESC", order_direction)
    if after and before:
        raise BadRequestError("Cannot use both after and before cursors")
    ascending = order_direction == "ASC"
    repository = SubscriberRepository(session)
    environment_id = principal.environment_id
    attribute = column.key

    async def cursor_of(subscriber_id: str, name: str) -> tuple[object, str]:
        if column is Subscriber.id:
            return subscriber_id, subscriber_id
        found, value = await repository.search_sort_value(environment_id, subscriber_id, column)
        if not found:
            raise BadRequestError(f"{name} must be the _id of a subscriber of this environment: {subscriber_id}")
        return value, subscriber_id

    async def any_beyond(row: Subscriber, forward: bool) -> bool:
        key = (getattr(row, attribute), row.id)
        return bool(
            await repository.search_page(
                environment_id, search, column=column, ascending=ascending == forward, cursor=key, inclusive=False, limit=1
            )
        )

    if before:
        rows = await repository.search_page(
            environment_id,
            search,
            column=column,
            ascending=not ascending,
            cursor=await cursor_of(before, "before"),
            inclusive=include_cursor,
            limit=limit + 1,
        )
        more = len(rows) > limit
        rows = list(reversed(rows[:limit]))
        previous = rows[0].id if more else None
        next_cursor = rows[-1].id if rows and await any_beyond(rows[-1], forward=True) else None
    else:
        cursor = await cursor_of(after, "after") if after else None
        rows = await repository.search_page(
            environment_id,
            search,
            column=column,
            ascending=ascending,
            cursor=cursor,
            inclusive=include_cursor,
            limit=limit + 1,
        )
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = rows[-1].id if more else None
        previous = rows[0].id if rows and cursor is not None and await any_beyond(rows[0], forward=False) else None
    total, capped = await repository.search_count(environment_id, search)
    return SearchPage(rows, next_cursor, previous, total, capped)


# The console's list of subscribers: a page at a time, newest first.
FIND_PAGE_SIZE = 25
MAX_FIND_TEXT = 200


async def find_subscribers(
    session: AsyncSession, principal: Principal, text: str, *, before: str | None, limit: int = FIND_PAGE_SIZE
) -> tuple[list[Subscriber], str | None]:
    """The console's search: newest first, those whose subscriberId, email, phone or name starts with ``text``.

    A page of up to ``limit``, older than the subscriber whose ``_id`` is
    ``before``; with the ``_id`` to ask for the next page (None on the last).
    """
    rows = await SubscriberRepository(session).find_page(
        principal.environment_id, text.strip()[:MAX_FIND_TEXT] or None, before_id=before[:64] if before else None, limit=limit + 1
    )
    return rows[:limit], rows[limit - 1].id if len(rows) > limit else None


async def _channels_with(
    repository: SubscriberRepository,
    principal: Principal,
    channels: list[dict[str, Any]],
    request: UpdateSubscriberChannelRequest,
    *,
    replace: bool,
    box: SecretBox,
) -> list[dict[str, Any]]:
    """The channel list after setting one provider's credentials (see :func:`merge_channel`)."""
    integration = await repository.find_active_integration(
        principal.environment_id, request.providerId, request.integrationIdentifier
    )
    if integration is None:
        message = f"No active integration found for provider {request.providerId}"
        if request.integrationIdentifier is not None:
            message += f" with identifier {request.integrationIdentifier}"
        raise UnprocessableError(message)
    try:
        return merge_channel(channels, integration, request.credentials.given(), replace=replace, box=box)
    except TooManyDeviceTokens as exc:
        raise UnprocessableError(str(exc)) from exc


async def _apply(
    repository: SubscriberRepository,
    principal: Principal,
    subscriber: Subscriber,
    request: SubscriberFieldsRequest,
    box: SecretBox,
) -> bool:
    """Set the attributes present in the body; True when anything changed.

    The channels are worked out first: a channel that cannot be set (no such
    integration) raises before any attribute has changed.
    """
    channels = list(subscriber.channels or [])
    for channel in request.channels or []:
        channels = await _channels_with(repository, principal, channels, channel, replace=False, box=box)
    changed = False
    given = request.model_fields_set
    for field, column in ATTRIBUTES.items():
        if field not in given:
            continue
        value = getattr(request, field)
        if field == "data" and value is not None:
            value = dict(value)
        if getattr(subscriber, column) != value:
            setattr(subscriber, column, value)
            changed = True
    if channels != (subscriber.channels or []):
        subscriber.channels = channels
        changed = True
    return changed


def _touch(subscriber: Subscriber) -> None:
    subscriber.version = (subscriber.version or 0) + 1
    subscriber.updated_at = utcnow()


def _new_subscriber(principal: Principal, subscriber_id: str) -> Subscriber:
    now = utcnow()
    return Subscriber(
        id=new_id(),
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        subscriber_id=subscriber_id,
        channels=[],
        deleted=False,
        version=0,
        created_at=now,
        updated_at=now,
    )


async def upsert_subscriber(
    session: AsyncSession,
    principal: Principal,
    request: CreateSubscriberRequest,
    *,
    box: SecretBox,
    fail_if_exists: bool = False,
) -> Subscriber:
    """Create the subscriber, or update the one with this subscriberId.

    ``fail_if_exists`` turns an existing subscriber into a 409 instead.
    """
    repository = SubscriberRepository(session)
    existing = await repository.get_by_subscriber_id(principal.environment_id, request.subscriberId)
    if existing is None:
        subscriber = _new_subscriber(principal, request.subscriberId)
        await _apply(repository, principal, subscriber, request, box)
        if await repository.insert_new([subscriber]):
            return subscriber
        # Created by a concurrent request since the lookup: update that one.
        existing = await repository.get_by_subscriber_id(principal.environment_id, request.subscriberId)
        assert existing is not None
    if fail_if_exists:
        raise ConflictError(f'Subscriber with id "{request.subscriberId}" already exists')
    if await _apply(repository, principal, existing, request, box):
        _touch(existing)
        await session.flush()
    return existing


async def bulk_upsert_subscribers(
    session: AsyncSession, principal: Principal, requests: Sequence[CreateSubscriberRequest], *, box: SecretBox
) -> BulkCreateSubscribersResponse:
    """``POST /v1/subscribers/bulk``: each subscriber created or updated as :func:`upsert_subscriber` does, in order.

    The subscribers already known are read at once and the new ones inserted
    together, so a batch costs a few statements rather than a few per
    subscriber. A subscriber whose channels cannot be set (no active
    integration for a provider) is left as it was and reported in ``failed``
    with the reason; the others are written.
    """
    repository = SubscriberRepository(session)
    ids = [request.subscriberId for request in requests]
    known = {s.subscriber_id: s for s in await repository.find_by_subscriber_ids(principal.environment_id, ids)}
    created: dict[str, Subscriber] = {}
    applied: list[CreateSubscriberRequest] = []
    outcome = BulkCreateSubscribersResponse(updated=[], created=[], failed=[])
    for request in requests:
        existing = known.get(request.subscriberId)
        subscriber = existing or _new_subscriber(principal, request.subscriberId)
        try:
            changed = await _apply(repository, principal, subscriber, request, box)
        except UnprocessableError as exc:
            outcome.failed.append(FailedSubscriber(message=exc.message, subscriberId=request.subscriberId))
            continue
        applied.append(request)
        if existing is None:
            known[request.subscriberId] = created[request.subscriberId] = subscriber
            outcome.created.append(ChangedSubscriber(subscriberId=request.subscriberId))
            continue
        if changed and request.subscriberId not in created:
            _touch(existing)
        outcome.updated.append(ChangedSubscriber(subscriberId=request.subscriberId))
    inserted = await repository.insert_new(list(created.values())) if created else set()
    taken = [subscriber_id for subscriber_id in created if subscriber_id not in inserted]
    if taken:
        # Created by a concurrent request since the look-up: their requests are
        # applied again, in order, to what is stored now, and they count as updated.
        for request in applied:
            if request.subscriberId in taken:
                await upsert_subscriber(session, principal, request, box=box)
        outcome.created = [item for item in outcome.created if item.subscriberId not in taken]
        outcome.updated.extend(ChangedSubscriber(subscriberId=subscriber_id) for subscriber_id in taken)
    return outcome


async def update_subscriber(
    session: AsyncSession, principal: Principal, subscriber_id: str, request: SubscriberFieldsRequest, *, box: SecretBox
) -> Subscriber:
    subscriber = await require_subscriber(session, principal, subscriber_id)
    if await _apply(SubscriberRepository(session), principal, subscriber, request, box):
        _touch(subscriber)
        await session.flush()
    return subscriber


async def delete_subscriber(session: AsyncSession, principal: Principal, subscriber_id: str) -> None:
    """Hard delete: the subscriber, its topic memberships, its messages and its preferences go together."""
    subscriber = await require_subscriber(session, principal, subscriber_id)
    await SubscriberRepository(session).delete_with_memberships_and_messages(subscriber)


async def set_channel_credentials(
    session: AsyncSession,
    principal: Principal,
    subscriber_id: str,
    request: UpdateSubscriberChannelRequest,
    *,
    replace: bool,
    box: SecretBox,
) -> Subscriber:
    subscriber = await require_subscriber(session, principal, subscriber_id)
    current = list(subscriber.channels or [])
    channels = await _channels_with(SubscriberRepository(session), principal, current, request, replace=replace, box=box)
    if channels != current:
        subscriber.channels = channels
        _touch(subscriber)
        await session.flush()
    return subscriber


async def delete_channel_credentials(
    session: AsyncSession, principal: Principal, subscriber_id: str, provider_id: str
) -> None:
    """Remove every entry of that provider; removing what is not there is not an error."""
    subscriber = await require_subscriber(session, principal, subscriber_id)
    current = list(subscriber.channels or [])
    kept = [entry for entry in current if entry.get("providerId") != provider_id]
    if len(kept) != len(current):
        subscriber.channels = kept
        _touch(subscriber)
        await session.flush()


async def update_online_status(
    session: AsyncSession, principal: Principal, subscriber_id: str, is_online: bool
) -> Subscriber:
    """Set ``isOnline``; going offline records ``lastOnlineAt`` (the last moment seen online)."""
    subscriber = await require_subscriber(session, principal, subscriber_id)
    if is_online and subscriber.is_online is True:
        return subscriber
    subscriber.is_online = is_online
    if not is_online:
        subscriber.last_online_at = utcnow()
    _touch(subscriber)
    await session.flush()
    return subscriber
