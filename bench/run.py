"""``make bench``: start Herald, load it over HTTP, print one table, keep the run as a JSON file in bench/results/.

    python -m bench.run [--quick] [--postgres URL] [--workers N] [--server uvicorn|granian|uvicorn,granian] [--results DIR]

See bench/README.md for what each measurement does and every option.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench import console, email, harness, realtime, report, results, scenarios, store
from bench.harness import SERVERS, Deployment, Environment, Store
from bench.loadgen import CLIENTS, Api, LoadResult, combine
from bench.report import Row, ms, number, verdict

MEASUREMENTS = ("acceptance", "e2e", "sustained", "digest", "fanout", "email", "realtime", "console")

# Targets (docs/performance.md states them with their reasons).
TARGET_CEILING_SHARE = 0.5
# The bulk-trigger row: one request of this many events, each to this many subscribers.
BULK_EVENTS = 100
BULK_RECIPIENTS = 1000
TARGET_E2E_P99 = 0.100
TARGET_SUSTAINED = 2000.0
TARGET_FANOUT_SECONDS = 60.0
TARGET_FANOUT_SIZE = 100_000
MILLION = 1_000_000
TARGET_MILLION_SECONDS = 180.0
# Per-recipient time of the smallest and the largest fan-out: within 25% of each other (a flat cost per recipient).
TARGET_PER_RECIPIENT_RATIO = 1.25
TARGET_RSS_MB = 300.0


@dataclass
class Options:
    quick: bool
    postgres: str | None
    workers: int
    servers: list[str]
    client: str
    concurrency: list[int]
    duration: float
    warmup: float
    turns: int
    e2e_rate: float
    e2e_duration: float
    sustained_duration: float
    email_duration: float
    fanout_sizes: list[int]
    sockets: int
    digest_events: int
    digest_window: int
    skip: set[str]
    extra_env: dict[str, str]
    write: bool
    results: Path
    keep: bool
    timeout: float
    profile: bool
    seed_db: bool
    command: str
    store_reads: bool = False


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="short measurements and small audiences (a few minutes in all)"
    )
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="admin URL of a PostgreSQL server on 127.0.0.1; the run creates its own database there and drops it after (default: SQLite in a temp folder)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="run the API with --no-worker plus N `herald worker` processes (default 0: the worker runs inside the API process)",
    )
    parser.add_argument(
        "--server",
        default="uvicorn",
        help="uvicorn, granian, or a comma list: the first runs every measurement, the others only the trigger acceptance and bare endpoint rows",
    )
    parser.add_argument(
        "--client",
        choices=CLIENTS,
        default="raw",
        help="HTTP client that sends the measured triggers (default raw; see bench/loadgen.py)",
    )
    parser.add_argument(
        "--concurrency", default="32,128", help="closed-loop concurrencies for trigger acceptance (default 32,128)"
    )
    parser.add_argument(
        "--duration",
        type=float,
        help="seconds per acceptance measurement, shared among its turns (default 10; quick 3)",
    )
    parser.add_argument(
        "--warmup", type=float, help="seconds of load before each acceptance turn counts (default 1; quick 0.5)"
    )
    parser.add_argument(
        "--turns",
        type=int,
        help="turns of the bare endpoint and Herald, one after the other, per acceptance measurement (default 3; quick 1)",
    )
    parser.add_argument(
        "--e2e-rate", type=float, default=100.0, help="triggers per second for the end-to-end latency (default 100)"
    )
    parser.add_argument(
        "--e2e-duration", type=float, help="seconds of open-loop triggers for end-to-end latency (default 20; quick 5)"
    )
    parser.add_argument(
        "--sustained-duration", type=float, help="seconds of sustained delivery measured (default 60; quick 10)"
    )
    parser.add_argument(
        "--email-duration",
        type=float,
        help="seconds of email throughput measured for each of SMTP and the HTTP provider (default 30; quick 10)",
    )
    parser.add_argument("--fanout-sizes", help="topic sizes, comma separated (default 10000,100000; quick 500,2000)")
    parser.add_argument(
        "--store-reads",
        action="store_true",
        help="PostgreSQL: add the reads on a store of 10,000,000 messages and 1,000,000 subscribers (bench/store.py; 30 to 60 more minutes)",
    )
    parser.add_argument(
        "--fanout-million",
        action="store_true",
        help="add a fan-out to 1,000,000 subscribers (audience seeded straight into the store, as --seed-db; about 10 more minutes on PostgreSQL)",
    )
    parser.add_argument(
        "--sockets",
        type=int,
        help="idle Inbox sockets held by the API process for the real-time rows (default 5000; quick 1000); 1,000 of them stay connected for the latency",
    )
    parser.add_argument("--digest-events", type=int, help="events into one digest (default 10000; quick 500)")
    parser.add_argument("--digest-window", type=int, help="seconds the digest stays open (default 60; quick 20)")
    parser.add_argument(
        "--skip", default="", help=f"comma list of measurements to leave out: {', '.join(MEASUREMENTS)}"
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for Herald's processes (repeatable), e.g. HERALD_WORKER_CONCURRENCY=16",
    )
    parser.add_argument("--no-write", action="store_true", help="print the table only; write no result file")
    parser.add_argument(
        "--results",
        type=Path,
        default=results.RESULTS,
        metavar="DIR",
        help="folder the run's JSON file is written to (default bench/results)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temp folder (logs, SQLite file) and the PostgreSQL database after the run",
    )
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="give up on the whole run after this many seconds (default 3600)"
    )
    parser.add_argument(
        "--seed-db",
        action="store_true",
        help="create the fan-out audience straight in the store instead of through POST /v1/subscribers/bulk (setup only; the fan-out itself is measured the same way)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="record a py-spy profile of the API process during trigger acceptance (needs py-spy)",
    )
    args = parser.parse_args(argv)

    quick = args.quick
    servers = [name.strip() for name in args.server.split(",") if name.strip()]
    for name in servers:
        if name not in SERVERS:
            parser.error(f"--server: {name!r} is not one of {', '.join(SERVERS)}")
    skip = {name.strip() for name in args.skip.split(",") if name.strip()}
    unknown = skip - set(MEASUREMENTS)
    if unknown:
        parser.error(f"--skip: unknown {', '.join(sorted(unknown))}")
    extra_env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--env needs KEY=VALUE, got {item!r}")
        extra_env[key] = value
    if args.workers < 0 or args.workers > 16:
        parser.error("--workers must be between 0 and 16")
    if args.turns is not None and not 1 <= args.turns <= 20:
        parser.error("--turns must be between 1 and 20")
    fanout = args.fanout_sizes or ("500,2000" if quick else "10000,100000")
    fanout_sizes = sorted({int(value) for value in fanout.split(",") if value.strip()} | ({MILLION} if args.fanout_million else set()))
    return Options(
        quick=quick,
        postgres=args.postgres,
        workers=args.workers,
        servers=servers,
        client=args.client,
        concurrency=[int(value) for value in args.concurrency.split(",") if value.strip()],
        duration=args.duration or (3.0 if quick else 10.0),
        warmup=args.warmup if args.warmup is not None else (0.5 if quick else 1.0),
        turns=args.turns or (1 if quick else 3),
        e2e_rate=args.e2e_rate,
        e2e_duration=args.e2e_duration or (5.0 if quick else 20.0),
        sustained_duration=args.sustained_duration or (10.0 if quick else 60.0),
        email_duration=args.email_duration or (10.0 if quick else 30.0),
        fanout_sizes=fanout_sizes,
        sockets=args.sockets or (1000 if quick else 5000),
        digest_events=args.digest_events or (500 if quick else 10_000),
        digest_window=args.digest_window or (20 if quick else 60),
        skip=skip,
        extra_env=extra_env,
        write=not args.no_write,
        results=args.results,
        keep=args.keep,
        timeout=args.timeout,
        profile=args.profile,
        # A million subscribers through the API would take longer than the fan-out it sets up.
        seed_db=args.seed_db or args.fanout_million,
        store_reads=args.store_reads,
        command="make bench"
        + (
            f" BENCH_ARGS={shlex.quote(' '.join(argv if argv is not None else sys.argv[1:]))}"
            if (argv if argv is not None else sys.argv[1:])
            else ""
        ),
    )


class CpuMeter:
    """CPU used during a measurement: by the load generator, by Herald's processes, by everything else."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.started = 0.0
        self._begin: dict[str, float] = {}

    def _ours(self) -> dict[int, float]:
        pids = [pid for service in self.environment.services if service.alive() for pid in service.pids()]
        pids += self.environment.store.backend_pids()
        return {pid: harness.cpu_seconds(pid) for pid in pids}

    def start(self) -> None:
        self.started = time.monotonic()
        self._ours_begin = self._ours()
        self._self_begin = time.process_time()
        self._machine_begin = harness.machine_busy_seconds()

    def stop(self) -> dict[str, float]:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        ours_end = self._ours()
        service = sum(ours_end[pid] - self._ours_begin.get(pid, 0.0) for pid in ours_end)
        client = time.process_time() - self._self_begin
        machine = harness.machine_busy_seconds() - self._machine_begin
        return {
            "service": service / elapsed,
            "client": client / elapsed,
            "other": max(0.0, machine - service - client) / elapsed,
        }


