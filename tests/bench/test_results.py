"""The run's JSON file in bench/results/: its name, and every figure of the table in it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from bench import results
from bench.report import Row
from bench.run import parse_args, result_record

STARTED = datetime(2026, 11, 25, 10, 29, 41, tzinfo=UTC)
FINISHED = datetime(2026, 11, 25, 10, 34, 31, tzinfo=UTC)


def _rows() -> list[Row]:
    return [
        Row(
            "Trigger acceptance (uvicorn), concurrency 32",
            "6,498 req/s (76% of the framework ceiling) · p50 4.2 ms · p99 12.3 ms · turns 77%, 77%, 74%",
            "≥ 50% of the framework ceiling",
            "pass",
            value=76.1,
            unit="% of framework ceiling",
            figures={"rate_per_s": 6498.0, "p99_ms": 12.3, "turns_percent": [77.0, 77.2, 74.1]},
        ),
        Row(
            "End-to-end in-app latency at 100 triggers/s: trigger sent → message stored",
            "p50 6.6 ms · p99 117.6 ms",
            "p99 < 100 ms",
            "**FAIL**",
            value=117.6,
            unit="ms (p99)",
        ),
        Row("Digest: 10,000 events for one subscriber into one digest", "60.4 s from the first trigger", value=60.4, unit="s"),
    ]


def test_a_run_is_written_as_one_json_file_named_after_its_start_and_store(tmp_path: Path) -> None:
    options = parse_args([
        "--postgres", "postgresql://postgres:secret@127.0.0.1:5432/postgres", "--workers", "2",
        "--env", "HERALD_WORKER_CONCURRENCY=16", "--results", str(tmp_path / "runs"),
    ])
    notes = ["Load: raw client, acceptance 10 s per concurrency; run took 290 s."]

    path = results.write(result_record(options, notes, _rows(), STARTED, FINISHED), options.results)

    assert path == tmp_path / "runs" / "2026-11-25T1029Z-postgres.json"
    assert [entry.name for entry in (tmp_path / "runs").iterdir()] == [path.name]
    data = json.loads(path.read_text())
    assert data["schema"] == 1
    assert data["kind"] == "bench"
    assert data["source"] == "make bench"
    assert data["timestamp"] == "2026-11-25T10:29:41Z"
    assert data["finished"] == "2026-11-25T10:34:31Z"
    assert data["store"] == "postgres"
    assert data["server"] == "uvicorn"
    assert data["workers"] == 2
    assert data["title"] == "PostgreSQL · uvicorn · API + 2 worker processes"
    assert data["notes"] == notes
    assert data["command"].startswith("make bench BENCH_ARGS=")

    machine = data["machine"]
    assert set(machine) == {"cores", "cpu_model", "memory_gib", "kernel", "python"}
    assert isinstance(machine["cores"], int) and machine["cores"] >= 1
    assert machine["python"].count(".") == 2
    # The tests run in Herald's git checkout: the commit is the one checked out.
    assert len(data["herald_commit"]) == 40
    assert isinstance(data["herald_dirty"], bool)

    settings = data["settings"]
    assert settings["workers"] == 2
    assert settings["concurrency"] == [32, 128]
    assert settings["turns"] == 3
    assert settings["fanout_sizes"] == [10_000, 100_000]
    assert settings["extra_env"] == {"HERALD_WORKER_CONCURRENCY": "16"}
    assert "secret" not in settings["postgres"]
    assert settings["postgres"].startswith("postgresql://postgres:***@127.0.0.1:5432/")

    assert data["scenarios"] == [
        {
            "name": "Trigger acceptance (uvicorn), concurrency 32",
            "value": 76.1,
            "unit": "% of framework ceiling",
            "target": "≥ 50% of the framework ceiling",
            "met": True,
            "result": "6,498 req/s (76% of the framework ceiling) · p50 4.2 ms · p99 12.3 ms · turns 77%, 77%, 74%",
            "figures": {"rate_per_s": 6498.0, "p99_ms": 12.3, "turns_percent": [77.0, 77.2, 74.1]},
        },
        {
            "name": "End-to-end in-app latency at 100 triggers/s: trigger sent → message stored",
            "value": 117.6,
            "unit": "ms (p99)",
            "target": "p99 < 100 ms",
            "met": False,
            "result": "p50 6.6 ms · p99 117.6 ms",
            "figures": {},
        },
        {
            "name": "Digest: 10,000 events for one subscriber into one digest",
            "value": 60.4,
            "unit": "s",
            "target": None,
            "met": None,
            "result": "60.4 s from the first trigger",
            "figures": {},
        },
    ]


def test_a_second_run_in_the_same_minute_keeps_the_first(tmp_path: Path) -> None:
    options = parse_args(["--quick", "--results", str(tmp_path)])
    first = results.write(result_record(options, [], _rows(), STARTED, FINISHED), tmp_path)
    second = results.write(result_record(options, [], _rows()[:1], STARTED, FINISHED), tmp_path)

    assert first.name == "2026-11-25T1029Z-sqlite.json"
    assert second.name == "2026-11-25T1029Z-sqlite-2.json"
    assert len(json.loads(first.read_text())["scenarios"]) == 3
    assert len(json.loads(second.read_text())["scenarios"]) == 1
    assert json.loads(second.read_text())["settings"]["quick"] is True


def test_a_soak_is_named_as_one() -> None:
    data = {"timestamp": "2026-11-25T10:50:00Z", "kind": "soak", "store": "postgres"}
    assert results.file_name(data) == "2026-11-25T1050Z-postgres-soak.json"


def test_the_results_folder_defaults_to_bench_results() -> None:
    assert parse_args([]).results == Path(results.__file__).resolve().parent / "results"
    assert parse_args(["--no-write"]).write is False
