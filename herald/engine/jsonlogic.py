"""JSONLogic (https://jsonlogic.com), the rules Novu's v2 API takes as conditions: evaluated, bounded.

A topic subscription's preference may carry a ``condition`` such as
``{"==": [{"var": "payload.priority"}, "high"]}``; :func:`evaluate` answers it
for the data given. The operators are JSONLogic's common ones: ``var``,
``missing``, ``missing_some``, ``if``/``?:``, ``==``, ``===``, ``!=``,
``!==``, ``!``, ``!!``, ``or``, ``and``, ``>``, ``>=``, ``<``, ``<=``
(``between`` with three arguments), ``in``, ``cat``, ``substr``, ``min``,
``max``, ``+``, ``-``, ``*``, ``/``, ``%``, ``merge``, and ``some``, ``all``,
``none``, ``map``, ``filter`` over lists. Equality is JSONLogic's loose one
(``1 == "1"``); truthiness is JavaScript's (``[]``, ``""``, ``0`` are false).

A rule is data from an API caller, so its work is bounded: more than
:data:`MAX_OPERATIONS` operations, or nesting deeper than :data:`MAX_DEPTH`,
raise :class:`LogicError`, as does an operator JSONLogic does not have.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

MAX_DEPTH = 32
MAX_OPERATIONS = 10_000
MAX_TEXT = 100_000


class LogicError(ValueError):
    """A rule that cannot be evaluated: an unknown operator, or one past the limits."""


def truthy(value: Any) -> bool:
    """JavaScript's truthiness, which JSONLogic uses (an empty list is false there)."""
    if isinstance(value, list):
        return bool(value)
    if isinstance(value, float) and math.isnan(value):
        return False
    return bool(value)


