"""The collector settings of a service process (herald/kit/heap.py), and that both commands apply them."""

from __future__ import annotations

import asyncio
import gc
import inspect
import socket
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from herald import cli
from herald.kit import heap
from herald.kit.heap import THRESHOLDS, PassTimer, settle_heap
from herald.migrations import upgrade


@pytest.fixture
def collector() -> Iterator[None]:
    """Leave the test process's collector as it was found."""
    thresholds = gc.get_threshold()
    callbacks = list(gc.callbacks)
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        gc.callbacks[:] = callbacks


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


def test_a_long_pass_is_logged_with_its_generation(collector: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A full pass holds the event loop; without the line, a latency spike it causes has no trace."""
    settle_heap()
    settle_heap()  # once is enough: a second call adds no second timer
    [timer] = [callback for callback in gc.callbacks if isinstance(callback, PassTimer)]
    caplog.set_level("WARNING", logger="herald.heap")
    gc.collect()
    assert caplog.records == []  # a pass of next to nothing is far below the line
    monkeypatch.setattr(heap, "LONG_PASS_SECONDS", 0.0)
    gc.collect()
    assert [record.getMessage().split(" held ")[0] for record in caplog.records] == ["garbage collection of generation 2"]
    assert timer.longest > 0


async def test_on_a_running_loop_the_line_is_written_by_the_loops_next_turn(
    collector: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A pass may start inside a log handler's own allocation: the line is not written from within the pass."""
    settle_heap()
    monkeypatch.setattr(heap, "LONG_PASS_SECONDS", 0.0)
    caplog.set_level("WARNING", logger="herald.heap")
    gc.collect()
    assert caplog.records == []
    await asyncio.sleep(0)
    assert "garbage collection of generation 2" in caplog.records[0].getMessage()


def _collector_state() -> dict[str, Any]:
    return {"frozen": gc.get_freeze_count(), "thresholds": gc.get_threshold()}


@pytest.mark.parametrize("argv", [["worker", "--nice", "0"], ["serve", "--port", "1"]], ids=["worker", "serve"])
def test_each_service_command_settles_the_heap_before_it_starts(
    argv: list[str], collector: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def start(*args: Any, **options: Any) -> None:
        """Stands in for the worker's event loop and for uvicorn: notes the collector, runs nothing."""
        seen.update(_collector_state())
        for arg in args:
            if inspect.iscoroutine(arg):
                arg.close()

    monkeypatch.setenv("HERALD_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("HERALD_DATABASE_URL", raising=False)
    upgrade(f"sqlite:///{tmp_path / 'herald.db'}")  # both commands refuse a database with no schema
    def serve(server: uvicorn.Server, *args: Any, **options: Any) -> None:
        start()
        server.started = True

    monkeypatch.setattr(cli, "run_event_loop", start)
    monkeypatch.setattr(uvicorn.Server, "run", serve)
    # serve binds its port before the app starts: a socket of no address stands in for it.
    monkeypatch.setattr(cli, "bind_listening_socket", lambda host, port: socket.socket())
    assert cli.main(argv) == 0
    assert seen["frozen"] > 0
    assert seen["thresholds"] == THRESHOLDS
