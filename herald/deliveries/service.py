"""Recording what delivery providers report, and reading a notification's execution details.

:func:`record_delivery_events` is the one place a provider's report changes
Herald's state: whichever way the events arrived (novu-py's ``activity.track``
in the generic form, or a provider's own webhook read by its parser in
herald/deliveries/parsers.py), each becomes an execution detail of the job that
sent the message (source ``Webhook``, the provider's event as ``raw``) and,
where the event says so, a change of the message's own state: a bounce or a
rejection is the message's ``error``, an open or a click marks it seen.

Providers deliver their webhooks at least once, so an event read from a
provider's webhook (or a dated one of the generic form) carries its identity
(``DeliveryEvent.key``) and is
recorded once per integration: a copy (a retry, a replay, the same event twice
in a batch) is answered as the first was but records and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.deliveries.repository import DeliveryRepository
from herald.deliveries.schemas import DeliveryEvent, EventBody, ExecutionDetails, WebhookResult
from herald.kit.auth import Principal
from herald.kit.errors import NotFoundError
from herald.kit.schemas import compact
from herald.kit.time import isoformat
from herald.models import ExecutionDetail, Integration, Message, Notification
from herald.notifications.repository import NotificationRepository
from herald.subscribers.repository import SubscriberRepository
from herald.webhooks.events import emit_for_messages

WEBHOOK_SOURCE = "Webhook"
# The provider says the message did not (and will not) reach the recipient.
FAILED = frozenset({"bounced", "dropped", "rejected", "failed", "undelivered", "blocked"})
# Reached the recipient, who did not want it.
WARNING = frozenset({"spam", "complaint", "unsubscribed"})
# Not yet delivered: the provider is still at it.
PENDING = frozenset({"created", "accepted", "queued", "sending", "deferred", "delayed"})
# The recipient saw it.
SEEN = frozenset({"opened", "clicked"})

# A provider's event -> the message's delivery status (``Message.delivery_status``,
# apart from its ``status``). Events not here (queued, deferred...) leave it as it is.
DELIVERY_STATUS = {
    "delivered": "delivered",
    "bounced": "bounced",
    "undelivered": "bounced",
    "dropped": "dropped",
    "rejected": "dropped",
    "blocked": "dropped",
    "failed": "dropped",
    "spam": "complained",
    "complaint": "complained",
    "opened": "opened",
    "clicked": "clicked",
}
# Events arrive out of order (a retried delivered after the open): a status only
# gives way to one as far along or further. A bounce or a drop after "delivered"
# is the provider changing its mind (an asynchronous bounce), so it wins.
DELIVERY_RANK = {"delivered": 1, "opened": 2, "clicked": 3, "bounced": 4, "dropped": 4, "complained": 5}


def detail_status(status: str) -> str:
    """The execution detail status an event of this provider status is recorded with."""
    if status in FAILED:
        return "Failed"
    if status in WARNING:
        return "Warning"
    if status in PENDING:
        return "Pending"
    return "Success"


def _detail_text(provider_id: str, event: DeliveryEvent) -> str:
    text = f"{provider_id} reported the message {event.status}"
    return f"{text}: {event.response}" if event.response else text


def _apply(message: Message, provider_id: str, event: DeliveryEvent) -> None:
    """The message's own state after the event: what the activity feed and the inbox show."""
    if event.status in FAILED:
        message.status = "error"
        message.error_id = f"provider_{event.status}"
        message.error_text = _detail_text(provider_id, event)
    elif event.status in SEEN:
        if not message.seen:
            message.seen = True
        if message.first_seen_date is None:
            message.first_seen_date = event.date
        if message.last_seen_date is None or message.last_seen_date < event.date:
            message.last_seen_date = event.date
    elif event.status == "delivered" and message.status == "warning":
        # Delivered after all: the warning was about an earlier try.
        message.status = "sent"
    delivery_status = DELIVERY_STATUS.get(event.status)
    if delivery_status is not None and DELIVERY_RANK[delivery_status] >= DELIVERY_RANK.get(
        message.delivery_status or "", 0
    ):
        message.delivery_status = delivery_status
        message.delivery_status_at = event.date


def _result(event: DeliveryEvent, message: Message) -> WebhookResult:
    return WebhookResult(
        id=event.reference,
        event=EventBody.model_validate(
            compact(
                {
                    "status": event.status,
                    "date": isoformat(event.date),
                    "externalId": message.provider_message_id,
                    "attempts": event.attempts,
                    "response": event.response,
                    "row": json.dumps(event.raw, separators=(",", ":"), default=str),
                }
            )
        ),
    )


