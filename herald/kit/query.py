"""Query-string values read as JSON or numbers, bounded as bodies are (herald.kit.request_guard).

The request guard reads bodies before any route does; a query string reaches
the route as text, and a route that reads JSON or a number from it reads it
here, so that what a body cannot hold the query cannot either:

- JSON: at most ``MAX_JSON_TEXT`` characters, nested at most ``MAX_JSON_DEPTH``
  levels, no NUL and no lone UTF-16 surrogate (neither store can keep them,
  and an answer echoing one could not be encoded), numbers finite (``NaN``,
  ``Infinity`` and ``1e400``, which Python's json reads as infinity, are
  refused) and integers within what the stores hold (64 bits).
- Numbers: finite, within the bounds the route gives; a whole number may be
  written ``10`` or ``10.0`` (novu-py sends floats).

Each refusal is a 422 with Novu's body naming the parameter. These values
answered 500 before: JSON 1,000 deep, a surrogate echoed in the answer,
``createdGte=1e400`` (no such date), ``offset=2**63`` (no such integer).
"""

from __future__ import annotations

import json
import math
from typing import Any

from herald.kit.errors import ValidationFailed
from herald.kit.request_guard import LONE_SURROGATE, MAX_JSON_DEPTH, NUL_MESSAGE, TOO_DEEP, contains_nul, json_problem

# Characters of one JSON value in the query. Node's HTTP server, behind Novu's API, takes 16 KB of head in all;
# Herald takes more but not without end.
MAX_JSON_TEXT = 64 * 1024
# The largest integer both stores keep (PostgreSQL's bigint, SQLite's INTEGER); also the largest offset.
MAX_INTEGER = 2**63 - 1


class _Unbounded(ValueError):
    """A JSON number no store holds."""


def _constant(name: str) -> Any:
    raise _Unbounded(f"{name} is not a number JSON allows")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Unbounded(f"{text} is beyond the numbers a store holds")
    return value


def _int(text: str) -> int:
    # Past 4,300 digits int() refuses to read it at all (Python's own bound on its quadratic cost).
    if len(text) > 20 or not -MAX_INTEGER - 1 <= int(text) <= MAX_INTEGER:
        raise _Unbounded(f"{text[:30]} is beyond the 64-bit integers a store holds")
    return int(text)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_text(name: str, raw: str) -> Any:
    """``raw`` read as JSON, bounded as a body is; a 422 naming ``name`` when it is not."""
    if len(raw) > MAX_JSON_TEXT:
        raise ValidationFailed.field(name, f"{name} is longer than {MAX_JSON_TEXT} characters", None)
    if _has_surrogate(raw):
        raise ValidationFailed.field(name, f"{name} contains a lone UTF-16 surrogate, which is not a character", None)
    encoded = raw.encode("utf-8")
    if contains_nul(encoded):
        raise ValidationFailed.field(name, NUL_MESSAGE, None)
    problem = json_problem(encoded)
    if problem is TOO_DEEP:
        raise ValidationFailed.field(name, f"{name} is nested more than {MAX_JSON_DEPTH} levels deep", None)
    if problem is LONE_SURROGATE:
        raise ValidationFailed.field(
            name, f"{name} contains a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair)", raw
        )
    try:
        return json.loads(raw, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except _Unbounded as exc:
        raise ValidationFailed.field(name, f"{name}: {exc}", raw) from None
    except (ValueError, RecursionError):
        raise ValidationFailed.field(name, f"{name} must be JSON", raw) from None


def flag(name: str, raw: str | None) -> bool | None:
    """``true``/``1`` or ``false``/``0`` (any case); None when absent or empty."""
    if raw is None or raw == "":
        return None
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise ValidationFailed.field(name, f"{name} must be a boolean value", raw)


def number(name: str, raw: str | None, *, low: float, high: float, meaning: str = "a number") -> float | None:
    """A finite number from ``low`` to ``high``; None when absent or empty."""
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not low <= value <= high:  # also false for NaN
        raise ValidationFailed.field(name, f"{name} must be {meaning} from {_shown(low)} to {_shown(high)}", raw)
    return value


def whole_number(name: str, raw: str | None, *, default: int, low: int, high: int = MAX_INTEGER) -> int:
    """A whole number from ``low`` to ``high``, written ``10`` or ``10.0``; ``default`` when absent or empty."""
    if raw is None or raw == "":
        return default
    try:
        value: float | int = int(raw)
    except ValueError:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        # Read exactly only below 2**53; past it a float is no whole number the caller wrote.
        if not value.is_integer() or abs(value) > 2**53:
            value = math.nan
    if not low <= value <= high:
        raise ValidationFailed.field(name, f"{name} must be a whole number from {_shown(low)} to {_shown(high)}", raw)
    return int(value)


def _shown(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)
