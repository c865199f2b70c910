"""The results table, the machine it ran on, and docs/performance.md (dated sections appended, never rewritten)."""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
RESULTS_HEADING = "## Results"


@dataclass
class Row:
    measurement: str
    result: str
    target: str = ""
    verdict: str = ""


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


def machine() -> str:
    cores = os.cpu_count() or 0
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
                break
    except OSError:
        pass
    cpu = f"{cores} cores" + (f" ({model})" if model else "")
    return ", ".join(part for part in (cpu, memory, f"Linux {platform.release()}", f"Python {sys.version.split()[0]}") if part)


def section(title: str, command: str, notes: list[str], rows: list[Row]) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        f"### {stamp} · {title}",
        "",
        f"- Machine: {machine()}",
        f"- Command: `{command}`",
        *[f"- {note}" for note in notes],
        "",
        table(rows),
        "",
    ]
    return "\n".join(parts)


def append(text: str, path: Path = DOCS) -> None:
    """Add a dated section at the end of the results; earlier sections stay as they are."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# Performance\n\n" + RESULTS_HEADING + "\n\n")
    current = path.read_text()
    if RESULTS_HEADING not in current:
        current = current.rstrip("\n") + "\n\n" + RESULTS_HEADING + "\n"
    path.write_text(current.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n")
