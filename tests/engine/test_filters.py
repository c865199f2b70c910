from __future__ import annotations

from typing import Any

import pytest

from herald.engine.filters import MISSING, FilterContext, FilterOutcome, lookup, step_passes

SUBSCRIBER = {
    "subscriberId": "sub-1",
    "firstName": "Ada",
    "lastName": "Lovelace",
    "email": "Ada@Example.com",
    "phone": None,
    "locale": "en_GB",
    "isOnline": True,
    "data": {"plan": "pro", "tags": ["vip", "beta"], "age": "42", "score": 7.5, "signup": "2024-02-10"},
}
PAYLOAD = {
    "order": {"total": 150, "currency": "EUR", "items": [{"sku": "A-1"}, {"sku": "B_2"}]},
    "allowed": ["pro", "team"],
    "threshold": 100,
    "when": "2024-05-01T10:00:00Z",
    "flag": True,
    "flagText": "TRUE",
    "zero": 0,
    "empty": "",
    "nothing": None,
    "roles": [],
    "title": "Weekly Report 2024",
    "note": "50% off",
}
TENANT = {"identifier": "acme", "name": "Acme", "data": {"region": "eu"}}
CONTEXT = FilterContext(subscriber=SUBSCRIBER, payload=PAYLOAD, tenant=TENANT)


def cond(on: str, field: str, operator: str, value: Any = "") -> dict[str, Any]:
    return {"on": on, "field": field, "operator": operator, "value": value}


def group(*children: dict[str, Any], value: str = "AND", negated: bool = False) -> dict[str, Any]:
    return {"isNegated": negated, "type": "GROUP", "value": value, "children": list(children)}


def check(on: str, field: str, operator: str, value: Any = "", context: FilterContext = CONTEXT) -> FilterOutcome:
    return step_passes([group(cond(on, field, operator, value))], context)


def passes(on: str, field: str, operator: str, value: Any = "") -> bool:
    outcome = check(on, field, operator, value)
    assert not outcome.invalid, outcome.detail
    return outcome.passed


# --------------------------------------------------------------------------- structure


def test_no_filters_pass() -> None:
    assert step_passes([], CONTEXT) == FilterOutcome(True, "no filters")
    assert step_passes(None, CONTEXT).passed


def test_group_without_children_passes_and_negated_fails() -> None:
    assert step_passes([group()], CONTEXT).passed
    assert step_passes([{"children": []}], CONTEXT).passed
    assert not step_passes([group(negated=True)], CONTEXT).passed


def test_and_needs_every_child() -> None:
    yes = cond("payload", "order.total", "LARGER", "100")
    no = cond("subscriber", "data.plan", "EQUAL", "free")
    assert step_passes([group(yes, yes)], CONTEXT).passed
    outcome = step_passes([group(yes, no)], CONTEXT)
    assert not outcome.passed
    assert 'subscriber.data.plan EQUAL "free" is false (actual "pro")' in outcome.detail


def test_or_needs_one_child() -> None:
    yes = cond("payload", "order.total", "LARGER", "100")
    no = cond("subscriber", "data.plan", "EQUAL", "free")
    assert step_passes([group(no, yes, value="OR")], CONTEXT).passed
    assert step_passes([group(no, yes, value="or")], CONTEXT).passed
    assert not step_passes([group(no, no, value="OR")], CONTEXT).passed


def test_missing_combinator_means_and() -> None:
    yes = cond("payload", "order.total", "LARGER", "100")
    no = cond("subscriber", "data.plan", "EQUAL", "free")
    assert not step_passes([{"children": [yes, no]}], CONTEXT).passed
    assert step_passes([{"children": [yes, yes]}], CONTEXT).passed


def test_negation_inverts_the_group() -> None:
    yes = cond("payload", "order.total", "LARGER", "100")
    no = cond("subscriber", "data.plan", "EQUAL", "free")
    assert not step_passes([group(yes, negated=True)], CONTEXT).passed
    outcome = step_passes([group(yes, no, negated=True)], CONTEXT)
    assert outcome.passed
    assert outcome.detail.startswith("filter passed: NOT (")


