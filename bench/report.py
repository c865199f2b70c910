"""The results table and the machine it ran on, as printed; bench/results.py keeps each run as a JSON file."""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


@dataclass
class Row:
    """One row of the table: the text printed, and the same figures as numbers for the run's JSON file.

    ``value`` and ``unit`` are the row's headline figure (the one its target is about, if it has one);
    ``figures`` holds its other numbers, each name ending in its unit (``p99_ms``, ``rate_per_s``).
    """

    measurement: str
    result: str
    target: str = ""
    verdict: str = ""
    value: float | None = None
    unit: str | None = None
    figures: dict[str, object] = field(default_factory=dict)


def ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.1f} ms"


def number(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def verdict(passed: bool | None) -> str:
    return "" if passed is None else ("pass" if passed else "**FAIL**")


def table(rows: list[Row]) -> str:
    lines = ["| Measurement | Result | Target | Verdict |", "|---|---|---|---|"]
    for row in rows:
        cells = [row.measurement, row.result, row.target, row.verdict]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines)


def machine_facts() -> dict[str, Any]:
    """Facts about this machine, from /proc where Linux has them (None where it does not)."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": memory,
        "kernel": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
    }


def machine() -> str:
    """The machine in one line, as the table's heading shows it."""
    facts = machine_facts()
    cpu = f"{facts['cores'] or 0} cores" + (f" ({facts['cpu_model']})" if facts["cpu_model"] else "")
    memory = f"{facts['memory_gib']:.1f} GiB RAM" if facts["memory_gib"] is not None else ""
    parts = (cpu, memory, f"Linux {platform.release()}", f"Python {facts['python']}")
    return ", ".join(part for part in parts if part)


def section(title: str, command: str, notes: list[str], rows: list[Row], stamp: datetime | None = None) -> str:
    stamp_text = (stamp or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        f"### {stamp_text} · {title}",
        "",
        f"- Machine: {machine()}",
        f"- Command: `{command}`",
        *[f"- {note}" for note in notes],
        "",
        table(rows),
        "",
    ]
    return "\n".join(parts)
