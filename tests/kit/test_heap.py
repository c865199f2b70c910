"""The collector settings of a service process (herald/kit/heap.py), and that both commands apply them."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from herald import cli
from herald.kit.heap import THRESHOLDS, settle_heap


@pytest.fixture
def collector() -> Iterator[None]:
    """Leave the test process's collector as it was found."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


class Node:
    def __init__(self) -> None:
        self.itself = self


def test_settle_heap_freezes_what_exists_and_spaces_out_the_passes(collector: None) -> None:
    assert gc.get_freeze_count() == 0
    settle_heap()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == THRESHOLDS


def test_cycles_made_after_settling_are_still_collected(collector: None) -> None:
    settle_heap()
    node = Node()
    gone = weakref.ref(node)
    del node
    gc.collect()
    assert gone() is None


def _collector_state() -> dict[str, Any]:
    return {"frozen": gc.get_freeze_count(), "thresholds": gc.get_threshold()}


def test_herald_worker_settles_the_heap_before_its_loop_starts(
    collector: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def start_loop(main: Any) -> None:
        seen.update(_collector_state())
        main.close()  # the worker itself is not run here

    monkeypatch.setenv("HERALD_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("HERALD_DATABASE_URL", raising=False)
    monkeypatch.setattr(cli, "run_event_loop", start_loop)
    assert cli.main(["worker", "--nice", "0"]) == 0
    assert seen["frozen"] > 0
    assert seen["thresholds"] == THRESHOLDS


def test_herald_serve_settles_the_heap_before_it_serves(
    collector: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def serve(app: Any, **options: Any) -> None:
        seen.update(_collector_state())

    monkeypatch.setenv("HERALD_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("HERALD_DATABASE_URL", raising=False)
    monkeypatch.setattr(uvicorn, "run", serve)
    assert cli.main(["serve", "--port", "1"]) == 0
    assert seen["frozen"] > 0
    assert seen["thresholds"] == THRESHOLDS