def test_top_level_filters_are_ored() -> None:
    yes = group(cond("payload", "order.total", "LARGER", "100"))
    no = group(cond("subscriber", "data.plan", "EQUAL", "free"))
    outcome = step_passes([no, yes], CONTEXT)
    assert outcome.passed
    assert outcome.detail.startswith("filter 2 passed:")
    outcome = step_passes([no, no], CONTEXT)
    assert not outcome.passed and not outcome.invalid
    assert outcome.detail.startswith("no filter passed: filter 1 failed:")
    assert "filter 2 failed:" in outcome.detail


def test_detail_names_field_operator_value_and_actual() -> None:
    outcome = check("payload", "order.total", "LARGER", "200")
    assert outcome == FilterOutcome(
        False, 'filter failed: payload.order.total LARGER "200" is false (actual 150; compared as numbers)'
    )


# --------------------------------------------------------------------------- field lookup


def test_field_paths() -> None:
    assert passes("subscriber", "firstName", "EQUAL", "Ada")
    assert passes("subscriber", "data.plan", "EQUAL", "pro")
    assert passes("payload", "order.items.1.sku", "EQUAL", "B_2")
    assert passes("payload", "order.items[0].sku", "EQUAL", "A-1")
    assert passes("tenant", "data.region", "EQUAL", "eu")
    assert passes("tenant", "identifier", "EQUAL", "acme")


def test_lookup_handles_dotted_keys_and_bad_paths() -> None:
    assert lookup({"a.b": 1}, "a.b") == 1
    assert lookup({"a": [1, {"b": 2}]}, "a.1.b") == 2
    assert lookup({"a": {"b": None}}, "a.b") is None
    assert lookup({"a": [1, 2]}, "a.5") is MISSING
    assert lookup({"a": "text"}, "a.b") is MISSING
    assert lookup({"a": [1]}, "a.x") is MISSING
    assert lookup(None, "x") is MISSING


def test_missing_field_fails_positive_and_passes_negative_operators() -> None:
    positives = ["EQUAL", "LARGER", "SMALLER", "LARGER_EQUAL", "SMALLER_EQUAL", "IN", "ANY_IN", "ALL_IN", "LIKE"]
    for operator in positives:
        outcome = check("payload", "order.discount", operator, "1")
        assert not outcome.passed, operator
        assert "(missing; no value)" in outcome.detail
    assert not passes("payload", "order.discount", "BETWEEN", "1,2")
    for operator in ["NOT_EQUAL", "NOT_IN", "NOT_LIKE"]:
        assert passes("payload", "order.discount", operator, "1"), operator
    assert passes("payload", "order.discount", "NOT_BETWEEN", "1,2")


def test_null_field_counts_as_missing() -> None:
    assert not passes("payload", "nothing", "EQUAL", "")
    assert passes("payload", "nothing", "NOT_EQUAL", "x")
    assert not passes("subscriber", "phone", "LIKE", "")


def test_tenant_conditions_without_tenant() -> None:
    context = FilterContext(subscriber=SUBSCRIBER, payload=PAYLOAD, tenant=None)
    assert not check("tenant", "identifier", "EQUAL", "acme", context).passed
    assert check("tenant", "identifier", "NOT_EQUAL", "acme", context).passed


# --------------------------------------------------------------------------- EQUAL / NOT_EQUAL


def test_equal_text_is_exact_and_case_sensitive() -> None:
    assert passes("subscriber", "lastName", "EQUAL", "Lovelace")
    assert not passes("subscriber", "lastName", "EQUAL", "lovelace")
    assert not passes("subscriber", "lastName", "EQUAL", "Lovelace ")
    assert passes("subscriber", "lastName", "NOT_EQUAL", "lovelace")
    assert not passes("subscriber", "lastName", "NOT_EQUAL", "Lovelace")


