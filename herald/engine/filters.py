"""Step filters: whether a workflow step (or an integration) applies to one subscriber and event.

``filters`` is a list of StepFilter objects::

    {"isNegated": false, "type": "GROUP", "value": "AND" | "OR",
     "children": [{"on": "payload", "field": "order.total", "operator": "LARGER", "value": "100"}]}

* No filters: the step runs.
* Top-level filters are OR-ed: the step runs when any one of them passes.
* Inside a filter the children are combined with ``value`` (AND, the default, or
  OR); a filter without children passes; ``isNegated`` negates the filter's result.
* ``on`` is ``subscriber``, ``payload`` or ``tenant``; ``field`` is a dotted path
  (``data.plan``, ``order.items.0.sku``). ``type`` is not used for evaluation.
* ``value`` is a string; ``{{...}}`` placeholders in it are rendered first
  against ``subscriber``, ``payload`` and ``tenant``. A value that is exactly one
  placeholder (``{{payload.allowed}}``) keeps the type of what it names, so a
  list can feed IN.

Operator semantics and type coercion are documented in docs/filters.md. Evaluation never raises: a malformed filter makes
the whole step fail (``passed=False``) with a ``detail`` saying what is wrong,
because running a step whose conditions cannot be read is worse than skipping it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal, InvalidOperation
from typing import Any

from herald.engine.templates import TemplateError, render_text

__all__ = [
    "ON_VALUES",
    "OPERATORS",
    "FilterContext",
    "FilterOutcome",
    "lookup",
    "step_passes",
]

OPERATORS = frozenset(
    {
        "EQUAL",
        "NOT_EQUAL",
        "LARGER",
        "SMALLER",
        "LARGER_EQUAL",
        "SMALLER_EQUAL",
        "IN",
        "NOT_IN",
        "ANY_IN",
        "ALL_IN",
        "BETWEEN",
        "NOT_BETWEEN",
        "LIKE",
        "NOT_LIKE",
    }
)
ON_VALUES = ("subscriber", "payload", "tenant")

# Bounds on what one condition may ask for (docs/filters.md, "Limits"): a filter is
# evaluated on the worker's event loop, in the API process under ``herald serve``.
MAX_VALUE_CHARS = 10_000
"""A condition's value, rendered."""
MAX_LIKE_PATTERN_CHARS = 1_000
MAX_LIKE_TEXT_CHARS = 100_000
"""The field a LIKE reads (all the items of a list together)."""
MAX_COMPARISONS = 10_000
"""Pairs compared by IN, NOT_IN, ANY_IN, ALL_IN (field items × listed values)."""


@dataclass(frozen=True)
class FilterContext:
    """What conditions are evaluated against: the Subscriber fields (incl. ``data``), the payload, the tenant."""

    subscriber: Mapping[str, Any] = field(default_factory=dict)
    payload: Mapping[str, Any] = field(default_factory=dict)
    tenant: Mapping[str, Any] | None = None

    def root(self, on: str) -> Mapping[str, Any] | None:
        return {"subscriber": self.subscriber, "payload": self.payload, "tenant": self.tenant}[on]

    def template_context(self) -> dict[str, Any]:
        return {"subscriber": self.subscriber or {}, "payload": self.payload or {}, "tenant": self.tenant or {}}


@dataclass(frozen=True)
class FilterOutcome:
    """``passed``: run the step. ``invalid``: the filters could not be read (then ``passed`` is
    False and ``detail`` says what is wrong), so the caller can report a misconfiguration
    rather than a filtered-out step."""

    passed: bool
    detail: str
    invalid: bool = False