@dataclass
class Run:
    options: Options
    environment: Environment
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    accounting: scenarios.Accounting = field(default_factory=scenarios.Accounting)
    busy: list[float] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: time.strftime("%H%M%S"))

    @property
    def store(self) -> Store:
        return self.environment.store

    def say(self, text: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    def cpu_note(self, usage: dict[str, float]) -> str:
        self.busy.append(usage["other"])
        return f"CPU: Herald {usage['service']:.2f}, load generator {usage['client']:.2f}, other processes {usage['other']:.2f} cores"

    # Measurements ----------------------------------------------------------------------

    async def acceptance(self, deployment: Deployment, server: str, workflow: str, api: Api) -> None:
        """Trigger acceptance against the framework's ceiling at each concurrency, the two measured in turns.

        The ceiling is the bare endpoint on the same server, running beside
        Herald. The machine's speed moves from minute to minute, and the bare
        endpoint's rate with it: two bare turns some seconds apart differed by
        up to 40% (2026-11-25). Measured once before Herald, the ceiling made
        the share depend on which minutes each fell in; measured in turns, each
        right before one of Herald's, both sample the same minutes, and the
        share is every Herald turn's requests against every bare turn's.
        """
        bare = await self.environment.start_bare(server)
        try:
            for concurrency in self.options.concurrency:
                await self._acceptance_at(deployment, bare, server, workflow, api, concurrency)
        finally:
            bare.stop()

    async def _acceptance_at(
        self, deployment: Deployment, bare: harness.Service, server: str, workflow: str, api: Api, concurrency: int
    ) -> None:
        turns = self.options.turns
        seconds = self.options.duration / turns
        ceilings: list[LoadResult] = []
        results: list[LoadResult] = []
        for turn in range(1, turns + 1):
            meter = CpuMeter(self.environment)
            meter.start()
            ceiling, _ = await scenarios.acceptance(
                bare.base_url,
                None,
                "bench-inapp",
                concurrency,
                seconds,  # type: ignore[attr-defined]
                self.options.warmup,
                self.options.client,
                "bare",
            )
            turn_text = f" turn {turn}/{turns}" if turns > 1 else ""
            self.say(
                f"bare {server} c={concurrency}{turn_text}: {ceiling.rate:.0f} req/s; {self.cpu_note(meter.stop())}"
            )
            meter = CpuMeter(self.environment)
            meter.start()
            label = f"{server}-c{concurrency}" + (f"-turn{turn}" if turns > 1 else "")
            profiler = self._start_profile(deployment, label, seconds) if self.options.profile else None
            result, accepted = await scenarios.acceptance(
                deployment.base_url,
                deployment.api_key,
                workflow,
                concurrency,
                seconds,
                self.options.warmup,
                self.options.client,
                f"acc-{server}",
            )
            usage = meter.stop()
            if profiler is not None:
                self._finish_profile(profiler)
            self.accounting.add(accepted)
            ceilings.append(ceiling)
            results.append(result)
            self.say(
                f"herald {server} c={concurrency}{turn_text}: {result.rate:.0f} req/s"
                f"{_share_text(result.rate, ceiling.rate)}; {self.cpu_note(usage)}"
            )
            await self.drain(api, f"acceptance c={concurrency}{turn_text}")
        ceiling, result = combine(ceilings), combine(results)
        share = result.rate / ceiling.rate if ceiling.rate else None
        how = f" · {turns} turns of {seconds:.3g} s, each right before Herald's" if turns > 1 else ""
        self.rows.append(
            Row(
                f"Framework ceiling: bare FastAPI trigger endpoint ({server}), concurrency {concurrency}",
                f"{number(ceiling.rate)} req/s · p50 {ms(ceiling.p(0.5))} · p99 {ms(ceiling.p(0.99))}{how}{_errors(ceiling)}",
                "reference",
                value=round(ceiling.rate, 1),
                unit="req/s",
                figures={
                    "server": server,
                    "concurrency": concurrency,
                    "p50_ms": _ms(ceiling.p(0.5)),
                    "p99_ms": _ms(ceiling.p(0.99)),
                    "turns": turns,
                    "turn_seconds": round(seconds, 2),
                    "errors": ceiling.errors,
                },
            )
        )
        by_turn = (
            " · turns "
            + ", ".join(
                f"{part.rate / bare_part.rate:.0%}"
                for part, bare_part in zip(results, ceilings, strict=True)
                if bare_part.rate
            )
            if turns > 1
            else ""
        )
        self.rows.append(
            Row(
                f"Trigger acceptance ({server}), concurrency {concurrency}",
                f"{number(result.rate)} req/s{_share_text(result.rate, ceiling.rate)} · p50 {ms(result.p(0.5))} · p99 {ms(result.p(0.99))}{by_turn}{_errors(result)}",
                "≥ 50% of the framework ceiling",
                verdict(None if share is None else share >= TARGET_CEILING_SHARE),
                value=None if share is None else round(share * 100, 1),
                unit="% of framework ceiling",
                figures={
                    "server": server,
                    "concurrency": concurrency,
                    "rate_per_s": round(result.rate, 1),
                    "ceiling_per_s": round(ceiling.rate, 1),
                    "p50_ms": _ms(result.p(0.5)),
                    "p99_ms": _ms(result.p(0.99)),
                    "turns_percent": [
                        round(part.rate / bare_part.rate * 100, 1) if bare_part.rate else None
                        for part, bare_part in zip(results, ceilings, strict=True)
                    ],
                    "errors": result.errors,
                },
            )
        )
        if turns > 1:
            self.say(
                f"herald {server} c={concurrency}: {result.rate:.0f} req/s{_share_text(result.rate, ceiling.rate)} over {turns} turns"
            )

    async def drain(self, api: Api, after: str) -> None:
        """Let the worker deliver everything accepted so far, so the next measurement starts idle."""
        expected = self.accounting.expected_in_app
        remaining = max(0, expected - await api.count_messages())
        timeout = min(600.0, 60.0 + remaining / 20)
        seconds, count = await scenarios.wait_for_backlog(api, expected, timeout)
        if count < expected:
            self.notes.append(
                f"After {after}: {count:,} of {expected:,} in-app messages stored after waiting {seconds:.0f}s."
            )
            self.say(f"backlog after {after} not drained: {count}/{expected}")
        else:
            self.say(f"backlog after {after} drained in {seconds:.1f}s")

    async def end_to_end(self, deployment: Deployment, workflow: str, api: Api) -> None:
        meter = CpuMeter(self.environment)
        meter.start()
        outcome = await scenarios.end_to_end(
            api,
            deployment.base_url,
            deployment.api_key,
            workflow,
            self.options.e2e_rate,
            self.options.e2e_duration,
            self.options.client,
            self.run_id,
        )
        usage = meter.stop()
        self.accounting.add(outcome.accepted.accepted_total)
        p99 = outcome.p_stored(0.99)
        missing = f" · {outcome.missing} accepted but not stored within 30 s" if outcome.missing else ""
        missing += (
            f" · {outcome.accepted.errors} triggers refused or lost ({'; '.join(outcome.accepted.error_samples[:2])})"
            if outcome.accepted.errors
            else ""
        )
        self.rows.append(
            Row(
                f"End-to-end in-app latency at {number(self.options.e2e_rate)} triggers/s: trigger sent → message stored (its createdAt; {number(outcome.sent)} triggers)",
                f"p50 {ms(outcome.p_stored(0.5))} · p99 {ms(p99)} · trigger answers p99 {ms(outcome.accepted.p(0.99))}{missing}",
                "p99 < 100 ms",
                verdict(
                    None
                    if p99 is None
                    else (p99 < TARGET_E2E_P99 and not outcome.missing and not outcome.accepted.errors)
                ),
                value=_ms(p99),
                unit="ms (p99)",
                figures={
                    "rate_per_s": self.options.e2e_rate,
                    "triggers": outcome.sent,
                    "p50_ms": _ms(outcome.p_stored(0.5)),
                    "answers_p99_ms": _ms(outcome.accepted.p(0.99)),
                    "missing": outcome.missing,
                    "errors": outcome.accepted.errors,
                },
            )
        )
        self.rows.append(
            Row(
                f"End-to-end in-app latency as a client polling GET /v1/messages every {scenarios.POLL_SECONDS * 1000:.0f} ms sees it",
                f"p50 {ms(outcome.p_seen(0.5))} · p99 {ms(outcome.p_seen(0.99))}",
                value=_ms(outcome.p_seen(0.99)),
                unit="ms (p99)",
                figures={"poll_ms": round(scenarios.POLL_SECONDS * 1000), "p50_ms": _ms(outcome.p_seen(0.5))},
            )
        )
        self.say(
            f"e2e: stored p50 {ms(outcome.p_stored(0.5))} p99 {ms(p99)} (seen p99 {ms(outcome.p_seen(0.99))}) missing {outcome.missing}; {self.cpu_note(usage)}"
        )
        await self.drain(api, "end-to-end")

    async def sustained(self, workflow: str, api: Api) -> None:
        meter = CpuMeter(self.environment)
        meter.start()
        warmup = 5.0 if self.options.quick else 10.0
        outcome = await scenarios.sustained(api, workflow, self.options.sustained_duration, warmup)
        usage = meter.stop()
        self.accounting.add(outcome.triggers_accepted)
        applies = self.store.kind == "postgres" and self.options.workers == 2
        slowest = (
            f" · slowest {scenarios.SUSTAINED_COUNT_SECONDS:.0f} s {number(outcome.slowest_interval)}/s"
            if outcome.slowest_interval is not None
            else ""
        )
        self.rows.append(
            Row(
                f"Sustained in-app delivery over {outcome.duration:.0f} s ({self._topology()})",
                f"{number(outcome.rate)} messages/s{slowest}",
                "≥ 2,000 messages/s on PostgreSQL with 2 workers"
                if applies
                else "(target applies to PostgreSQL with 2 workers)",
                verdict(outcome.rate >= TARGET_SUSTAINED if applies else None),
                value=round(outcome.rate, 1),
                unit="messages/s",
                figures={
                    "seconds": round(outcome.duration, 1),
                    "slowest_interval_per_s": None
                    if outcome.slowest_interval is None
                    else round(outcome.slowest_interval, 1),
                    "interval_seconds": scenarios.SUSTAINED_COUNT_SECONDS,
                },
            )
        )
        self.say(f"sustained: {outcome.rate:.0f} msg/s; {self.cpu_note(usage)}")
        self.say("sustained, each interval (msg/s): " + " ".join(f"{rate:.0f}" for rate in outcome.intervals))
        await self.drain(api, "sustained delivery")

    async def fan_out(self, workflow: str, api: Api) -> None:
        await self.drain(api, "the digest")
        sizes = sorted(self.options.fanout_sizes)
        seed = self.environment.seed_subscribers if self.options.seed_db else None
        audience, seconds = await scenarios.create_fanout_audience(api, max(sizes), self.options.timeout / 2, seed)
        how = (
            "inserted straight into the store (--seed-db)"
            if seed
            else "created through POST /v1/subscribers/bulk (500 a request, 4 in flight)"
        )
        self.notes.append(
            f"Fan-out setup: {len(audience):,} subscribers {how} in {seconds:.0f} s ({len(audience) / seconds:,.0f}/s); "
            "topic members added 2,000 per request."
        )
        per_recipient: dict[int, float] = {}
        for size in sizes:
            meter = CpuMeter(self.environment)
            meter.start()
            timeout = max(120.0, size / 20)
            outcome = await scenarios.fan_out(api, workflow, audience, size, self.run_id, timeout)
            usage = meter.stop()
            self.accounting.add(outcome.stored)
            applies = self.store.kind == "postgres" and size in (TARGET_FANOUT_SIZE, MILLION)
            target_seconds = TARGET_MILLION_SECONDS if size == MILLION else TARGET_FANOUT_SECONDS
            target_text = ("< 3 min on PostgreSQL for 1,000,000" if size == MILLION else "< 60 s on PostgreSQL for 100,000") if applies else ""
            if outcome.seconds is None:
                result = f"incomplete: {outcome.stored:,} of {size:,} stored after {timeout:.0f} s"
            else:
                result = f"{outcome.seconds:.1f} s ({number(outcome.rate)} messages/s; first message after {outcome.first_message_seconds:.1f} s)"
            self.rows.append(
                Row(
                    f"Topic fan-out: one trigger to {size:,} subscribers, until every in-app message is stored",
                    result,
                    target_text,
                    verdict((outcome.seconds is not None and outcome.seconds < target_seconds) if applies else None),
                    value=None if outcome.seconds is None else round(outcome.seconds, 1),
                    unit="s",
                    figures={
                        "subscribers": size,
                        "stored": outcome.stored,
                        "rate_per_s": None if outcome.seconds is None else round(outcome.rate, 1),
                        "first_message_s": None
                        if outcome.first_message_seconds is None
                        else round(outcome.first_message_seconds, 1),
                    },
                )
            )
            self.say(f"fan-out {size}: {result}; {self.cpu_note(usage)}")
            if outcome.seconds is not None:
                per_recipient[size] = outcome.seconds / size
        self.per_recipient_row(per_recipient)
        if TARGET_FANOUT_SIZE in per_recipient:
            await self.bulk_fan_out(workflow, api, per_recipient[TARGET_FANOUT_SIZE])

    async def bulk_fan_out(self, workflow: str, api: Api, topic_per_recipient: float) -> None:
        """A bulk trigger of 100 events × 1,000 recipients, against the 100,000-member topic's time a recipient."""
        events, recipients = BULK_EVENTS, BULK_RECIPIENTS
        meter = CpuMeter(self.environment)
        meter.start()
        outcome = await scenarios.bulk_fan_out(api, workflow, events, recipients, self.run_id, max(120.0, events * recipients / 20))
        usage = meter.stop()
        self.accounting.add(outcome.stored)
        applies = self.store.kind == "postgres"
        if outcome.seconds is None:
            result, ratio = f"incomplete: {outcome.stored:,} of {outcome.size:,} stored", None
        else:
            ratio = (outcome.seconds / outcome.size) / topic_per_recipient
            result = (
                f"{outcome.seconds:.1f} s ({number(outcome.rate)} messages/s), {outcome.seconds / outcome.size * 1e6:.0f} µs a recipient; "
                f"{ratio:.2f} times the {TARGET_FANOUT_SIZE:,}-member topic's {topic_per_recipient * 1e6:.0f} µs"
            )
        self.rows.append(
            Row(
                f"Bulk trigger: {events} events × {recipients:,} recipients, until every in-app message is stored",
                result,
                "within 25% of the topic's time a recipient on PostgreSQL" if applies else "",
                verdict((ratio is not None and ratio <= TARGET_PER_RECIPIENT_RATIO) if applies else None),
                value=None if ratio is None else round(ratio, 2),
                unit="ratio",
                figures={"events": events, "recipients": recipients, "stored": outcome.stored, "seconds": None if outcome.seconds is None else round(outcome.seconds, 1)},
            )
        )
        self.say(f"bulk fan-out: {result}; {self.cpu_note(usage)}")

    def per_recipient_row(self, per_recipient: dict[int, float]) -> None:
        """Each fan-out's time per recipient and the largest over the smallest: a flat cost shows as a ratio near 1."""
        if len(per_recipient) < 2:
            return
        ratio = max(per_recipient.values()) / min(per_recipient.values())
        applies = self.store.kind == "postgres" and MILLION in per_recipient
        shown = ", ".join(f"{size:,}: {seconds * 1e6:.0f} µs" for size, seconds in sorted(per_recipient.items()))
        self.rows.append(
            Row(
                "Topic fan-out: time per recipient at each size, and the largest over the smallest",
                f"{shown}; ratio {ratio:.2f}",
                "ratio ≤ 1.25 on PostgreSQL up to 1,000,000" if applies else "",
                verdict(ratio <= TARGET_PER_RECIPIENT_RATIO if applies else None),
                value=round(ratio, 2),
                unit="ratio",
                figures={f"per_recipient_us_{size}": round(seconds * 1e6, 1) for size, seconds in per_recipient.items()},
            )
        )
        self.say(f"fan-out per recipient: {shown}; ratio {ratio:.2f}")

    async def digest(self, api: Api, workflow: str) -> None:
        meter = CpuMeter(self.environment)
        meter.start()
        timeout = self.options.digest_window + max(120.0, self.options.digest_events / 20)
        outcome = await scenarios.digest(
            api, workflow, self.options.digest_events, self.options.digest_window, self.run_id, timeout
        )
        usage = meter.stop()
        self.accounting.add(outcome.messages)
        digested = sum(outcome.digested_counts)
        if outcome.first_message_seconds is None:
            result = f"no digest message after {timeout:.0f} s"
        else:
            shape = (
                f"1 message digesting all {digested:,} events"
                if outcome.messages == 1 and digested == outcome.accepted
                else f"{outcome.messages} messages digesting {digested:,} of {outcome.accepted:,} events ({outcome.digested_counts[:5]})"
            )
            result = (
                f"{outcome.first_message_seconds:.1f} s from the first trigger "
                f"({outcome.after_window:+.1f} s after the {outcome.window} s window; triggers sent in {outcome.send_seconds:.1f} s) · {shape}"
            )
        self.rows.append(
            Row(
                f"Digest: {outcome.events:,} events for one subscriber into one digest",
                result,
                value=None if outcome.first_message_seconds is None else round(outcome.first_message_seconds, 1),
                unit="s",
                figures={
                    "events": outcome.events,
                    "accepted": outcome.accepted,
                    "window_s": outcome.window,
                    "messages": outcome.messages,
                    "digested": digested,
                    "send_s": round(outcome.send_seconds, 1),
                },
            )
        )
        self.say(f"digest: {result}; {self.cpu_note(usage)}")

    async def email(self, deployment: Deployment, api: Api) -> None:
        """Email throughput over SMTP and over SendGrid's API, to local peers (bench/email.py)."""
        meter = CpuMeter(self.environment)
        meter.start()
        options = email.EmailOptions(duration=self.options.email_duration, warmup=5.0 if self.options.quick else 10.0)
        figures = await email.measure_on(self.environment, deployment, api, options, say=self.say)
        self.say(f"email: {self.cpu_note(meter.stop())}")
        applies = self.store.kind == "postgres" and self.options.workers == 2
        for name, label, target in (
            ("smtp", "SMTP to a local aiosmtpd sink", email.TARGET_SMTP),
            ("http", "an HTTP provider (SendGrid's API) to a local peer", email.TARGET_HTTP),
        ):
            outcome = figures.get(name) or {}
            rate = outcome.get("rate_per_s")
            slowest = outcome.get("slowest_second_per_s")
            connections = outcome.get("connections")
            trouble = ("" if outcome.get("drained", True) else " · backlog not delivered at the end") + (
                f" · {len(outcome['errors'])} trigger errors ({outcome['errors'][0]})" if outcome.get("errors") else ""
            )
            reuse = (
                f" · {number(outcome.get('received') or 0)} emails over {connections} connections"
                if connections
                else ""
            )
            self.rows.append(
                Row(
                    f"Sustained email over {label} ({self._topology()})",
                    f"{number(rate or 0)} emails/s over {outcome.get('seconds')} s"
                    + (f" · slowest second {number(slowest)}/s" if slowest is not None else "")
                    + reuse
                    + trouble,
                    f"≥ {target:,.0f} emails/s on PostgreSQL with 2 workers"
                    if applies
                    else "(target applies to PostgreSQL with 2 workers)",
                    verdict((rate is not None and rate >= target) if applies else None),
                    value=rate,
                    unit="emails/s",
                    figures={
                        key: outcome.get(key)
                        for key in (
                            "seconds",
                            "delivered",
                            "slowest_second_per_s",
                            "triggers_accepted",
                            "received",
                            "connections",
                            "drained",
                            "cpu_per_email_us",
                        )
                    },
                )
            )

    async def realtime(self, deployment: Deployment, api: Api) -> None:
        """The Inbox's socket (bench/realtime.py): idle sockets held, and trigger → ``notification_received``."""
        options = realtime.RealtimeOptions(
            sockets=self.options.sockets,
            subscribers=min(realtime.LATENCY_SUBSCRIBERS, self.options.sockets),
            rate=self.options.e2e_rate,
            duration=self.options.e2e_duration,
        )
        figures = await realtime.measure_on(self.environment, deployment, api, options, say=self.say)
        per_socket = figures.get("per_socket_kb")
        self.rows.append(
            Row(
                f"Inbox sockets held by one API process: {number(options.sockets)} idle socket.io connections, its RSS per socket",
                f"{per_socket} KB a socket (API RSS {figures.get('rss_before_mb')} → {figures.get('rss_after_mb')} MB; connected in {figures.get('connect_s')} s)",
                f"< {realtime.SOCKET_KB_TARGET:g} KB",
                verdict(None if per_socket is None else per_socket < realtime.SOCKET_KB_TARGET),
                value=per_socket,
                unit="KB",
                figures={key: figures.get(key) for key in ("sockets", "connect_s", "rss_before_mb", "rss_after_mb")},
            )
        )
        p99 = figures.get("p99_ms")
        missing = figures.get("missing") or 0
        failed = figures.get("failed_sends") or 0
        trouble = (f" · {missing} never arrived" if missing else "") + (
            f" · {failed} triggers failed" if failed else ""
        )
        self.rows.append(
            Row(
                f"Trigger → notification_received on the subscriber's socket at {number(options.rate)} triggers/s, "
                f"{number(options.subscribers)} subscribers connected ({number(figures.get('triggers') or 0)} triggers)",
                f"p50 {figures.get('p50_ms')} ms · p99 {p99} ms{trouble}",
                f"p99 < {realtime.P99_TARGET_MS:g} ms",
                verdict(None if p99 is None else (p99 < realtime.P99_TARGET_MS and not missing and not failed)),
                value=p99,
                unit="ms (p99)",
                figures={
                    key: figures.get(key)
                    for key in ("subscribers", "rate_per_s", "triggers", "p50_ms", "max_ms", "missing", "failed_sends")
                },
            )
        )

    def memory(self, deployment: Deployment) -> None:
        for service in deployment.services:
            peaks = [(pid, harness.peak_rss_mb(pid)) for pid in service.pids()]
            known = [(pid, peak) for pid, peak in peaks if peak is not None]
            if not known:
                continue
            top = max(peak for _, peak in known)
            detail = (
                ""
                if len(known) == 1
                else " (largest of "
                + ", ".join(f"{peak:.0f}" for _, peak in known)
                + " MB: server and its worker processes)"
            )
            self.rows.append(
                Row(
                    f"Peak RSS: {service.name}",
                    f"{top:.0f} MB{detail}",
                    "< 300 MB per process",
                    verdict(top < TARGET_RSS_MB),
                    value=round(top, 1),
                    unit="MB",
                    figures={"processes_mb": [round(peak, 1) for _, peak in known]},
                )
            )

    # Profiling -----------------------------------------------------------------------------

    def _start_profile(self, deployment: Deployment, label: str, seconds: float):  # type: ignore[no-untyped-def]
        import shutil
        import subprocess

        executable = shutil.which("py-spy", path=str(harness.BIN)) or shutil.which("py-spy")
        if executable is None:
            self.say("--profile: py-spy is not installed; skipping")
            return None
        pid = max(deployment.api.pids())  # granian serves from its child process
        target = self.environment.folder / f"profile-{label}.txt"
        duration = int(self.options.warmup + seconds + 1)
        process = subprocess.Popen(
            [
                executable,
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(duration),
                "--rate",
                "200",
                "--format",
                "raw",
                "--output",
                str(target),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return process, target

    def _finish_profile(self, profiler) -> None:  # type: ignore[no-untyped-def]
        process, target = profiler
        try:
            process.wait(timeout=30)
        except Exception:
            process.kill()
        self.notes.append(f"py-spy profile (collapsed stacks): {target}")
        self.say(f"profile written to {target}")

    def _topology(self) -> str:
        if self.options.workers:
            return f"{self.store.label}, API + {self.options.workers} worker processes"
        return f"{self.store.label}, worker inside the API process"


def _share_text(rate: float, ceiling: float) -> str:
    return f" ({rate / ceiling:.0%} of the framework ceiling)" if ceiling else ""


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def _errors(result: LoadResult) -> str:
    if not result.errors:
        return ""
    return f" · {result.errors:,} errors ({'; '.join(result.error_samples[:2])})"


async def execute(options: Options) -> Run:
    folder = harness.make_folder()
    store = await Store.postgres(options.postgres) if options.postgres else Store.sqlite(folder)
    environment = Environment(folder, store, options.extra_env)
    run = Run(options, environment)
    run.say(f"temp folder {folder}; store {store.label}" + (f" (database {store.database})" if store.database else ""))
    try:
        await asyncio.wait_for(_measure(run), timeout=options.timeout)
    finally:
        environment.stop_all()
        if options.keep and store.database:
            run.say(f"kept database {store.database}")
        else:
            try:
                await store.drop()
            except Exception as exc:
                print(f"could not drop database {store.database}: {exc}", file=sys.stderr)
        if options.keep:
            run.say(f"kept {folder}")
        else:
            harness.remove_folder(folder)
    return run


async def _measure(run: Run) -> None:
    options = run.options
    environment = run.environment
    if "email" not in options.skip and "HERALD_OUTBOUND_ALLOW" not in environment.extra_env:
        # The email rows deliver to peers on 127.0.0.1, which the outbound policy refuses by default.
        environment.extra_env["HERALD_OUTBOUND_ALLOW"] = harness.HOST
    api_key = await asyncio.to_thread(environment.prepare)
    measure = [name for name in MEASUREMENTS if name not in options.skip]
    primary, *others = options.servers

    workflows: dict[str, str] = {}

    async def deploy(server: str) -> tuple[Deployment, Api]:
        run.say(f"starting Herald on {server} ({run._topology()})")
        deployment = await environment.start_herald(server, api_key, options.workers)
        api = Api(deployment.base_url, api_key)
        if not workflows:
            workflows["in_app"] = await api.create_workflow(scenarios.IN_APP_WORKFLOW, scenarios.in_app_steps())
            workflows["digest"] = await api.create_workflow(
                scenarios.DIGEST_WORKFLOW, scenarios.digest_steps(options.digest_window)
            )
        return deployment, api

    if "acceptance" in measure:
        for server in others:
            deployment, api = await deploy(server)
            try:
                await run.acceptance(deployment, server, workflows["in_app"], api)
            finally:
                await api.close()
                deployment.stop()

    deployment, api = await deploy(primary)
    try:
        if "acceptance" in measure:
            await run.acceptance(deployment, primary, workflows["in_app"], api)
        if "e2e" in measure:
            await run.end_to_end(deployment, workflows["in_app"], api)
        if "sustained" in measure:
            await run.sustained(workflows["in_app"], api)
        if "digest" in measure:
            await run.drain(api, "the previous measurement")
            await run.digest(api, workflows["digest"])
        if "fanout" in measure:
            await run.fan_out(workflows["in_app"], api)
        if "email" in measure:
            await run.drain(api, "the previous measurement")
            await run.email(deployment, api)
        run.memory(deployment)
        # Last: the sockets would count in the API's peak RSS above.
        if "realtime" in measure:
            await run.drain(api, "the previous measurement")
            await run.realtime(deployment, api)
    finally:
        await api.close()
        deployment.stop()
    # Last, on a database and a Herald of its own (bench/console.py): PostgreSQL only, as the target says.
    if "console" in measure:
        if options.postgres:
            run.say("console pages on 1,000,000 messages (bench/console.py)")
            run.rows.extend(await console.measure(options.postgres, notes=run.notes))
        else:
            run.notes.append("Console pages: measured on PostgreSQL only (--postgres URL), not in this run.")
    # Opt-in: seeding ten million messages takes longer than the rest of the run (bench/store.py).
    if options.store_reads:
        if options.postgres:
            run.say("reads on 10,000,000 messages (bench/store.py)")
            run.rows.extend(await store.measure(options.postgres, notes=run.notes))
        else:
            run.notes.append("Store reads: measured on PostgreSQL only (--postgres URL), not in this run.")


def title(options: Options) -> str:
    parts = [
        "SQLite" if not options.postgres else "PostgreSQL",
        options.servers[0]
        + (f" (also {', '.join(options.servers[1:])} for acceptance)" if len(options.servers) > 1 else ""),
        f"API + {options.workers} worker processes" if options.workers else "worker inside the API process",
    ]
    if options.quick:
        parts.append("quick")
    return " · ".join(parts)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    started = time.monotonic()
    started_at = datetime.now(UTC)
    run = asyncio.run(execute(options))
    notes = [
        f"Load: {options.client} client, acceptance {options.duration:g} s per concurrency"
        + (f" in {options.turns} turns with the bare endpoint's, each" if options.turns > 1 else "")
        + f" after {options.warmup:g} s warm-up; "
        f"run took {time.monotonic() - started:.0f} s.",
        *run.notes,
    ]
    if run.busy and max(run.busy) > 0.25:
        notes.append(
            f"Other processes used up to {max(run.busy):.2f} cores during measurements (the machine was shared); "
            "figures are lower than on an idle machine."
        )
    text = report.section(title(options), options.command, notes, run.rows, started_at)
    print()
    print(text)
    if options.write:
        path = results.write(result_record(options, notes, run.rows, started_at, datetime.now(UTC)), options.results)
        print(f"written to {path}", file=sys.stderr)
    return 0


def result_record(options: Options, notes: list[str], rows: list[Row], started: datetime, finished: datetime) -> dict:
    """The run as bench/results.py keeps it: the store, server and settings, the notes and every row."""
    settings = {
        name: getattr(options, name)
        for name in (
            "quick",
            "workers",
            "servers",
            "client",
            "concurrency",
            "duration",
            "warmup",
            "turns",
            "e2e_rate",
            "e2e_duration",
            "sustained_duration",
            "email_duration",
            "fanout_sizes",
            "digest_events",
            "digest_window",
            "skip",
            "extra_env",
            "timeout",
            "profile",
            "seed_db",
        )
    }
    settings["postgres"] = harness_url(options.postgres)
    return results.record(
        kind="bench",
        store="postgres" if options.postgres else "sqlite",
        server=options.servers[0],
        workers=options.workers,
        title=title(options),
        command=options.command,
        settings=settings,
        notes=notes,
        rows=rows,
        started=started,
        finished=finished,
        source="make bench",
    )


def harness_url(url: str | None) -> str | None:
    """The admin URL without its password, if it has one."""
    if not url:
        return None
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


if __name__ == "__main__":
    sys.exit(main())