def test_equal_compares_numbers_as_numbers() -> None:
    assert passes("payload", "order.total", "EQUAL", "150")
    assert passes("payload", "order.total", "EQUAL", "150.00")
    assert passes("subscriber", "data.age", "EQUAL", "42.0")
    assert passes("subscriber", "data.score", "EQUAL", "7.50")
    assert passes("payload", "zero", "EQUAL", "0")
    assert not passes("payload", "zero", "EQUAL", "")
    assert passes("payload", "order.total", "NOT_EQUAL", "151")


def test_equal_compares_booleans() -> None:
    assert passes("payload", "flag", "EQUAL", "true")
    assert passes("payload", "flag", "EQUAL", "TRUE")
    assert passes("payload", "flagText", "EQUAL", "true")
    assert not passes("payload", "flag", "EQUAL", "false")
    assert not passes("payload", "flag", "EQUAL", "1")
    assert passes("subscriber", "isOnline", "NOT_EQUAL", "false")


def test_equal_compares_dates() -> None:
    assert passes("payload", "when", "EQUAL", "2024-05-01T12:00:00+02:00")
    assert not passes("payload", "when", "EQUAL", "2024-05-01T10:00:01Z")
    # A calendar date on one side compares calendar days.
    assert passes("payload", "when", "EQUAL", "2024-05-01")
    assert not passes("payload", "when", "EQUAL", "2024-05-02")


def test_equal_empty_string() -> None:
    assert passes("payload", "empty", "EQUAL", "")
    assert not passes("payload", "empty", "NOT_EQUAL", "")


def test_equal_on_lists_compares_json() -> None:
    assert passes("subscriber", "data.tags", "EQUAL", '["vip", "beta"]')
    assert not passes("subscriber", "data.tags", "EQUAL", "vip")


# --------------------------------------------------------------------------- ordering


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("LARGER", "149", True),
        ("LARGER", "150", False),
        ("LARGER", "1000", False),
        ("SMALLER", "151", True),
        ("SMALLER", "150", False),
        ("LARGER_EQUAL", "150", True),
        ("LARGER_EQUAL", "150.5", False),
        ("SMALLER_EQUAL", "150", True),
        ("SMALLER_EQUAL", "149.99", False),
    ],
)
def test_ordering_numbers(operator: str, value: str, expected: bool) -> None:
    assert passes("payload", "order.total", operator, value) is expected


def test_ordering_numeric_strings_are_numbers_not_text() -> None:
    # As text "42" < "9"; as numbers 42 > 9.
    assert passes("subscriber", "data.age", "LARGER", "9")
    assert not passes("subscriber", "data.age", "SMALLER", "9")
    assert passes("subscriber", "data.age", "LARGER", "1e1")


def test_ordering_dates() -> None:
    assert passes("payload", "when", "LARGER", "2024-04-30T23:59:59Z")
    assert passes("payload", "when", "SMALLER", "2024-05-01T10:00:00.001Z")
    assert passes("subscriber", "data.signup", "SMALLER", "2024-03-01T00:00:00Z")
    assert passes("subscriber", "data.signup", "LARGER_EQUAL", "2024-02-10")
    assert not passes("subscriber", "data.signup", "LARGER", "2024-02-10T23:00:00Z")


def test_ordering_falls_back_to_text() -> None:
    assert passes("subscriber", "lastName", "LARGER", "Babbage")
    assert passes("subscriber", "lastName", "SMALLER", "Turing")
    outcome = check("subscriber", "lastName", "LARGER", "Babbage")
    assert "compared as text" in outcome.detail


def test_ordering_on_a_list_is_false() -> None:
    outcome = check("subscriber", "data.tags", "LARGER", "1")
    assert not outcome.passed
    assert "has no order" in outcome.detail


# --------------------------------------------------------------------------- lists


def test_in_scalar_is_membership() -> None:
    assert passes("subscriber", "data.plan", "IN", "free, pro ,team")
    assert passes("subscriber", "data.plan", "IN", '["free", "pro"]')
    assert not passes("subscriber", "data.plan", "IN", "free,team")
    # Membership, not substring: "pro" is not in "professional".
    assert not passes("subscriber", "data.plan", "IN", "professional")
    assert passes("payload", "order.total", "IN", "100, 150.0")
    assert passes("payload", "order.total", "IN", "[100, 150]")