class _Invalid(Exception):
    """A filter that cannot be evaluated; the message is user-facing."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


# --------------------------------------------------------------------------- entry point


def step_passes(filters: Sequence[Mapping[str, Any]] | None, context: FilterContext) -> FilterOutcome:
    """Evaluate a step's (or an integration's) filters; see the module docstring."""
    if filters is None or (isinstance(filters, Sequence) and not isinstance(filters, str) and len(filters) == 0):
        return FilterOutcome(True, "no filters")
    if not isinstance(filters, Sequence) or isinstance(filters, str):
        return FilterOutcome(False, f"invalid filters: expected a list, got {_type_name(filters)}", invalid=True)
    many = len(filters) > 1
    try:
        for number, step_filter in enumerate(filters, start=1):
            _validate_filter(step_filter, _filter_label(number, many))
        failures: list[str] = []
        for number, step_filter in enumerate(filters, start=1):
            label = _filter_label(number, many)
            try:
                passed, explanation = _evaluate_filter(step_filter, context)
            except _Invalid as err:
                raise _Invalid(f"{label}: {err}") from None
            if passed:
                return FilterOutcome(True, f"{label} passed: {explanation}")
            failures.append(f"{label} failed: {explanation}")
    except _Invalid as err:
        return FilterOutcome(False, f"invalid {err}", invalid=True)
    if many:
        return FilterOutcome(False, "no filter passed: " + "; ".join(failures))
    return FilterOutcome(False, failures[0])


def _filter_label(number: int, many: bool) -> str:
    return f"filter {number}" if many else "filter"


# --------------------------------------------------------------------------- validation


def _validate_filter(step_filter: Any, label: str) -> None:
    if not isinstance(step_filter, Mapping):
        raise _Invalid(f"{label}: expected an object, got {_type_name(step_filter)}")
    negated = step_filter.get("isNegated")
    if negated is not None and not isinstance(negated, bool):
        raise _Invalid(f"{label}: isNegated must be a boolean, got {_show(negated)}")
    _combinator(step_filter, label)
    children = step_filter.get("children")
    if children is None:
        return
    if not isinstance(children, Sequence) or isinstance(children, str):
        raise _Invalid(f"{label}: children must be a list, got {_type_name(children)}")
    for position, child in enumerate(children, start=1):
        _validate_condition(child, f"{label}, condition {position}")


def _combinator(step_filter: Mapping[str, Any], label: str) -> str:
    value = step_filter.get("value")
    if value is None or value == "":
        return "AND"
    if isinstance(value, str) and value.upper() in ("AND", "OR"):
        return value.upper()
    raise _Invalid(f"{label}: value must be AND or OR, got {_show(value)}")


def _validate_condition(condition: Any, label: str) -> None:
    if not isinstance(condition, Mapping):
        raise _Invalid(f"{label}: expected an object, got {_type_name(condition)}")
    on = condition.get("on")
    if on not in ON_VALUES:
        raise _Invalid(f"{label}: 'on' must be one of {', '.join(ON_VALUES)}, got {_show(on)}")
    field_path = condition.get("field")
    if not isinstance(field_path, str) or not field_path.strip():
        raise _Invalid(f"{label}: field must be a non-empty string, got {_show(field_path)}")
    operator = condition.get("operator")
    if not isinstance(operator, str) or operator.upper() not in OPERATORS:
        raise _Invalid(f"{label}: unknown operator {_show(operator)}")
    value = condition.get("value")
    if value is not None and not isinstance(value, str | int | float | bool | list):
        raise _Invalid(f"{label}: value must be a string, got {_type_name(value)}")


# --------------------------------------------------------------------------- evaluation


def _evaluate_filter(step_filter: Mapping[str, Any], context: FilterContext) -> tuple[bool, str]:
    combinator = _combinator(step_filter, "filter")
    children = step_filter.get("children") or []
    if not children:
        passed, explanation = True, "no conditions"
    else:
        results = []
        for position, child in enumerate(children, start=1):
            try:
                results.append(_evaluate_child(child, context))
            except _Invalid as err:
                raise _Invalid(f"condition {position} ({child['on']}.{child['field']}): {err}") from None
        joiner = f" {combinator} "
        explanation = joiner.join(text for _, text in results)
        outcomes = [ok for ok, _ in results]
        passed = all(outcomes) if combinator == "AND" else any(outcomes)
        if len(results) > 1:
            explanation = f"({explanation})"
    if step_filter.get("isNegated") is True:
        if not explanation.startswith("("):
            explanation = f"({explanation})"
        return not passed, f"NOT {explanation} is {_word(not passed)}"
    return passed, explanation


def _evaluate_child(condition: Mapping[str, Any], context: FilterContext) -> tuple[bool, str]:
    on: str = condition["on"]
    field_path: str = condition["field"].strip()
    operator: str = condition["operator"].upper()
    expected = _expected_value(condition.get("value"), context)
    if isinstance(expected, str) and len(expected) > MAX_VALUE_CHARS:
        raise _Invalid(f"value has {len(expected):,} characters, more than {MAX_VALUE_CHARS:,} (filter limit)")
    actual = lookup(context.root(on), field_path)
    passed, note = _apply_operator(operator, actual, expected)
    shown_actual = "missing" if actual is MISSING else f"actual {_show(actual)}"
    suffix = f"; {note}" if note else ""
    return passed, f"{on}.{field_path} {operator} {_show(expected)} is {_word(passed)} ({shown_actual}{suffix})"


_SINGLE_PLACEHOLDER = re.compile(r"^\s*\{\{\s*([A-Za-z_][\w-]*(?:\.[\w-]+)*)\s*\}\}\s*$")


def _expected_value(raw: Any, context: FilterContext) -> Any:
    if raw is None:
        return ""
    if not isinstance(raw, str) or ("{{" not in raw and "{%" not in raw):
        return raw
    variables = context.template_context()
    single = _SINGLE_PLACEHOLDER.match(raw)
    if single:
        path = single.group(1)
        first = path.split(".", 1)[0]
        value = lookup(variables if first in variables else variables["payload"], path)
        return "" if value is MISSING or value is None else value
    try:
        return render_text(raw, variables)
    except TemplateError as err:
        raise _Invalid(f"value {_show(raw)} is not a valid template: {err.message}") from None


_PATH_SEGMENT = re.compile(r"[^.\[\]]+|\[(\d+)\]")


def lookup(root: Any, path: str) -> Any:
    """The value at a dotted path (``a.b.0.c`` or ``a.b[0].c``), or ``MISSING``."""
    if root is None:
        return MISSING
    if isinstance(root, Mapping) and path in root:
        return root[path]
    current = root
    for match in _PATH_SEGMENT.finditer(path):
        segment = match.group(1) if match.group(1) is not None else match.group(0)
        if isinstance(current, Mapping):
            if segment not in current:
                return MISSING
            current = current[segment]
        elif isinstance(current, list | tuple) and segment.isdigit():
            index = int(segment)
            if index >= len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


# --------------------------------------------------------------------------- operators


def _apply_operator(operator: str, actual: Any, expected: Any) -> tuple[bool, str]:
    """One comparison; returns (result, note explaining a non-obvious result).

    ``actual`` is the field's value (``MISSING`` when absent); ``expected`` the
    rendered filter value. Missing or null fields make every operator false
    except the NOT_* ones, each of which is the exact negation of its positive
    operator. Raises ``_Invalid`` for values the operator cannot use (BETWEEN
    without two bounds of one type, low above high).
    """
    if operator.startswith("NOT_"):
        passed, note = _apply_operator(operator[4:], actual, expected)
        return not passed, note
    if actual is MISSING or actual is None:
        return False, "no value"
    if operator == "EQUAL":
        return _equal(actual, expected), ""
    if operator in _ORDERING:
        return _ordering(operator, actual, expected)
    if operator in ("IN", "ANY_IN"):
        values = _value_list(expected)
        if not values:
            return False, "empty list"
        items = _compared_items(operator, actual, values)
        return any(_equal(item, value) for item in items for value in values), ""
    if operator == "ALL_IN":
        values = _value_list(expected)
        if not values:
            return False, "empty list"
        items = _compared_items(operator, actual, values)
        return all(any(_equal(item, value) for item in items) for value in values), ""
    if operator == "BETWEEN":
        return _between(actual, expected)
    if operator == "LIKE":
        return _like(actual, expected)
    raise _Invalid(f"unknown operator {operator!r}")


def _compared_items(operator: str, actual: Any, values: list[Any]) -> list[Any]:
    items = _items(actual)
    if len(items) * len(values) > MAX_COMPARISONS:
        raise _Invalid(
            f"{operator} would compare {len(items):,} items with {len(values):,} values, "
            f"more than {MAX_COMPARISONS:,} pairs (filter limit)"
        )
    return items


_ORDERING = {
    "LARGER": lambda c: c > 0,
    "SMALLER": lambda c: c < 0,
    "LARGER_EQUAL": lambda c: c >= 0,
    "SMALLER_EQUAL": lambda c: c <= 0,
}


def _ordering(operator: str, actual: Any, expected: Any) -> tuple[bool, str]:
    if _is_container(actual) or _is_container(expected):
        return False, "a list or object has no order"
    order, kind = _compare(actual, expected)
    return _ORDERING[operator](order), f"compared as {kind}"


def _between(actual: Any, expected: Any) -> tuple[bool, str]:
    bounds = _value_list(expected)
    if len(bounds) != 2:
        raise _Invalid(f"BETWEEN needs two bounds 'low,high', got {_show(expected)}")
    low, high = bounds
    kind = _kind_of_pair(low, high)
    if kind == "mixed":
        raise _Invalid(f"BETWEEN bounds {_show(low)} and {_show(high)} are not of the same type")
    if _compare(low, high)[0] > 0:
        raise _Invalid(f"BETWEEN low bound {_show(low)} is greater than high bound {_show(high)}")
    if _is_container(actual):
        return False, "a list or object is not in a range"
    if kind != "text" and _kind_of_pair(actual, low) != kind:
        return False, f"value is not a {_SINGULAR[kind]}"
    inside = _compare(actual, low)[0] >= 0 and _compare(actual, high)[0] <= 0
    return inside, f"compared as {kind}"


_SINGULAR = {"numbers": "number", "dates": "date", "booleans": "boolean", "text": "text"}


def _like(actual: Any, expected: Any) -> tuple[bool, str]:
    pattern = _text(expected)
    if len(pattern) > MAX_LIKE_PATTERN_CHARS:
        raise _Invalid(
            f"LIKE pattern has {len(pattern):,} characters, more than {MAX_LIKE_PATTERN_CHARS:,} (filter limit)"
        )
    matcher = _like_matcher(pattern)
    if isinstance(actual, Mapping):
        return False, "an object is not text"
    texts = [_text(item) for item in _items(actual)]
    total = sum(len(text) for text in texts)
    if total > MAX_LIKE_TEXT_CHARS:
        raise _Invalid(f"LIKE value has {total:,} characters, more than {MAX_LIKE_TEXT_CHARS:,} (filter limit)")
    return any(matcher(text) for text in texts), ""


_ANY_RUN = object()
_ONE = object()


def _like_tokens(pattern: str) -> list[Any]:
    """The pattern as literal characters, ``_ONE`` (``_``) and ``_ANY_RUN`` (``%``, runs collapsed)."""
    tokens: list[Any] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            tokens.append(pattern[index + 1])
            index += 2
            continue
        if char == "%":
            if not tokens or tokens[-1] is not _ANY_RUN:
                tokens.append(_ANY_RUN)
        elif char == "_":
            tokens.append(_ONE)
        else:
            tokens.append(char)
        index += 1
    return tokens


def _like_matcher(pattern: str) -> Any:
    """SQL LIKE, case-insensitive: % any run, _ one character, \\ escapes; no wildcard means "contains".

    Linear in the value's length: a pattern without ``_`` is matched by finding its
    literal pieces in turn (the leftmost place of each is always a right one), a
    pattern with ``_`` by running its automaton on all its states at once (one bit
    a state), never by backtracking.
    """
    tokens = _like_tokens(pattern)
    if not any(token is _ANY_RUN or token is _ONE for token in tokens):
        needle = "".join(tokens).casefold()
        if not needle:
            return lambda text: text == ""
        return lambda text: needle in text.casefold()
    if not any(token is _ONE for token in tokens):
        return _pieces_matcher(tokens)
    return _automaton_matcher(tokens)


def _pieces_matcher(tokens: list[Any]) -> Any:
    pieces = [""]
    for token in tokens:
        if token is _ANY_RUN:
            pieces.append("")
        else:
            pieces[-1] += token
    folded = [_fold(piece) for piece in pieces]
    first, *middle, last = folded  # at least one % splits the pattern in two

    def match(text: str) -> bool:
        value = _fold(text)
        end = len(value) - len(last)
        if end < len(first) or not value.startswith(first) or not value.endswith(last):
            return False
        position = len(first)
        for piece in middle:
            found = value.find(piece, position, end)
            if found < 0:
                return False
            position = found + len(piece)
        return True

    return match


def _automaton_matcher(tokens: list[Any]) -> Any:
    # State i: the first i characters of the pattern (% aside) are matched. Bit i of
    # ``loops`` says a % follows them (state i stays on any character); bit i of a
    # character's mask says the pattern's i-th character accepts it.
    loops = 0
    any_char = 0
    by_char: dict[str, int] = {}
    state = 0
    for token in tokens:
        if token is _ANY_RUN:
            loops |= 1 << state
            continue
        state += 1
        if token is _ONE:
            any_char |= 1 << state
        else:
            key = _fold(token)
            by_char[key] = by_char.get(key, 0) | 1 << state
    accept = 1 << state
    masks = {char: mask | any_char for char, mask in by_char.items()}

    def match(text: str) -> bool:
        active = 1
        for char in _fold(text):
            active = ((active << 1) & masks.get(char, any_char)) | (active & loops)
            if not active:
                return False
        return bool(active & accept)

    return match


class _FoldTable(dict[int, str]):
    """Each character's case-folded form, one character for one (so ``_`` still counts one)."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        folded = char.casefold()
        if len(folded) != 1:
            folded = char.lower()
        if len(folded) != 1:
            folded = char
        if len(self) < 4096:
            self[code] = folded
        return folded