def _number(value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if value is None:
        return 0.0
    if isinstance(value, str):
        try:
            return float(value.strip()) if value.strip() else 0.0
        except ValueError:
            return math.nan
    return math.nan


def _loose_equal(left: Any, right: Any) -> bool:
    """JavaScript's ``==`` for JSON values: numbers and numeric strings compare as numbers."""
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    if isinstance(left, list | dict) or isinstance(right, list | dict):
        return left is right
    return _number(left) == _number(right)


def _strict_equal(left: Any, right: Any) -> bool:
    if isinstance(left, bool) != isinstance(right, bool):
        return False
    if isinstance(left, int | float) and isinstance(right, int | float):
        return float(left) == float(right)
    return type(left) is type(right) and left == right


def _compare(left: Any, right: Any) -> tuple[Any, Any]:
    if isinstance(left, str) and isinstance(right, str):
        return left, right
    return _number(left), _number(right)


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ",".join(_text(item) for item in value)
    return str(value)


def _result(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _get(data: Any, path: Any, default: Any = None) -> Any:
    if path is None or path == "":
        return data
    current = data
    for part in str(path).split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return default
    return current


class _Evaluation:
    def __init__(self) -> None:
        self.operations = 0

    def run(self, rule: Any, data: Any, depth: int) -> Any:
        self.operations += 1
        if self.operations > MAX_OPERATIONS:
            raise LogicError(f"the condition takes more than {MAX_OPERATIONS} operations")
        if depth > MAX_DEPTH:
            raise LogicError(f"the condition nests deeper than {MAX_DEPTH}")
        if isinstance(rule, list):
            return [self.run(item, data, depth + 1) for item in rule]
        if not isinstance(rule, dict) or len(rule) != 1:
            return rule
        [(operator, arguments)] = rule.items()
        if not isinstance(arguments, list):
            arguments = [arguments]
        lazy = _LAZY.get(operator)
        if lazy is not None:
            return lazy(self, arguments, data, depth + 1)
        eager = _EAGER.get(operator)
        if eager is None:
            raise LogicError(f"unknown operator {str(operator)[:40]!r} in the condition")
        values = [self.run(argument, data, depth + 1) for argument in arguments]
        return eager(*values)

    # The operators that decide which of their arguments to evaluate.

    def var(self, arguments: list[Any], data: Any, depth: int) -> Any:
        path = self.run(arguments[0], data, depth) if arguments else None
        default = self.run(arguments[1], data, depth) if len(arguments) > 1 else None
        return _get(data, path, default)

    def if_(self, arguments: list[Any], data: Any, depth: int) -> Any:
        index = 0
        while index + 1 < len(arguments):
            if truthy(self.run(arguments[index], data, depth)):
                return self.run(arguments[index + 1], data, depth)
            index += 2
        return self.run(arguments[index], data, depth) if index < len(arguments) else None

    def and_(self, arguments: list[Any], data: Any, depth: int) -> Any:
        value: Any = None
        for argument in arguments:
            value = self.run(argument, data, depth)
            if not truthy(value):
                return value
        return value

    def or_(self, arguments: list[Any], data: Any, depth: int) -> Any:
        value: Any = None
        for argument in arguments:
            value = self.run(argument, data, depth)
            if truthy(value):
                return value
        return value

    def missing(self, arguments: list[Any], data: Any, depth: int) -> list[Any]:
        names = [self.run(argument, data, depth) for argument in arguments]
        if len(names) == 1 and isinstance(names[0], list):
            names = names[0]
        return [name for name in names if _get(data, name, None) in (None, "")]

    def missing_some(self, arguments: list[Any], data: Any, depth: int) -> list[Any]:
        needed = self.run(arguments[0], data, depth) if arguments else 0
        names = self.run(arguments[1], data, depth) if len(arguments) > 1 else []
        names = names if isinstance(names, list) else [names]
        absent = [name for name in names if _get(data, name, None) in (None, "")]
        return [] if len(names) - len(absent) >= _number(needed) else absent

    def _items(self, arguments: list[Any], data: Any, depth: int) -> list[Any]:
        items = self.run(arguments[0], data, depth) if arguments else []
        return items if isinstance(items, list) else []

    def some(self, arguments: list[Any], data: Any, depth: int) -> bool:
        test = arguments[1] if len(arguments) > 1 else None
        return any(truthy(self.run(test, item, depth)) for item in self._items(arguments, data, depth))

    def all_(self, arguments: list[Any], data: Any, depth: int) -> bool:
        items = self._items(arguments, data, depth)
        test = arguments[1] if len(arguments) > 1 else None
        return bool(items) and all(truthy(self.run(test, item, depth)) for item in items)

    def none(self, arguments: list[Any], data: Any, depth: int) -> bool:
        return not self.some(arguments, data, depth)

    def map_(self, arguments: list[Any], data: Any, depth: int) -> list[Any]:
        test = arguments[1] if len(arguments) > 1 else None
        return [self.run(test, item, depth) for item in self._items(arguments, data, depth)]

    def filter_(self, arguments: list[Any], data: Any, depth: int) -> list[Any]:
        test = arguments[1] if len(arguments) > 1 else None
        return [item for item in self._items(arguments, data, depth) if truthy(self.run(test, item, depth))]


def _less(*values: Any, strict: bool) -> bool:
    pairs = list(zip(values, values[1:], strict=False))
    if not pairs:
        return False
    for left, right in pairs:
        a, b = _compare(left, right)
        if isinstance(a, float) and (math.isnan(a) or math.isnan(b)):
            return False
        if not (a < b if strict else a <= b):
            return False
    return True


def _greater(left: Any = None, right: Any = None, *_: Any, strict: bool) -> bool:
    a, b = _compare(left, right)
    if isinstance(a, float) and (math.isnan(a) or math.isnan(b)):
        return False
    return bool(a > b if strict else a >= b)


def _in(needle: Any = None, haystack: Any = None, *_: Any) -> bool:
    if isinstance(haystack, str):
        return _text(needle) in haystack
    if isinstance(haystack, list):
        return any(_strict_equal(needle, item) for item in haystack)
    return False


def _cat(*values: Any) -> str:
    text = "".join(_text(value) for value in values)
    if len(text) > MAX_TEXT:
        raise LogicError(f"the condition makes text longer than {MAX_TEXT} characters")
    return text


def _substr(text: Any = "", start: Any = 0, length: Any = None, *_: Any) -> str:
    source = _text(text)
    begin = int(_number(start)) if not math.isnan(_number(start)) else 0
    begin = max(len(source) + begin, 0) if begin < 0 else begin
    if length is None:
        return source[begin:]
    count = int(_number(length)) if not math.isnan(_number(length)) else 0
    return source[begin : len(source) + count] if count < 0 else source[begin : begin + count]


def _arithmetic(operation: Callable[[float, float], float]) -> Callable[..., Any]:
    def apply(*values: Any) -> Any:
        numbers = [_number(value) for value in values]
        if not numbers:
            return None
        result = numbers[0]
        for number in numbers[1:]:
            try:
                result = operation(result, number)
            except (ZeroDivisionError, OverflowError):
                return None
        return _result(result) if not math.isnan(result) and not math.isinf(result) else None

    return apply


def _minus(*values: Any) -> Any:
    if len(values) == 1:
        number = _number(values[0])
        return None if math.isnan(number) else _result(-number)
    return _arithmetic(lambda a, b: a - b)(*values)


def _merge(*values: Any) -> list[Any]:
    merged: list[Any] = []
    for value in values:
        merged.extend(value if isinstance(value, list) else [value])
    return merged


def _extreme(pick: Callable[..., float]) -> Callable[..., Any]:
    def apply(*values: Any) -> Any:
        numbers = [_number(value) for value in values]
        if not numbers or any(math.isnan(number) for number in numbers):
            return None
        return _result(pick(numbers))

    return apply


_LAZY: dict[str, Callable[[_Evaluation, list[Any], Any, int], Any]] = {
    "var": _Evaluation.var,
    "if": _Evaluation.if_,
    "?:": _Evaluation.if_,
    "and": _Evaluation.and_,
    "or": _Evaluation.or_,
    "missing": _Evaluation.missing,
    "missing_some": _Evaluation.missing_some,
    "some": _Evaluation.some,
    "all": _Evaluation.all_,
    "none": _Evaluation.none,
    "map": _Evaluation.map_,
    "filter": _Evaluation.filter_,
}
_EAGER: dict[str, Callable[..., Any]] = {
    "==": lambda a=None, b=None, *_: _loose_equal(a, b),
    "===": lambda a=None, b=None, *_: _strict_equal(a, b),
    "!=": lambda a=None, b=None, *_: not _loose_equal(a, b),
    "!==": lambda a=None, b=None, *_: not _strict_equal(a, b),
    "!": lambda a=None, *_: not truthy(a),
    "!!": lambda a=None, *_: truthy(a),
    ">": lambda *values: _greater(*values, strict=True),
    ">=": lambda *values: _greater(*values, strict=False),
    "<": lambda *values: _less(*values, strict=True),
    "<=": lambda *values: _less(*values, strict=False),
    "in": _in,
    "cat": _cat,
    "substr": _substr,
    "min": _extreme(min),
    "max": _extreme(max),
    "+": _arithmetic(lambda a, b: a + b),
    "*": _arithmetic(lambda a, b: a * b),
    "-": _minus,
    "/": _arithmetic(lambda a, b: a / b),
    "%": _arithmetic(lambda a, b: math.fmod(a, b)),
    "merge": _merge,
}


def evaluate(rule: Any, data: Any) -> Any:
    """The rule's value for the data; :class:`LogicError` when it cannot be had."""
    return _Evaluation().run(rule, data, 0)


def matches(rule: Any, data: Any) -> bool:
    """Whether the rule holds for the data (its value is truthy)."""
    return truthy(evaluate(rule, data))