def test_in_on_a_list_field_means_the_list_contains_the_value() -> None:
    assert passes("subscriber", "data.tags", "IN", "vip")
    assert passes("subscriber", "data.tags", "IN", "gold,beta")
    assert not passes("subscriber", "data.tags", "IN", "gold")
    assert not passes("payload", "roles", "IN", "admin")


def test_not_in_is_the_negation_of_in() -> None:
    assert passes("subscriber", "data.plan", "NOT_IN", "free,team")
    assert not passes("subscriber", "data.plan", "NOT_IN", "free,pro")
    assert passes("subscriber", "data.tags", "NOT_IN", "gold")
    assert not passes("subscriber", "data.tags", "NOT_IN", "vip")


def test_any_in() -> None:
    assert passes("subscriber", "data.tags", "ANY_IN", "gold, beta")
    assert not passes("subscriber", "data.tags", "ANY_IN", "gold, silver")
    assert passes("subscriber", "data.plan", "ANY_IN", "pro")
    assert not passes("payload", "roles", "ANY_IN", "admin")


def test_all_in() -> None:
    assert passes("subscriber", "data.tags", "ALL_IN", "vip,beta")
    assert passes("subscriber", "data.tags", "ALL_IN", '["beta"]')
    assert not passes("subscriber", "data.tags", "ALL_IN", "vip,gold")
    assert passes("subscriber", "data.plan", "ALL_IN", "pro")
    assert not passes("subscriber", "data.plan", "ALL_IN", "pro,team")


def test_empty_value_list_never_matches() -> None:
    for operator in ("IN", "ANY_IN", "ALL_IN"):
        outcome = check("subscriber", "data.tags", operator, " , ")
        assert not outcome.passed
        assert "empty list" in outcome.detail
    assert passes("subscriber", "data.tags", "NOT_IN", "")


def test_value_placeholder_can_supply_a_list() -> None:
    assert passes("subscriber", "data.plan", "IN", "{{payload.allowed}}")
    assert passes("subscriber", "data.plan", "IN", "{{ allowed }}")
    assert not passes("subscriber", "data.plan", "NOT_IN", "{{payload.allowed}}")


# --------------------------------------------------------------------------- BETWEEN


def test_between_numbers_is_inclusive() -> None:
    assert passes("payload", "order.total", "BETWEEN", "100,200")
    assert passes("payload", "order.total", "BETWEEN", "150, 150")
    assert passes("payload", "order.total", "BETWEEN", "[150, 300]")
    assert not passes("payload", "order.total", "BETWEEN", "151,200")
    assert passes("payload", "order.total", "NOT_BETWEEN", "0,149.5")
    assert not passes("payload", "order.total", "NOT_BETWEEN", "100,200")


def test_between_dates() -> None:
    assert passes("payload", "when", "BETWEEN", "2024-05-01,2024-05-31")
    assert passes("payload", "when", "BETWEEN", "2024-04-01T00:00:00Z,2024-05-01T10:00:00Z")
    assert not passes("payload", "when", "BETWEEN", "2024-05-02,2024-05-31")
    assert passes("payload", "when", "NOT_BETWEEN", "2024-06-01,2024-06-30")
    # Calendar-date bounds include the whole last day.
    late = FilterContext(payload={"when": "2024-05-31T23:30:00Z"})
    assert check("payload", "when", "BETWEEN", "2024-05-01,2024-05-31", late).passed
    assert not check("payload", "when", "BETWEEN", "2024-05-01,2024-05-31T12:00:00Z", late).passed


