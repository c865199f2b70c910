"""The soak: a steady trigger rate for a long time, watching memory and the backlog for growth.

    python -m bench.soak [--minutes 10] [--rate 100] [--postgres URL] [--workers N] [--no-write] [--results DIR]

Herald is started as in ``make bench`` (bench/harness.py). Triggers for a
one-step in-app workflow go out on a fixed schedule (open loop, one
subscriber out of a pool of 1,000), and every ``--sample`` seconds the run
records each Herald process's resident memory (VmRSS), the backlog (triggers
accepted minus in-app messages stored) and the answers' latency in that
window. After the last trigger it waits for the backlog to drain.

The verdicts compare the steady part of the run (after the first fifth,
which is warm-up: caches fill, the allocator grows its pools) with its end:

- memory: the last third's mean RSS is within 10% (and 20 MB) of the first
  third's, per process;
- backlog: it never exceeds 5 seconds of triggers after warm-up, its last
  third is no larger than its first third plus one second of triggers, and it
  drains to zero.

The table is printed and kept as a JSON file in bench/results/ (bench/results.py).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench import harness, report, results, scenarios
from bench.harness import Environment, Store
from bench.loadgen import Api, LoadResult, Sender, percentile
from bench.report import Row, ms, number, verdict

WARMUP_FRACTION = 0.2
RSS_GROWTH_SHARE = 0.10
RSS_GROWTH_FLOOR_MB = 20.0
BACKLOG_CEILING_SECONDS = 5.0


@dataclass
class Sample:
    at: float
    rss: dict[str, float]
    accepted: int
    stored: int
    window: LoadResult

    @property
    def backlog(self) -> int:
        return max(0, self.accepted - self.stored)


@dataclass
class Soak:
    rate: float
    seconds: float
    samples: list[Sample] = field(default_factory=list)
    overall: LoadResult = field(default_factory=LoadResult)
    drain_seconds: float | None = None
    base_stored: int = 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long triggers are sent (default 10)")
    parser.add_argument("--rate", type=float, default=100.0, help="triggers per second (default 100)")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples (default 10)")
    parser.add_argument("--postgres", metavar="URL", help="admin URL of a PostgreSQL server on 127.0.0.1 (default: SQLite)")
    parser.add_argument("--workers", type=int, default=0, help="N `herald worker` processes beside an API with --no-worker (default 0: in-process worker)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra environment for Herald's processes")
    parser.add_argument("--no-write", action="store_true", help="print the table only; write no result file")
    parser.add_argument("--results", type=Path, default=results.RESULTS, metavar="DIR", help="folder the run's JSON file is written to (default bench/results)")
    return parser.parse_args(argv)


def rss_by_process(environment: Environment) -> dict[str, float]:
    found: dict[str, float] = {}
    for service in environment.services:
        if service.alive():
            value = harness.rss_mb(service.pid)
            if value is not None:
                found[service.name] = value
    return found


async def soak(environment: Environment, base_url: str, api_key: str, rate: float, seconds: float, every: float) -> Soak:
    api = Api(base_url, api_key)
    sender = Sender("raw", base_url, api_key, 256)
    run = Soak(rate, seconds)
    try:
        workflow = await api.create_workflow(scenarios.IN_APP_WORKFLOW, scenarios.in_app_steps())
        run.base_stored = await api.count_messages()
        make = scenarios.trigger_body(workflow, "soak")
        window = LoadResult()
        accepted = 0
        tasks: set[asyncio.Task[None]] = set()

        async def one(index: int, scheduled: float) -> None:
            nonlocal accepted
            try:
                status, answer = await sender.post(scenarios.TRIGGER_PATH, make(index))
            except (TimeoutError, OSError, ConnectionError, ValueError) as exc:
                window.record_failure(exc)
                run.overall.record_failure(exc)
                return
            latency = time.perf_counter() - scheduled
            window.record(status, latency, answer)
            run.overall.record(status, latency, answer)
            if 200 <= status < 300:
                accepted += 1

        async def sample() -> None:
            nonlocal window
            stored = await api.count_messages() - run.base_stored
            current, window = window, LoadResult()
            run.samples.append(Sample(time.monotonic() - started, rss_by_process(environment), accepted, stored, current))
            latest = run.samples[-1]
            print(
                f"[soak {latest.at:6.0f}s] accepted {latest.accepted:,} stored {latest.stored:,} backlog {latest.backlog:,} "
                f"p99 {ms(current.p(0.99))} errors {current.errors} rss "
                + ", ".join(f"{name} {value:.0f} MB" for name, value in latest.rss.items()),
                file=sys.stderr,
                flush=True,
            )

        started = time.monotonic()
        origin = time.perf_counter() + 0.05
        next_sample = started + every
        total = int(rate * seconds)
        for index in range(total):
            scheduled = origin + index / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(one(index, scheduled))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            if time.monotonic() >= next_sample:
                next_sample += every
                await sample()
        if tasks:
            await asyncio.wait(tasks, timeout=60)
        await sample()
        drain_start = time.monotonic()
        while time.monotonic() - drain_start < 300:
            if await api.count_messages() - run.base_stored >= accepted:
                run.drain_seconds = time.monotonic() - drain_start
                break
            await asyncio.sleep(0.25)
        await sample()
    finally:
        await sender.close()
        await api.close()
    return run


def _thirds(values: list[float]) -> tuple[float, float]:
    third = max(1, len(values) // 3)
    return statistics.fmean(values[:third]), statistics.fmean(values[-third:])


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def rows(run: Soak) -> tuple[list[Row], list[str]]:
    sending = [sample for sample in run.samples if sample.at <= run.seconds + 1]
    steady = [sample for sample in sending if sample.at >= run.seconds * WARMUP_FRACTION]
    notes = [f"Samples every {steady[1].at - steady[0].at:.0f} s; the first {WARMUP_FRACTION:.0%} of the run is warm-up and left out of the verdicts." if len(steady) > 1 else "Too few samples for verdicts."]
    table: list[Row] = []
    overall = run.overall
    worst_p99 = max((sample.window.p(0.99) or 0.0 for sample in steady), default=None)
    table.append(Row(
        f"Steady load: {number(run.rate)} triggers/s for {run.seconds / 60:.0f} min (one in-app step)",
        f"{number(overall.ok)} accepted · {overall.errors:,} errors · answers p50 {ms(overall.p(0.5))} · p99 {ms(overall.p(0.99))} · worst window p99 {ms(worst_p99)}",
        "no errors",
        verdict(overall.errors == 0),
        value=overall.errors,
        unit="errors",
        figures={
            "rate_per_s": run.rate, "minutes": round(run.seconds / 60, 1), "accepted": overall.ok,
            "p50_ms": _ms(overall.p(0.5)), "p99_ms": _ms(overall.p(0.99)), "worst_window_p99_ms": _ms(worst_p99),
        },
    ))
    names = sorted({name for sample in steady for name in sample.rss})
    for name in names:
        values = [sample.rss[name] for sample in steady if name in sample.rss]
        if len(values) < 3:
            continue
        first, last = _thirds(values)
        growth = last - first
        allowed = max(RSS_GROWTH_FLOOR_MB, first * RSS_GROWTH_SHARE)
        table.append(Row(
            f"RSS of {name}, after warm-up: first third → last third",
            f"{first:.0f} MB → {last:.0f} MB ({growth:+.1f} MB; min {min(values):.0f}, max {max(values):.0f})",
            f"growth < {RSS_GROWTH_SHARE:.0%} and < {RSS_GROWTH_FLOOR_MB:.0f} MB" if RSS_GROWTH_FLOOR_MB > 0 else "",
            verdict(growth < allowed),
            value=round(growth, 1),
            unit="MB growth",
            figures={
                "process": name, "first_third_mb": round(first, 1), "last_third_mb": round(last, 1),
                "min_mb": round(min(values), 1), "max_mb": round(max(values), 1),
            },
        ))
    backlogs = [float(sample.backlog) for sample in steady]
    if len(backlogs) >= 3:
        first, last = _thirds(backlogs)
        ceiling = run.rate * BACKLOG_CEILING_SECONDS
        table.append(Row(
            "Backlog (accepted − stored) while sending, after warm-up",
            f"first third {first:,.0f} · last third {last:,.0f} · max {max(backlogs):,.0f} triggers",
            f"< {BACKLOG_CEILING_SECONDS:.0f} s of triggers, no upward trend",
            verdict(max(backlogs) <= ceiling and last <= first + run.rate),
            value=max(backlogs),
            unit="triggers (max)",
            figures={"first_third": round(first, 1), "last_third": round(last, 1), "max": max(backlogs)},
        ))
    table.append(Row(
        "Backlog drained after the last trigger",
        "not within 300 s" if run.drain_seconds is None else f"{run.drain_seconds:.1f} s",
        "drains",
        verdict(run.drain_seconds is not None),
        value=None if run.drain_seconds is None else round(run.drain_seconds, 1),
        unit="s",
    ))
    if sending:
        latencies = sorted(latency for sample in steady for latency in sample.window.latencies)
        notes.append(f"Trigger answers after warm-up: p50 {ms(percentile(latencies, 0.5))}, p99 {ms(percentile(latencies, 0.99))}.")
    return table, notes


async def execute(options: argparse.Namespace) -> tuple[Soak, str]:
    folder = harness.make_folder()
    store = await Store.postgres(options.postgres) if options.postgres else Store.sqlite(folder)
    extra = dict(item.split("=", 1) for item in options.env)
    environment = Environment(folder, store, extra)
    try:
        api_key = await asyncio.to_thread(environment.prepare)
        deployment = await environment.start_herald("uvicorn", api_key, options.workers)
        topology = f"{store.label}, " + (f"API + {options.workers} worker processes" if options.workers else "worker inside the API process")
        run = await soak(environment, deployment.base_url, api_key, options.rate, options.minutes * 60, options.sample)
        for service in deployment.services:
            if not service.alive():
                raise RuntimeError(f"{service.name} died during the soak:\n{service.log_tail()}")
        return run, topology
    finally:
        environment.stop_all()
        await store.drop()
        harness.remove_folder(folder)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    started = datetime.now(UTC)
    run, topology = asyncio.run(execute(options))
    table, notes = rows(run)
    args = argv if argv is not None else sys.argv[1:]
    command = "python -m bench.soak" + (f" {shlex.join(args)}" if args else "")
    text = report.section(f"Soak · {topology}", command, notes, table, started)
    print()
    print(text)
    if not options.no_write:
        settings = {key: value for key, value in vars(options).items() if key not in ("no_write", "results")}
        if settings.get("postgres"):
            from sqlalchemy.engine import make_url

            settings["postgres"] = make_url(settings["postgres"]).render_as_string(hide_password=True)
        data = results.record(
            kind="soak", store="postgres" if options.postgres else "sqlite", server="uvicorn", workers=options.workers,
            title=f"Soak · {topology}", command=command, settings=settings, notes=notes, rows=table,
            started=started, finished=datetime.now(UTC), source="python -m bench.soak",
        )
        path = results.write(data, options.results)
        print(f"written to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
