"""herald.workflows.payload: a trigger's payload against its workflow's payloadSchema."""

from __future__ import annotations

import pytest

from herald.workflows.payload import MAX_REPORTED_ERRORS, PayloadValidationError, checked_payload, with_defaults

SCHEMA = {
    "type": "object",
    "properties": {
        "order": {"type": "string"},
        "currency": {"type": "string", "default": "EUR"},
        "customer": {"type": "object", "properties": {"tier": {"type": "string", "default": "basic"}}},
        "email": {"type": "string", "format": "email"},
    },
    "required": ["order"],
}


def test_defaults_are_filled_where_absent() -> None:
    payload = {"order": "A", "customer": {}}
    assert checked_payload(SCHEMA, payload) == {"order": "A", "currency": "EUR", "customer": {"tier": "basic"}}
    assert payload == {"order": "A", "customer": {}}  # the caller's payload is left as it was
    assert with_defaults(SCHEMA, {"order": "A", "currency": "USD"})["currency"] == "USD"


def test_every_error_is_named_with_its_field_and_schema_path() -> None:
    with pytest.raises(PayloadValidationError) as raised:
        checked_payload(SCHEMA, {"order": 1, "email": "not-an-email"})
    error = raised.value
    assert error.status_code == 400 and error.extra["type"] == "PAYLOAD_VALIDATION_ERROR"
    fields = {item["field"]: item for item in error.extra["errors"]}
    assert fields["/order"]["value"] == 1 and fields["/order"]["schemaPath"] == "#/properties/order/type"
    assert "/email" in fields
    assert (
        error.message.startswith("Payload validation failed: /email: ")
        and "/order: 1 is not of type 'string'" in error.message
    )


def test_a_missing_payload_is_an_empty_object() -> None:
    with pytest.raises(PayloadValidationError) as raised:
        checked_payload(SCHEMA, None)
    assert raised.value.extra["errors"][0]["field"] == "/"


def test_reported_errors_are_bounded() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "string"}}
    with pytest.raises(PayloadValidationError) as raised:
        checked_payload(schema, {f"k{i}": i for i in range(100)})
    assert len(raised.value.extra["errors"]) == MAX_REPORTED_ERRORS