def test_between_value_of_another_type_is_outside() -> None:
    outcome = check("subscriber", "lastName", "BETWEEN", "1,10")
    assert not outcome.passed
    assert "value is not a number" in outcome.detail
    assert passes("subscriber", "lastName", "NOT_BETWEEN", "1,10")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("100", "BETWEEN needs two bounds 'low,high'"),
        ("1,2,3", "BETWEEN needs two bounds 'low,high'"),
        ("200,100", "low bound \"200\" is greater than high bound \"100\""),
        ("1,2024-01-01", "are not of the same type"),
    ],
)
def test_between_with_bad_bounds_fails_the_step(value: str, message: str) -> None:
    for operator in ("BETWEEN", "NOT_BETWEEN"):
        outcome = check("payload", "order.total", operator, value)
        assert not outcome.passed and outcome.invalid
        assert outcome.detail.startswith("invalid filter: condition 1 (payload.order.total):")
        assert message in outcome.detail


# --------------------------------------------------------------------------- LIKE


def test_like_without_wildcards_means_contains_ignoring_case() -> None:
    assert passes("subscriber", "email", "LIKE", "example")
    assert passes("subscriber", "email", "LIKE", "EXAMPLE.COM")
    assert not passes("subscriber", "email", "LIKE", "example.org")
    assert passes("subscriber", "email", "NOT_LIKE", "example.org")
    assert not passes("subscriber", "email", "NOT_LIKE", "ada@")


def test_like_wildcards_match_the_whole_value() -> None:
    assert passes("subscriber", "email", "LIKE", "%@example.com")
    assert passes("subscriber", "email", "LIKE", "a_a@%")
    assert not passes("subscriber", "email", "LIKE", "%@example")
    assert not passes("subscriber", "email", "LIKE", "_da")
    assert passes("payload", "title", "LIKE", "weekly%20__")


def test_like_escapes_wildcards() -> None:
    assert passes("payload", "note", "LIKE", "50\\%")
    assert passes("payload", "order.items.1.sku", "LIKE", "B\\_")
    assert passes("payload", "order.items.1.sku", "LIKE", "b\\_2")
    # An escaped _ is a literal underscore, not "any character".
    assert not passes("payload", "order.items.0.sku", "LIKE", "A\\_1")
    assert passes("payload", "order.items.0.sku", "LIKE", "A_1")


def test_like_on_numbers_and_lists() -> None:
    assert passes("payload", "order.total", "LIKE", "5")
    assert passes("subscriber", "data.tags", "LIKE", "v%")
    assert not passes("subscriber", "data.tags", "LIKE", "gold")


def test_like_empty_pattern_matches_only_empty_values() -> None:
    assert passes("payload", "empty", "LIKE", "")
    assert not passes("subscriber", "email", "LIKE", "")


# --------------------------------------------------------------------------- values with placeholders


def test_value_is_rendered_against_the_context() -> None:
    assert passes("payload", "order.total", "LARGER", "{{payload.threshold}}")
    assert passes("payload", "order.total", "LARGER", "{{ threshold }}")
    assert passes("subscriber", "email", "LIKE", "{{subscriber.firstName}}@%")
    assert passes("tenant", "name", "EQUAL", "{{ tenant.name }}")
    assert passes("payload", "order.currency", "EQUAL", "{% if payload.order.total > 100 %}EUR{% endif %}")


def test_value_placeholder_that_is_missing_renders_empty() -> None:
    assert passes("payload", "empty", "EQUAL", "{{payload.unknown}}")
    assert not passes("payload", "order.total", "EQUAL", "{{payload.unknown}}")


def test_value_with_a_template_syntax_error_fails_the_step() -> None:
    outcome = check("payload", "order.total", "EQUAL", "{% if %}")
    assert not outcome.passed and outcome.invalid
    assert outcome.detail.startswith("invalid filter: condition 1 (payload.order.total): value")
    assert "not a valid template" in outcome.detail