_FOLD = _FoldTable()


def _fold(text: str) -> str:
    return text.lower() if text.isascii() else text.translate(_FOLD)


# --------------------------------------------------------------------------- coercion


_NUMBER = re.compile(r"^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value)) if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, str) and _NUMBER.match(value):
        try:
            return Decimal(value.strip())
        except InvalidOperation:
            return None
    return None


def _boolean(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _date(value: Any) -> tuple[datetime, bool] | None:
    """(aware UTC datetime, whether it is a calendar date without time)."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC), False
    if isinstance(value, date):
        return datetime.combine(value, time(), UTC), True
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if _ISO_DATE.match(text):
            return datetime.combine(date.fromisoformat(text), time(), UTC), True
        if _ISO_DATETIME.match(text):
            if text[-1] in "Zz":
                text = text[:-1] + "+00:00"
            parsed = datetime.fromisoformat(text)
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return parsed.astimezone(UTC), False
    except ValueError:
        return None
    return None


def _text(value: Any) -> str:
    """The text JavaScript would show for a JSON value (true, 5, 1.5)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None or value is MISSING:
        return ""
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _kind_of_pair(left: Any, right: Any) -> str:
    if _number(left) is not None and _number(right) is not None:
        return "numbers"
    if _boolean(left) is not None and _boolean(right) is not None:
        return "booleans"
    if _date(left) is not None and _date(right) is not None:
        return "dates"
    if any(parse(side) is not None for side in (left, right) for parse in (_number, _boolean, _date)):
        return "mixed"
    return "text"


def _compare(left: Any, right: Any) -> tuple[int, str]:
    """Order two scalars: as numbers when both are numbers, then booleans, then dates, else as text."""
    a_number, b_number = _number(left), _number(right)
    if a_number is not None and b_number is not None:
        return _sign(a_number, b_number), "numbers"
    a_bool, b_bool = _boolean(left), _boolean(right)
    if a_bool is not None and b_bool is not None:
        return _sign(a_bool, b_bool), "booleans"
    a_date, b_date = _date(left), _date(right)
    if a_date is not None and b_date is not None:
        if a_date[1] or b_date[1]:
            # A calendar date on either side compares calendar days (UTC).
            return _sign(a_date[0].date(), b_date[0].date()), "dates"
        return _sign(a_date[0], b_date[0]), "dates"
    return _sign(_text(left), _text(right)), "text"


def _sign(left: Any, right: Any) -> int:
    return (left > right) - (left < right)


def _equal(actual: Any, expected: Any) -> bool:
    if _is_container(actual) or _is_container(expected):
        return _structural(actual) == _structural(expected)
    return _compare(actual, expected)[0] == 0


def _structural(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, tuple):
        return list(value)
    return value


def _is_container(value: Any) -> bool:
    return isinstance(value, Mapping | list | tuple)


def _items(actual: Any) -> list[Any]:
    if isinstance(actual, list | tuple):
        return list(actual)
    return [actual]


def _value_list(expected: Any) -> list[Any]:
    """A comma-separated list (items trimmed, empty ones dropped) or a JSON array."""
    if isinstance(expected, list | tuple):
        return list(expected)
    if expected is None or expected is MISSING:
        return []
    if not isinstance(expected, str):
        return [expected]
    text = expected.strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            return parsed
    return [item.strip() for item in text.split(",") if item.strip()]


# --------------------------------------------------------------------------- details


def _word(passed: bool) -> str:
    return "true" if passed else "false"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


def _show(value: Any, limit: int = 80) -> str:
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
