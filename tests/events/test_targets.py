"""The workflows an API process keeps for its trigger batches (herald/events/targets.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from herald.events.targets import TriggerTargets
from herald.workflows.repository import TriggerTarget


def _target(identifier: str) -> TriggerTarget:
    return TriggerTarget(f"id-{identifier}", identifier, True, [], datetime(2026, 1, 1, tzinfo=UTC))


def test_targets_are_kept_per_environment_and_forgotten_on_request() -> None:
    targets = TriggerTargets()
    targets.keep("env-a", _target("welcome"))

    assert targets.get("env-a", "welcome") == _target("welcome")
    assert targets.get("env-b", "welcome") is None  # another environment's workflow of the same name
    targets.forget([("env-a", "welcome")])
    assert targets.get("env-a", "welcome") is None


def test_past_its_size_the_least_recently_kept_go_first() -> None:
    targets = TriggerTargets(max_entries=2)
    targets.keep("env", _target("a"))
    targets.keep("env", _target("b"))
    targets.keep("env", _target("a"))  # kept again: now the newest
    targets.keep("env", _target("c"))

    assert [targets.get("env", name) is not None for name in ("a", "b", "c")] == [True, False, True]
