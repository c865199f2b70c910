"""What an idle ``herald serve`` costs: the share of a core it uses while nothing happens.

    python -m bench.idle [--seconds 60] [--settle 10] [--write]

Starts ``herald migrate``, ``herald bootstrap`` and ``herald serve`` (SQLite in a temporary
folder, the worker in the API process, as ``make run`` does), waits ``--settle`` seconds for
start-up work to finish, then reads the process's CPU time from ``/proc/<pid>/stat`` (user plus
system, children excluded) at the start and the end of ``--seconds``, and prints the share of
one core it used in between, and its context switches a second (``/proc/<pid>/task/*/status``),
which say how often something woke it. ``--write`` keeps the figures in
bench/results/<time>-idle[-<label>].json. The code measured is the one ``herald.cli`` imports: set
PYTHONPATH to compare two trees in turns.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.harness import free_port

RESULTS = Path(__file__).parent / "results"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of ``pid`` (fields 14 and 15 of /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def context_switches(pid: int) -> int:
    """Voluntary and involuntary context switches of every thread of ``pid``: how often it woke."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--write", action="store_true", help="keep the figures in bench/results/")
    parser.add_argument("--label", default="", help="what was measured (kept with the figures, e.g. before or after)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="herald-idle-") as folder:
        env = {**os.environ, "HERALD_DATA_DIR": folder, "HERALD_LOG_LEVEL": "WARNING"}
        command = [sys.executable, "-m", "herald.cli"]
        subprocess.run([*command, "migrate"], env=env, check=True, capture_output=True)
        subprocess.run([*command, "bootstrap", "--json"], env=env, check=True, capture_output=True)
        port = free_port()
        server = subprocess.Popen(
            [*command, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 120  # a start takes long on a busy machine
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/v1/health-check", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("herald serve did not become ready")
                time.sleep(0.2)
            time.sleep(args.settle)
            cpu_before, switches_before, started = cpu_seconds(server.pid), context_switches(server.pid), time.monotonic()
            time.sleep(args.seconds)
            cpu_after, switches_after, ended = cpu_seconds(server.pid), context_switches(server.pid), time.monotonic()
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()

    elapsed = ended - started
    figures = {
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "label": args.label,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "seconds": round(elapsed, 1),
        "cpu_seconds": round(cpu_after - cpu_before, 3),
        "core_percent": round(100 * (cpu_after - cpu_before) / elapsed, 3),
        "wakeups_per_second": round((switches_after - switches_before) / elapsed, 1),
    }
    print(
        f"idle herald serve (SQLite, in-process worker), {figures['seconds']} s: "
        f"{figures['core_percent']}% of a core ({figures['cpu_seconds']} CPU s), "
        f"{figures['wakeups_per_second']} context switches/s"
    )
    if args.write:
        path = RESULTS / f"{datetime.now(UTC).strftime('%Y-%m-%dT%H%MZ')}-idle{'-' + args.label if args.label else ''}.json"
        path.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"kept in {path}")


if __name__ == "__main__":
    main()
