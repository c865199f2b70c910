"""Bodies of ``POST /v2/inbound-webhooks/delivery-providers/...`` read into :class:`DeliveryEvent`.

That route is called with an API key, in the generic form a caller writes by
hand (novu-py's ``activity.track`` sends any object): one event, or
``{"events": [...]}``, each naming the message, the status and when; it is
read by :func:`parse_generic` unless a parser is registered under the
integration's ``providerId`` in ``PARSERS``. An event of that form is recorded
once when it states its date: the same event posted again (a caller's retry)
is answered as the first time and changes nothing. A provider's own webhook, in its
own format and signed its own way, is read by its reader beside its sender
(``herald/providers/<channel>/<provider>_events.py``, herald/deliveries/inbound.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

from herald.deliveries.schemas import DELIVERY_STATUSES, DeliveryEvent, DeliveryStatus
from herald.kit.errors import ValidationFailed
from herald.kit.time import parse_iso, utcnow
from herald.providers.inbound import event_key

# Where each field may be found, first match wins. ``eventId``/``eventType``/
# ``timestamp`` is how Expo and other push services name them.
REFERENCE_KEYS = ("messageId", "id", "eventId", "identifier", "externalId", "providerMessageId")
STATUS_KEYS = ("status", "eventType", "event")
DATE_KEYS = ("date", "timestamp")
MAX_EVENTS = 100
# Every top-level key of the generic form: a body with only these is read as it, whatever the provider.
GENERIC_KEYS = frozenset((*REFERENCE_KEYS, *STATUS_KEYS, *DATE_KEYS, "attempts", "response", "events"))

Parser = Callable[[dict[str, Any]], list[DeliveryEvent]]


def _first(body: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, Any]:
    for key in keys:
        value = body.get(key)
        if value is not None and value != "":
            return key, value
    return keys[0], None


def _date(field: str, value: Any) -> datetime:
    if value is None:
        return utcnow()
    if isinstance(value, bool):
        raise ValidationFailed.field(field, f"{field} must be an ISO 8601 date-time or seconds since 1970", value)
    if isinstance(value, int | float):
        # Milliseconds when it is too large to be seconds (anything after 2286 in seconds).
        seconds = value / 1000 if value > 10_000_000_000 else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise ValidationFailed.field(field, f"{field} is not a date Herald can read", value) from None
    if isinstance(value, str):
        try:
            return parse_iso(value)
        except ValueError:
            pass
    raise ValidationFailed.field(field, f"{field} must be an ISO 8601 date-time or seconds since 1970", value)


def parse_event(body: dict[str, Any], prefix: str = "") -> DeliveryEvent:
    """One event of the generic form; a 422 naming the field when it cannot be read."""
    key, reference = _first(body, REFERENCE_KEYS)
    if not isinstance(reference, str | int) or isinstance(reference, bool):
        raise ValidationFailed.field(
            f"{prefix}messageId",
            f"the event must name its message: one of {', '.join(REFERENCE_KEYS)} "
            "(Herald's message _id or the provider's id for it)",
            reference,
        )
    key, status = _first(body, STATUS_KEYS)
    normalised = status.strip().lower() if isinstance(status, str) else None
    if normalised not in DELIVERY_STATUSES:
        raise ValidationFailed.field(
            f"{prefix}{key}", f"{prefix}{key} must be one of {', '.join(DELIVERY_STATUSES)}", status
        )
    date_key, date_value = _first(body, DATE_KEYS)
    attempts = body.get("attempts")
    if attempts is not None and (isinstance(attempts, bool) or not isinstance(attempts, int | float)):
        raise ValidationFailed.field(f"{prefix}attempts", f"{prefix}attempts must be a number", attempts)
    response = body.get("response")
    if response is not None and not isinstance(response, str):
        raise ValidationFailed.field(f"{prefix}response", f"{prefix}response must be a string", response)
    return DeliveryEvent(
        reference=str(reference),
        status=cast(DeliveryStatus, normalised),
        date=_date(f"{prefix}{date_key}", date_value),
        raw=body,
        attempts=int(attempts) if attempts is not None else None,
        response=response,
        # An event that states when it happened is that event wherever it is posted again: a caller's
        # retry records it once. One without a date happened when it is posted (two opens are two).
        key=event_key("generic", body) if date_value is not None else None,
    )


def parse_generic(body: dict[str, Any]) -> list[DeliveryEvent]:
    events = body.get("events")
    if events is None:
        return [parse_event(body)]
    if not isinstance(events, list) or not events or not all(isinstance(event, dict) for event in events):
        raise ValidationFailed.field("events", "events must be a non-empty list of event objects", None)
    if len(events) > MAX_EVENTS:
        raise ValidationFailed.field("events", f"events takes at most {MAX_EVENTS} events", len(events))
    return [parse_event(event, f"events.{index}.") for index, event in enumerate(events)]


# providerId -> the parser of that provider's webhooks.
PARSERS: dict[str, Parser] = {}


def parser_for(provider_id: str) -> Parser:
    return PARSERS.get(provider_id, parse_generic)
