"""JSONLogic as Novu's conditions use it (herald/engine/jsonlogic.py): jsonlogic.com's examples, and its limits."""

from __future__ import annotations

import pytest

from herald.engine.jsonlogic import MAX_DEPTH, MAX_OPERATIONS, LogicError, evaluate, matches

DATA = {"payload": {"priority": "high", "amount": 120, "tags": ["vip", "eu"], "items": [{"n": 1}, {"n": 5}]}}


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"==": [1, 1]}, True),
        ({"==": [1, "1"]}, True),
        ({"===": [1, "1"]}, False),
        ({"!=": [{"var": "payload.priority"}, "low"]}, True),
        ({"var": ["payload.missing", "fallback"]}, "fallback"),
        ({"var": "payload.tags.1"}, "eu"),
        ({"and": [{">": [{"var": "payload.amount"}, 100]}, {"in": ["vip", {"var": "payload.tags"}]}]}, True),
        ({"or": [{"<": [{"var": "payload.amount"}, 10]}, {"==": [{"var": "payload.priority"}, "low"]}]}, False),
        ({"<": [100, {"var": "payload.amount"}, 200]}, True),
        ({"<=": [1, 1, 0]}, False),
        ({"!": [{"var": "payload.none"}]}, True),
        ({"!!": [[]]}, False),
        (
            {
                "if": [
                    {">": [{"var": "payload.amount"}, 1000]},
                    "big",
                    {">": [{"var": "payload.amount"}, 100]},
                    "mid",
                    "small",
                ]
            },
            "mid",
        ),
        ({"in": ["Spring", "Springfield"]}, True),
        ({"cat": ["I love ", {"var": "payload.priority"}, " pie"]}, "I love high pie"),
        ({"substr": ["jsonlogic", -5, 3]}, "log"),
        ({"+": [1, "2", 3.5]}, 6.5),
        ({"-": [5]}, -5),
        ({"/": [1, 0]}, None),
        ({"%": [101, 2]}, 1),
        ({"max": [1, 4, 2]}, 4),
        ({"merge": [1, [2, 3]]}, [1, 2, 3]),
        ({"missing": ["payload.priority", "payload.nope"]}, ["payload.nope"]),
        ({"missing_some": [1, ["payload.priority", "payload.nope"]]}, []),
        ({"some": [{"var": "payload.items"}, {">": [{"var": "n"}, 3]}]}, True),
        ({"all": [{"var": "payload.items"}, {">": [{"var": "n"}, 3]}]}, False),
        ({"none": [{"var": "payload.items"}, {">": [{"var": "n"}, 9]}]}, True),
        ({"map": [{"var": "payload.items"}, {"*": [{"var": "n"}, 2]}]}, [2, 10]),
        ({"filter": [{"var": "payload.items"}, {">": [{"var": "n"}, 3]}]}, [{"n": 5}]),
    ],
)
def test_jsonlogic_operators(rule: dict, expected: object) -> None:
    assert evaluate(rule, DATA) == expected


def test_matches_is_javascript_truthiness() -> None:
    assert matches({"var": "payload.tags"}, DATA) is True
    assert matches({"var": "payload.none"}, DATA) is False
    assert matches({"merge": []}, DATA) is False


def test_what_cannot_be_evaluated_is_refused() -> None:
    with pytest.raises(LogicError, match="unknown operator"):
        evaluate({"exec": ["rm -rf /"]}, DATA)
    deep: object = True
    for _ in range(MAX_DEPTH + 5):
        deep = {"!!": [deep]}
    with pytest.raises(LogicError, match="deeper"):
        evaluate(deep, DATA)
    wide = {"map": [list(range(MAX_OPERATIONS)), {"+": [{"var": ""}, 1]}]}
    with pytest.raises(LogicError, match="operations"):
        evaluate(wide, DATA)