# --------------------------------------------------------------------------- malformed filters


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ("nope", "invalid filters: expected a list, got a string"),
        ({"children": []}, "invalid filters: expected a list, got an object"),
        (["x"], "invalid filter: expected an object, got a string"),
        ([{"value": "XOR", "children": []}], 'invalid filter: value must be AND or OR, got "XOR"'),
        ([{"isNegated": "yes", "children": []}], 'invalid filter: isNegated must be a boolean, got "yes"'),
        ([{"children": "x"}], "invalid filter: children must be a list, got a string"),
        ([{"children": [5]}], "invalid filter, condition 1: expected an object, got a number"),
        (
            [{"children": [{"on": "webhook", "field": "x", "operator": "EQUAL", "value": "1"}]}],
            "invalid filter, condition 1: 'on' must be one of subscriber, payload, tenant, got \"webhook\"",
        ),
        (
            [{"children": [{"on": "payload", "field": "", "operator": "EQUAL", "value": "1"}]}],
            'invalid filter, condition 1: field must be a non-empty string, got ""',
        ),
        (
            [{"children": [{"on": "payload", "field": "x", "operator": "IS_DEFINED", "value": "1"}]}],
            'invalid filter, condition 1: unknown operator "IS_DEFINED"',
        ),
        (
            [{"children": [{"on": "payload", "field": "x", "operator": "EQUAL", "value": {"a": 1}}]}],
            "invalid filter, condition 1: value must be a string, got an object",
        ),
    ],
)
def test_malformed_filters_fail_with_a_clear_detail(filters: Any, message: str) -> None:
    assert step_passes(filters, CONTEXT) == FilterOutcome(False, message, invalid=True)


def test_a_malformed_filter_fails_the_step_even_when_another_passes() -> None:
    good = group(cond("payload", "order.total", "LARGER", "100"))
    bad = {"children": [{"on": "payload", "field": "x", "operator": "NOPE", "value": "1"}]}
    outcome = step_passes([good, bad], CONTEXT)
    assert outcome == FilterOutcome(False, 'invalid filter 2, condition 1: unknown operator "NOPE"', invalid=True)


def test_malformed_negated_filter_is_not_turned_into_a_pass() -> None:
    outcome = step_passes([group(cond("payload", "order.total", "BETWEEN", "5"), negated=True)], CONTEXT)
    assert not outcome.passed and outcome.invalid
    assert outcome.detail.startswith("invalid filter:")


def test_operator_case_and_non_string_values_are_accepted() -> None:
    assert passes("payload", "order.total", "larger", 100)
    assert passes("payload", "flag", "EQUAL", True)
    assert passes("subscriber", "data.plan", "IN", ["pro", "team"])
    assert passes("payload", "order.total", "EQUAL", None) is False


def test_odd_data_never_raises() -> None:
    context = FilterContext(
        subscriber={"data": {"weird": object(), "nan": float("nan"), "inf": "Infinity"}},
        payload={"nested": {"deep": [[1, 2], {"x": None}]}},
    )
    for operator in ["EQUAL", "LARGER", "IN", "ALL_IN", "LIKE", "NOT_BETWEEN"]:
        for field in ["data.weird", "data.nan", "data.inf"]:
            outcome = check("subscriber", field, operator, "1,2", context)
            assert isinstance(outcome, FilterOutcome)
        outcome = check("payload", "nested.deep", operator, "1,2", context)
        assert isinstance(outcome, FilterOutcome)


# --------------------------------------------------------------------------- LIKE in linear time, and the limits


def _like_reference(pattern: str, text: str) -> bool:
    """LIKE as its definition reads, by dynamic programming over (pattern token, text position)."""
    tokens: list[str | None] = []  # None: %, "": _, else a literal character
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            tokens.append(pattern[index + 1])
            index += 2
            continue
        tokens.append(None if char == "%" else "" if char == "_" else char)
        index += 1
    if all(token not in (None, "") for token in tokens):
        needle = "".join(tokens).casefold()
        return needle in text.casefold() if needle else text == ""
    text = text.lower()
    reachable = [True] + [False] * len(text)  # reachable[j]: tokens so far can match text[:j]
    for token in tokens:
        if token is None:
            for j in range(1, len(text) + 1):
                reachable[j] = reachable[j] or reachable[j - 1]
        else:
            reachable = [False] + [
                reachable[j - 1] and (token == "" or token.lower() == text[j - 1]) for j in range(1, len(text) + 1)
            ]
    return reachable[len(text)]