async def record_delivery_events(
    session: AsyncSession,
    integration: Integration,
    events: Sequence[DeliveryEvent],
    *,
    skip_unknown: bool = False,
) -> list[WebhookResult]:
    """Record normalised delivery events of ``integration``'s environment against the messages they name.

    Every event must name a message of that environment (by Herald's ``_id`` or
    the provider's message id); one that does not is refused (404) and nothing
    of the batch is recorded, so a provider retrying it records each event once.
    With ``skip_unknown`` (a provider's own webhook, which reports every mail of
    the account, Herald's or not) such an event is left out instead.

    An event with a ``key`` already recorded for the integration (by an earlier
    request, one running at the same moment, or earlier in this batch) is in
    the answer, as it was the first time, but adds no detail and moves
    nothing: the provider gets the same answer and stops retrying. Keys are
    claimed only for events of Herald's messages (the rest are not kept), after
    the messages are locked, in this transaction: a batch refused, or rolled
    back, claims none.
    """
    repository = DeliveryRepository(session)
    messages = await repository.messages_named(integration.environment_id, [event.reference for event in events])
    by_reference: dict[str, Message] = {}
    for message in messages:
        by_reference.setdefault(message.id, message)
        if message.provider_message_id:
            by_reference.setdefault(message.provider_message_id, message)
    if skip_unknown:
        events = [event for event in events if event.reference in by_reference]
    for event in events:
        if event.reference not in by_reference:
            raise NotFoundError(f"Message with id {event.reference} not found")
    claimed = await repository.claim_event_keys(
        integration.environment_id, integration.id, [event.key for event in events if event.key is not None]
    )
    results = []
    # Each message whose delivery status the batch moved, and to what.
    reached: list[tuple[Message, str]] = []
    for event in events:
        message = by_reference[event.reference]
        results.append(_result(event, message))
        if event.key is not None:
            if event.key not in claimed:
                continue
            # A second copy in the same batch finds it taken.
            claimed.discard(event.key)
        repository.add_detail(
            ExecutionDetail(
                environment_id=message.environment_id,
                organization_id=message.organization_id,
                job_id=message.job_id,
                notification_id=message.notification_id,
                subscriber_id=message.subscriber_id,
                transaction_id=message.transaction_id,
                channel=message.channel,
                provider_id=integration.provider_id,
                status=detail_status(event.status),
                detail=_detail_text(integration.provider_id, event),
                source=WEBHOOK_SOURCE,
                raw=event.raw,
            )
        )
        before = message.delivery_status
        _apply(message, integration.provider_id, event)
        if message.delivery_status != before:
            reached.append((message, message.delivery_status or ""))
    await session.flush()
    await hand_on_delivery_events(session, integration.environment_id, reached)
    return results


# The message's delivery status -> the outbound webhook event the application hears of it by.
OUTBOUND_EVENTS = {"delivered": "message.delivered", "bounced": "message.bounced", "dropped": "message.bounced"}


async def hand_on_delivery_events(
    session: AsyncSession, environment_id: str, reached: Sequence[tuple[Message, str]]
) -> None:
    """The one place recorded deliveries and bounces are handed on to the application's webhooks.

    ``reached`` is each message whose delivery status just moved, with the
    status it moved to: a provider reporting the same delivery again (a retry)
    moves nothing and is not handed on twice. ``herald.webhooks.events.emit_for_messages``
    sends ``message.delivered`` and ``message.bounced`` to the environment's
    endpoints, in this transaction (so an event is sent only if its record is
    kept).
    """
    by_event: dict[str, list[str]] = {}
    for message, delivery_status in reached:
        outbound = OUTBOUND_EVENTS.get(delivery_status)
        if outbound is not None and message.id not in by_event.get(outbound, []):
            by_event.setdefault(outbound, []).append(message.id)
    for outbound, message_ids in by_event.items():
        await emit_for_messages(session, environment_id, outbound, message_ids)


async def execution_details(
    session: AsyncSession, principal: Principal, notification_id: str, subscriber_id: str
) -> list[ExecutionDetails]:
    """``GET /v1/execution-details``: what happened to a notification of a subscriber, oldest first.

    The subscriber is named by its ``subscriberId``; an unknown one is a 404, as
    in Novu. A notification of another subscriber (or none) has no details.
    """
    environment_id = principal.environment_id
    subscriber = await SubscriberRepository(session).get_by_subscriber_id(environment_id, subscriber_id)
    if subscriber is None:
        raise NotFoundError(f"Subscriber with id {subscriber_id} not found")
    notifications = NotificationRepository(session)
    notification = await notifications.get(environment_id, notification_id)
    if notification is None or notification.subscriber_id != subscriber.id:
        return []
    details = [
        d
        for d in await notifications.details_of(environment_id, [notification.id])
        if d.subscriber_id in (None, subscriber.id)
    ]
    messages = await DeliveryRepository(session).messages_of_jobs(
        environment_id, list({d.job_id for d in details if d.job_id})
    )
    messages_of_job: dict[str, list[Message]] = {}
    for message in messages:
        if message.job_id is not None:
            messages_of_job.setdefault(message.job_id, []).append(message)
    return [
        _details_to_schema(detail, notification, messages_of_job.get(detail.job_id or "", [])) for detail in details
    ]


def _raw(value: Any) -> str | None:
    """The stored raw answer as the JSON string Novu sends."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _message_of(detail: ExecutionDetail, messages: list[Message]) -> str | None:
    """The message a detail is about: the job's only one, or the one sent through the detail's provider."""
    if len(messages) == 1:
        return messages[0].id
    matching = [message for message in messages if detail.provider_id and message.provider_id == detail.provider_id]
    return matching[0].id if len(matching) == 1 else None


def _details_to_schema(
    detail: ExecutionDetail, notification: Notification, messages: list[Message]
) -> ExecutionDetails:
    return ExecutionDetails.model_validate(
        compact(
            {
                "_id": detail.id,
                "_organizationId": detail.organization_id,
                "_jobId": detail.job_id,
                "_environmentId": detail.environment_id,
                "_notificationId": detail.notification_id or notification.id,
                "_notificationTemplateId": notification.workflow_id,
                "_subscriberId": detail.subscriber_id or notification.subscriber_id,
                "_messageId": _message_of(detail, messages),
                "providerId": detail.provider_id,
                "transactionId": detail.transaction_id,
                "channel": detail.channel,
                "detail": detail.detail,
                "source": detail.source,
                "status": detail.status,
                "isTest": False,
                "isRetry": detail.is_retry,
                "raw": _raw(detail.raw),
                "createdAt": isoformat(detail.created_at),
            }
        )
    )
