"""Query values read as JSON or numbers (herald.kit.query): bounded as bodies are, refused with a 422 naming them."""

from __future__ import annotations

from typing import Any

import pytest

from herald.kit.errors import ValidationFailed
from herald.kit.query import MAX_INTEGER, MAX_JSON_TEXT, flag, json_text, number, whole_number
from herald.kit.request_guard import MAX_JSON_DEPTH


def refusal(call: Any, *args: Any, **kwargs: Any) -> str:
    """The message of the 422 ``call`` raises, checked to name the parameter."""
    with pytest.raises(ValidationFailed) as raised:
        call(*args, **kwargs)
    [(field, entry)] = raised.value.extra["errors"].items()
    assert field == args[0] and raised.value.status_code == 422
    return str(entry["messages"][0])


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ('{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1), "nested more than 100 levels"),
        ("[" * 1_000 + "]" * 1_000, "nested more than 100 levels"),
        ('{"k":"\\udfff"}', "lone UTF-16 surrogate"),
        ('{"\\ud800x":1}', "lone UTF-16 surrogate"),
        ("\udfff", "lone UTF-16 surrogate"),
        ('{"k":"\\u0000"}', "NUL"),
        ('{"k":NaN}', "NaN is not a number JSON allows"),
        ("[-Infinity]", "-Infinity is not a number JSON allows"),
        ('{"k":1e400}', "1e400 is beyond the numbers a store holds"),
        (f"[{2**63}]", "beyond the 64-bit integers"),
        (f"[{-(2**63) - 1}]", "beyond the 64-bit integers"),
        ("9" * 5_000, "beyond the 64-bit integers"),
        ("{not json", "must be JSON"),
        ("[" + "1," * MAX_JSON_TEXT + "1]", f"longer than {MAX_JSON_TEXT} characters"),
    ],
)
def test_json_past_a_bound_is_refused_naming_it(raw: str, said: str) -> None:
    assert said in refusal(json_text, "data", raw)


def test_json_within_the_bounds_is_read() -> None:
    within = '{"a":' * (MAX_JSON_DEPTH - 1) + "1" + "}" * (MAX_JSON_DEPTH - 1)
    assert json_text("data", within) is not None
    assert json_text("data", f'{{"k":[{MAX_INTEGER},{-MAX_INTEGER - 1},1e308,"\\ud83d\\ude00",null]}}') == {
        "k": [MAX_INTEGER, -MAX_INTEGER - 1, 1e308, "😀", None]
    }


@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-Infinity", "1e400", "-1e400", "x", "1e5", "-1"])
def test_numbers_are_finite_and_in_range(raw: str) -> None:
    assert "must be a time from 0 to 1000" in refusal(number, "createdGte", raw, low=0, high=1000, meaning="a time")


@pytest.mark.parametrize(
    "raw", ["nan", "inf", "1e400", str(2**63), "9" * 400, "9" * 5_000, "-1", "1.5", "x", "1e17", str(MAX_INTEGER + 1)]
)
def test_whole_numbers_are_whole_and_in_range(raw: str) -> None:
    assert "must be a whole number from 0 to" in refusal(whole_number, "offset", raw, default=0, low=0)


def test_what_is_in_range_is_read() -> None:
    assert number("createdGte", "1.5e3", low=0, high=2000) == 1500.0
    assert number("createdGte", None, low=0, high=1) is None and number("createdGte", "", low=0, high=1) is None
    assert whole_number("limit", "10.0", default=5, low=1, high=100) == 10  # novu-py's floats
    assert whole_number("limit", None, default=5, low=1, high=100) == 5
    assert whole_number("offset", str(MAX_INTEGER), default=0, low=0) == MAX_INTEGER
    assert (flag("read", "TRUE"), flag("read", "0"), flag("read", "")) == (True, False, None)
    assert "must be a boolean value" in refusal(flag, "read", "yes")
