"""A trigger's payload checked against its workflow's ``payloadSchema`` (Novu v2's validatePayload).

Only workflows with validatePayload on carry a schema to the trigger path
(``TriggerTarget.payload_schema``), so a trigger of any other workflow pays
for one ``is None`` test. Validators are compiled once per schema text.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

import orjson
from jsonschema import Draft7Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from herald.kit.errors import BadRequestError

# Errors named in one answer; a payload far off its schema would otherwise list thousands.
MAX_REPORTED_ERRORS = 20


class PayloadValidationError(BadRequestError):
    """Novu's PayloadValidationException: 400 with each error's field, message, value and schemaPath."""


@lru_cache(maxsize=256)
def _compiled(schema_text: bytes) -> Validator:
    schema = orjson.loads(schema_text)
    cls = validator_for(schema, default=Draft7Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _field(path: Any) -> str:
    return "/" + "/".join(str(part) for part in path) if path else "/"


def with_defaults(schema: Any, value: Any) -> Any:
    """The value with the schema's ``default``s filled in where absent (Novu's AJV ``useDefaults``)."""
    if not isinstance(schema, dict) or not isinstance(value, dict):
        return value
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return value
    filled = dict(value)
    for name, subschema in properties.items():
        if not isinstance(subschema, dict):
            continue
        if name not in filled and "default" in subschema:
            filled[name] = copy.deepcopy(subschema["default"])
        elif name in filled:
            filled[name] = with_defaults(subschema, filled[name])
    return filled


def checked_payload(schema: dict[str, Any], payload: dict[str, Any] | None) -> dict[str, Any]:
    """The payload with its defaults, or PayloadValidationError naming what does not match."""
    filled = with_defaults(schema, payload or {})
    validator = _compiled(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    errors = sorted(validator.iter_errors(filled), key=lambda error: [str(part) for part in error.absolute_path])[
        :MAX_REPORTED_ERRORS
    ]
    if not errors:
        return filled
    details = [
        {
            "field": _field(error.absolute_path),
            "message": error.message,
            "value": error.instance,
            "schemaPath": "#/" + "/".join(str(part) for part in error.absolute_schema_path),
        }
        for error in errors
    ]
    summary = "; ".join(f"{item['field']}: {item['message']}" for item in details)
    raise PayloadValidationError(
        f"Payload validation failed: {summary}", errors=details, schema=schema, type="PAYLOAD_VALIDATION_ERROR"
    )
