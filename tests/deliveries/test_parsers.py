"""The generic form of a delivery provider's event, read into DeliveryEvent, and how each status is recorded."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from herald.deliveries.parsers import PARSERS, parse_generic, parser_for
from herald.deliveries.schemas import DELIVERY_STATUSES
from herald.deliveries.service import detail_status
from herald.kit.errors import ValidationFailed

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    "body",
    [
        {"messageId": "m1", "status": "delivered", "date": "2026-01-02T03:04:05Z"},
        {"id": "m1", "event": "Delivered", "timestamp": 1767323045},
        {"eventId": "m1", "eventType": "DELIVERED", "timestamp": 1767323045000},
        {"externalId": "m1", "status": " delivered ", "date": "2026-01-02T04:04:05+01:00"},
    ],
)
def test_the_names_providers_use_read_as_one_event(body: dict) -> None:
    [event] = parse_generic(body)
    assert (event.reference, event.status, event.date, event.raw) == ("m1", "delivered", WHEN, body)


def test_attempts_response_and_a_missing_date() -> None:
    before = datetime.now(UTC)
    [event] = parse_generic({"id": 7, "status": "bounced", "attempts": 2, "response": "550"})
    assert (event.reference, event.attempts, event.response) == ("7", 2, "550")
    assert event.date >= before.replace(microsecond=0)


def test_several_events() -> None:
    events = parse_generic({"events": [{"id": "a", "status": "sent"}, {"id": "b", "status": "opened"}]})
    assert [(e.reference, e.status) for e in events] == [("a", "sent"), ("b", "opened")]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"status": "delivered"}, "messageId"),
        ({"id": True, "status": "delivered"}, "messageId"),
        ({"id": "m1"}, "status"),
        ({"id": "m1", "eventType": "exploded"}, "eventType"),
        ({"id": "m1", "status": "sent", "date": "soon"}, "date"),
        ({"id": "m1", "status": "sent", "timestamp": 10**30}, "timestamp"),
        ({"id": "m1", "status": "sent", "attempts": "two"}, "attempts"),
        ({"id": "m1", "status": "sent", "response": {"code": 550}}, "response"),
        ({"events": []}, "events"),
        ({"events": [{"id": "a", "status": "sent"}, {"id": "b"}]}, "events.1.status"),
    ],
)
def test_what_cannot_be_read_names_its_field(body: dict, field: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        parse_generic(body)
    assert field in refused.value.extra["errors"]


def test_every_status_is_recorded_with_an_execution_detail_status() -> None:
    recorded = {status: detail_status(status) for status in DELIVERY_STATUSES}
    assert recorded["delivered"] == recorded["opened"] == recorded["clicked"] == "Success"
    assert recorded["bounced"] == recorded["rejected"] == recorded["failed"] == "Failed"
    assert recorded["spam"] == "Warning" and recorded["deferred"] == "Pending"
    assert set(recorded.values()) <= {"Success", "Failed", "Warning", "Pending"}


def test_a_provider_without_a_parser_of_its_own_is_read_in_the_generic_form() -> None:
    assert "sendgrid" not in PARSERS and parser_for("sendgrid") is parse_generic
