"""docs/security.md's claims each name a test: every test they name exists.

A claim names ``tests/<path>.py::test_name``, or ``::test_name`` for another test of the file named just
before it. A renamed or removed test makes the claim point at nothing; this test says which.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/security.md", "docs/templates.md", "docs/delivery.md")
MENTION = re.compile(r"(tests/[\w/]+\.py)|::(\w+)")


def named_tests(text: str) -> list[tuple[str, str]]:
    """(file, test) for each test the text names, ``::name`` taken in the file mentioned last before it."""
    named: list[tuple[str, str]] = []
    last_file = ""
    for match in MENTION.finditer(text):
        if match.group(1):
            last_file = match.group(1)
        elif last_file:
            named.append((last_file, match.group(2)))
    return named


def test_named_tests_are_read_in_the_file_named_before_them() -> None:
    text = "(`tests/a.py::test_one`, `::test_two`) and `tests/b.py` (`::test_three`)"
    assert named_tests(text) == [("tests/a.py", "test_one"), ("tests/a.py", "test_two"), ("tests/b.py", "test_three")]


@pytest.mark.parametrize("doc", DOCS)
def test_every_test_a_claim_names_exists(doc: str) -> None:
    named = named_tests((ROOT / doc).read_text())
    assert named, f"{doc} names no test"
    missing = []
    for file, test in named:
        path = ROOT / file
        if not path.exists() or not re.search(rf"def {re.escape(test)}\b", path.read_text()):
            missing.append(f"{file}::{test}")
    assert not missing, f"{doc} names tests that do not exist: {missing}"