def _like_as_regex(pattern: str, text: str) -> bool | None:
    """The regex the matcher replaced (fine on small inputs), or None for a pattern without wildcards."""
    import re

    pieces = []
    for token in re.findall(r"\\.|.", pattern, re.S):
        if token == "%":
            pieces.append(".*")
        elif token == "_":
            pieces.append(".")
        else:
            pieces.append(re.escape(token[-1]))
    if ".*" not in pieces and "." not in pieces:
        return None
    return re.fullmatch("".join(pieces), text, re.IGNORECASE | re.DOTALL) is not None


def _like(pattern: str, text: str) -> bool:
    outcome = step_passes([group(cond("payload", "text", "LIKE", pattern))], FilterContext(payload={"text": text}))
    assert not outcome.invalid, outcome.detail
    return outcome.passed


def test_like_agrees_with_its_definition_on_random_patterns() -> None:
    import random

    rng = random.Random(20261125)
    pattern_alphabet = ["a", "b", "A", "%", "_", "\\", "\\%", "\\_", ".", "*"]
    for _ in range(4000):
        pattern = "".join(rng.choice(pattern_alphabet) for _ in range(rng.randint(0, 7)))
        text = "".join(rng.choice("abAB%_\\.*") for _ in range(rng.randint(0, 8)))
        assert _like(pattern, text) == _like_reference(pattern, text), (pattern, text)
        if _like_as_regex(pattern, text) is not None:
            assert _like(pattern, text) == _like_as_regex(pattern, text), (pattern, text)


def test_like_with_many_wildcards_is_answered_at_once() -> None:
    # The backtracking regex this replaced took 11 s to 82 s on these (exponential in the %s).
    import time

    started = time.perf_counter()
    assert not _like("%a%a%a%a%a%a%b", "a" * 200)
    assert _like("%a%a%a%a%a%a%b", "a" * 200 + "B")
    assert not _like("%a_%a_%a_%a_%a_%a_%b", "a" * 5_000)
    assert _like("%a_%a_%a_%a_%a_%a_%b", "a" * 5_000 + "b")
    assert not _like("%" + "a%" * 499 + "b", "a" * 100_000)
    assert time.perf_counter() - started < 5  # seconds; each answer takes milliseconds


def test_like_on_non_ascii_text_folds_case_character_by_character() -> None:
    assert _like("ÉCOLE_%", "école1 de paris")
    assert _like("stra_e", "STRAßE")  # ß is one character for _
    assert not _like("stra__e", "STRAßE")
    assert _like("%σ", "ΟΔΟΣ")


def test_filter_operands_are_bounded() -> None:
    context = FilterContext(payload={"text": "a" * 100_001, "short": "abc", "many": list(range(1_000))})
    long_pattern = step_passes([group(cond("payload", "short", "LIKE", "%" * 1_001))], context)
    assert long_pattern.invalid and not long_pattern.passed
    assert "LIKE pattern has 1,001 characters, more than 1,000 (filter limit)" in long_pattern.detail
    long_text = step_passes([group(cond("payload", "text", "NOT_LIKE", "%b"))], context)
    assert long_text.invalid and not long_text.passed
    assert "LIKE value has 100,001 characters, more than 100,000 (filter limit)" in long_text.detail
    long_value = step_passes([group(cond("payload", "short", "EQUAL", "x" * 10_001))], context)
    assert long_value.invalid and "value has 10,001 characters, more than 10,000 (filter limit)" in long_value.detail
    pairs = step_passes([group(cond("payload", "many", "ALL_IN", ",".join(str(n) for n in range(11))))], context)
    assert pairs.invalid
    assert "ALL_IN would compare 1,000 items with 11 values, more than 10,000 pairs (filter limit)" in pairs.detail
    # At the limits, they are evaluated.
    assert step_passes([group(cond("payload", "many", "IN", ",".join(str(n) for n in range(10))))], context).passed
    assert not step_passes([group(cond("payload", "short", "LIKE", "%" * 999 + "b"))], context).passed
