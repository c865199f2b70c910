"""The scale rows of the bench: the million fan-out's flag and per-recipient row, the store's rows, the hosts harness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import hosts, run, store
from bench.harness import REPO


def test_the_million_fan_out_is_a_flag_and_seeds_its_audience() -> None:
    options = run.parse_args(["--fanout-million"])
    assert options.fanout_sizes == [10_000, 100_000, 1_000_000]
    assert options.seed_db
    default = run.parse_args([])
    assert default.fanout_sizes == [10_000, 100_000] and not default.seed_db
    assert not default.store_reads and run.parse_args(["--store-reads"]).store_reads


class Stub:
    """What per_recipient_row reads of a run: its store's kind, and where rows and lines go."""

    def __init__(self, kind: str) -> None:
        self.store = type("StoreKind", (), {"kind": kind})()
        self.rows: list[Any] = []

    def say(self, text: str) -> None:
        pass


def test_the_per_recipient_row_gives_each_size_and_the_largest_over_the_smallest() -> None:
    flat, steep = Stub("postgres"), Stub("postgres")
    run.Run.per_recipient_row(flat, {10_000: 2.0 / 10_000, 100_000: 22.0 / 100_000, 1_000_000: 240.0 / 1_000_000})  # type: ignore[arg-type]
    run.Run.per_recipient_row(steep, {10_000: 2.0 / 10_000, 1_000_000: 300.0 / 1_000_000})  # type: ignore[arg-type]
    [row] = flat.rows
    assert row.value == 1.2 and row.verdict == "pass"
    assert row.figures == {"per_recipient_us_10000": 200.0, "per_recipient_us_100000": 220.0, "per_recipient_us_1000000": 240.0}
    assert "10,000: 200 µs" in row.result and "ratio 1.20" in row.result
    assert steep.rows[0].value == 1.5 and steep.rows[0].verdict == "**FAIL**"
    one_size = Stub("postgres")
    run.Run.per_recipient_row(one_size, {10_000: 0.0002})  # type: ignore[arg-type]
    assert one_size.rows == []


def test_a_store_read_is_judged_by_its_p95_and_prints_its_plan() -> None:
    read = store.Read("GET /v1/messages", "api", "/v1/messages")
    fast = store.Timed(read, "measured", [0.010] * 19 + [0.400], plan="Limit > Index Scan (ix_messages_environment_created)")
    slow = store.Timed(read, "measured", [0.060] * 20, plan="Aggregate > Seq Scan (messages)")
    failed = store.Timed(read, "answered 500", [])
    rows = store.rows_of([fast, slow, failed], store.MESSAGES)
    assert [row.verdict for row in rows] == ["pass", "**FAIL**", ""]
    assert rows[0].result.endswith("plan: Limit > Index Scan (ix_messages_environment_created)")
    assert rows[1].value == 60.0 and rows[2].result == "answered 500"
    # A smaller store than the target's is measured, not judged.
    assert store.rows_of([fast], 20_000)[0].verdict == ""


def test_the_plan_names_the_top_node_and_the_first_that_reads() -> None:
    plan = {
        "Node Type": "Limit",
        "Plans": [{"Node Type": "Sort", "Plans": [{"Node Type": "Index Scan", "Index Name": "ix_a", "Relation Name": "messages"}]}],
    }
    assert store.describe(plan) == "Limit > Index Scan (ix_a)"
    assert store.describe({"Node Type": "Seq Scan", "Relation Name": "messages"}) == "Seq Scan"


def test_the_hosts_harness_runs_where_it_can_and_skips_cleanly_where_it_cannot(tmp_path: Path) -> None:
    """Five hosts, a worker cut off and the other killed: nothing lost, doubled or missed (needs root and ip netns)."""
    command = [sys.executable, "-m", "bench.hosts", "--triggers", "300", "--sockets", "10", "--cut-seconds", "4",
               "--lease-seconds", "2", "--results", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    reason = hosts.can_run()
    if reason is not None:
        assert done.returncode == 0 and f"bench.hosts skipped: {reason}" in done.stdout
        pytest.skip(reason)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout[done.stdout.index("{"):])
    assert report["triggers_sent"] == report["transactions_with_a_message"] == 300
    assert report["lost"] == report["transactions_not_exactly_one_message"] == report["messages_not_seen_live"] == 0
    assert report["of_those_finished"] == report["jobs_held_by_the_cut_worker"]
    [written] = tmp_path.glob("*-postgres-hosts.json")
    assert json.loads(written.read_text())["kind"] == "hosts"
