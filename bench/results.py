"""One JSON file a run under bench/results/: when, where, how, and every figure of the printed table.

The file is named after the run's start and its store, e.g. ``2026-11-25T1029Z-postgres.json``
(``-<kind>`` for other kinds: ``-soak``, ``-console``, ``-hardening``). Its fields:

- ``schema`` (1), ``kind`` (``bench``, ``soak``, ``console`` or ``hardening``), ``source`` (the tool that wrote it);
- ``timestamp``: the run's start, UTC, ISO 8601; ``finished``: its end;
- ``store`` (``sqlite`` or ``postgres``), ``server``, ``workers``, ``title``;
- ``machine``: ``cores``, ``cpu_model``, ``memory_gib``, ``kernel``, ``python``;
- ``herald_commit`` (``git rev-parse HEAD``) and ``herald_dirty`` (uncommitted changes);
- ``command`` and ``settings`` (every option of the run), ``notes`` (the lines printed above the table);
- ``scenarios``: one entry a row of the table: ``name``, ``value`` and ``unit`` (the row's headline
  figure), ``target`` (as printed), ``met`` (true, false, or null where no target applies), ``result``
  (the row as printed) and ``figures`` (its other numbers, each name carrying its unit).
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.report import Row, machine_facts

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SCHEMA = 1


def herald_commit(root: Path = ROOT) -> tuple[str | None, bool | None]:
    """The checkout's commit and whether it has uncommitted changes (None, None outside git)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


def scenario(row: Row) -> dict[str, Any]:
    met = {"pass": True, "**FAIL**": False}.get(row.verdict)
    return {
        "name": row.measurement,
        "value": row.value,
        "unit": row.unit,
        "target": row.target or None,
        "met": met,
        "result": row.result,
        "figures": dict(row.figures),
    }


def record(
    *,
    kind: str,
    store: str,
    server: str | None,
    workers: int,
    title: str,
    command: str,
    settings: dict[str, Any],
    notes: list[str],
    rows: list[Row],
    started: datetime,
    finished: datetime,
    source: str,
) -> dict[str, Any]:
    commit, dirty = herald_commit()
    return {
        "schema": SCHEMA,
        "kind": kind,
        "source": source,
        "timestamp": _stamp(started),
        "finished": _stamp(finished),
        "store": store,
        "server": server,
        "workers": workers,
        "title": title,
        "machine": machine_facts(),
        "herald_commit": commit,
        "herald_dirty": dirty,
        "command": command,
        "settings": {key: _plain(value) for key, value in settings.items()},
        "notes": list(notes),
        "scenarios": [scenario(row) for row in rows],
    }


def file_name(data: dict[str, Any]) -> str:
    started = datetime.fromisoformat(data["timestamp"].replace("Z", "+00:00"))
    suffix = "" if data["kind"] == "bench" else f"-{data['kind']}"
    return f"{started:%Y-%m-%dT%H%M}Z-{data['store']}{suffix}.json"


def write(data: dict[str, Any], folder: Path = RESULTS) -> Path:
    """Write the run's file into ``folder`` (created if missing); never overwrites an earlier run's."""
    folder.mkdir(parents=True, exist_ok=True)
    name = file_name(data)
    path = folder / name
    count = 2
    while path.exists():
        path = folder / name.replace(".json", f"-{count}.json")
        count += 1
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return path


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value
