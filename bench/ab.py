"""Trigger acceptance of two versions of Herald, measured in turns on the same machine.

    python -m bench.ab --b ../other-checkout [--postgres URL --workers 2] [--rounds 6] [--b-env KEY=VALUE]

The machine's speed moves from minute to minute (docs/performance.md, "the
machine's speed"), by more than most changes to the trigger path move
acceptance: two full runs minutes apart compare the minutes as much as the
code. Here both versions run side by side, each with its own store, and take
turns: every round measures A and B in an order that alternates from round to
round, each for a few seconds right after the bare endpoint, and only once both
have delivered everything accepted before. A round's ratios share their minute, so the
paired difference B - A holds where the ratios themselves wander.

A is this checkout unless ``--a`` names another; ``--a-env`` and ``--b-env``
give either side settings (the same checkout twice, with a setting apart, is
a comparison too). Besides requests/s, each turn reports the CPU a trigger
cost: the API's while accepting it, and Herald's whole (API, workers, their
PostgreSQL backends) until it is delivered. Steadier figures than throughput,
and the ones that say whether a change made less work or only moved it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import harness, scenarios
from bench.harness import REPO, Deployment, Environment, Store
from bench.loadgen import CLIENTS, Api


@dataclass
class Side:
    """One version of Herald: its checkout, settings, store and running deployment."""

    name: str
    tree: Path
    env: dict[str, str]
    environment: Environment | None = None
    deployment: Deployment | None = None
    api: Api | None = None
    workflow: str = ""
    expected_in_app: int = 0
    shares: list[float] = field(default_factory=list)
    api_us: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)


def _settings(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    settings = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"a setting needs KEY=VALUE, got {item!r}")
        settings[key] = value
    return settings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=Path, default=REPO, help="checkout of Herald for side A (default: this one)")
    parser.add_argument("--b", type=Path, default=REPO, help="checkout of Herald for side B (default: this one)")
    parser.add_argument("--a-env", action="append", default=[], metavar="KEY=VALUE", help="setting for side A's processes")
    parser.add_argument("--b-env", action="append", default=[], metavar="KEY=VALUE", help="setting for side B's processes")
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="PostgreSQL admin URL (127.0.0.1); a database per side")
    parser.add_argument("--workers", type=int, help="worker processes per side (default 2 on PostgreSQL, 0 on SQLite)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds measured per turn (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of load before a turn counts (default 1)")
    parser.add_argument("--client", choices=CLIENTS, default="raw")
    args = parser.parse_args(argv)
    args.a_settings = _settings(parser, args.a_env)
    args.b_settings = _settings(parser, args.b_env)
    if args.workers is None:
        args.workers = 2 if args.postgres else 0
    if args.a.resolve() == args.b.resolve() and args.a_settings == args.b_settings:
        print("note: A and B are the same checkout with the same settings (an A/A run: the noise alone)", file=sys.stderr)
    return args


def say(text: str) -> None:
    print(f"[ab {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


async def start_side(side: Side, args: argparse.Namespace, folder: Path) -> None:
    side_folder = folder / side.name
    side_folder.mkdir()
    store = await Store.postgres(args.postgres) if args.postgres else Store.sqlite(side_folder)
    side.environment = Environment(side_folder, store, side.env, tree=side.tree.resolve())
    api_key = await asyncio.to_thread(side.environment.prepare)
    side.deployment = await side.environment.start_herald("uvicorn", api_key, args.workers)
    side.api = Api(side.deployment.base_url, api_key)
    side.workflow = await side.api.create_workflow(scenarios.IN_APP_WORKFLOW, scenarios.in_app_steps())
    say(f"{side.name}: {side.tree.resolve()} {side.env or ''} on {store.label}, {side.deployment.base_url}")


async def stop_side(side: Side) -> None:
    if side.api is not None:
        await side.api.close()
    if side.environment is not None:
        side.environment.stop_all()
        try:
            await side.environment.store.drop()
        except Exception as exc:  # keep stopping the other side
            print(f"could not drop database {side.environment.store.database}: {exc}", file=sys.stderr)


async def drain(sides: tuple[Side, ...]) -> None:
    """Wait until the sides have delivered what they accepted: a turn measured beside the other's workers is not its own."""
    for side in sides:
        assert side.api
        seconds, count = await scenarios.wait_for_backlog(side.api, side.expected_in_app, 120.0)
        if count < side.expected_in_app:
            raise RuntimeError(f"{side.name}: {count} of {side.expected_in_app} messages stored after {seconds:.0f} s")


async def ceiling(bare_url: str, args: argparse.Namespace) -> float:
    result, _ = await scenarios.acceptance(
        bare_url, None, "bench-inapp", args.concurrency, args.duration, args.warmup, args.client, "bare"
    )
    return result.rate


def cpu_by_part(side: Side) -> dict[str, float]:
    """CPU seconds used so far by the side's API process, its workers and its database's backends."""
    assert side.environment and side.deployment

    def total(pids: list[int]) -> float:
        return sum(harness.cpu_seconds(pid) for pid in pids)

    return {
        "api": total(side.deployment.api.pids()),
        "workers": total([pid for worker in side.deployment.workers for pid in worker.pids()]),
        "database": total(side.environment.store.backend_pids()),
    }


def machine_now() -> tuple[float, float, float]:
    """(wall clock, the machine's busy CPU seconds, this process's CPU seconds), to see what else ran in a turn."""
    return time.monotonic(), harness.machine_busy_seconds(), time.process_time()


async def turn(side: Side, args: argparse.Namespace, bare_rate: float) -> str:
    """One measured turn of ``side``, then the delivery of what it accepted; returns its line of the round.

    Two CPU figures a trigger: the API process's during the turn (what
    accepting costs), and Herald's whole (API, workers, database backends)
    from the turn's start until every trigger accepted in it is delivered.
    Database backends that ended meanwhile are not counted (the pools keep
    theirs); the delivery's count of stored messages is counted, the same
    for both sides.
    """
    assert side.environment and side.deployment and side.api
    before = cpu_by_part(side)
    started = machine_now()
    result, accepted = await scenarios.acceptance(
        side.deployment.base_url, side.deployment.api_key, side.workflow, args.concurrency, args.duration,
        args.warmup, args.client, f"ab-{side.name}",
    )
    accepting = cpu_by_part(side)
    ended = machine_now()
    side.expected_in_app += accepted
    await drain((side,))
    delivered = cpu_by_part(side)
    if result.errors:
        raise RuntimeError(f"{side.name}: {result.errors} errors ({'; '.join(result.error_samples[:2])})")
    share = result.rate / bare_rate
    per_trigger = 1e6 / max(accepted, 1)  # CPU seconds -> µs a trigger
    api_us = (accepting["api"] - before["api"]) * per_trigger
    whole_us = sum(delivered[part] - before[part] for part in delivered) * per_trigger
    side.shares.append(share)
    side.api_us.append(api_us)
    side.cpu_us.append(whole_us)
    parts = ", ".join(f"{part} {(delivered[part] - before[part]) * per_trigger:.0f}" for part in delivered)
    # Cores the rest of the machine used during the turn: not Herald, not the load generator (autovacuum, others).
    wall = ended[0] - started[0]
    herald_cores = sum(accepting[part] - before[part] for part in accepting) / wall
    other = (ended[1] - started[1]) / wall - herald_cores - (ended[2] - started[2]) / wall
    return (
        f"{side.name} {result.rate:,.0f} req/s ({share:.0%}); µs a trigger: accepting {api_us:.0f}, "
        f"to delivery {whole_us:.0f} ({parts}); other processes {max(other, 0.0):.2f} cores"
    )


async def measure(args: argparse.Namespace) -> tuple[Side, Side]:
    folder = harness.make_folder()
    a = Side("A", args.a, args.a_settings)
    b = Side("B", args.b, args.b_settings)
    bare_environment = Environment(folder, Store.sqlite(folder))  # the bare endpoint has no store
    try:
        for side in (a, b):
            await start_side(side, args, folder)
        bare = await bare_environment.start_bare("uvicorn")
        for index in range(args.rounds):
            lines = []
            for side in (a, b) if index % 2 == 0 else (b, a):
                # Each turn gets the ceiling measured just before it, with nothing else running.
                await drain((a, b))
                rate = await ceiling(bare.base_url, args)  # type: ignore[attr-defined]
                lines.append(f"bare {rate:,.0f}, " + await turn(side, args, rate))
            say(f"round {index + 1}: " + "; ".join(lines))
    finally:
        for side in (a, b):
            await stop_side(side)
        bare_environment.stop_all()
        harness.remove_folder(folder)
    return a, b


def summary(a: Side, b: Side, args: argparse.Namespace) -> str:
    differences = [later - earlier for earlier, later in zip(a.shares, b.shares, strict=True)]
    api_differences = [later - earlier for earlier, later in zip(a.api_us, b.api_us, strict=True)]
    cpu_differences = [later - earlier for earlier, later in zip(a.cpu_us, b.cpu_us, strict=True)]
    lines = [f"Trigger acceptance at concurrency {args.concurrency}, {len(differences)} rounds of {args.duration:g} s turns:"]
    for side in (a, b):
        lines.append(
            f"  {side.name}: share of the ceiling median {statistics.median(side.shares):.0%} "
            f"(range {min(side.shares):.0%}-{max(side.shares):.0%}); "
            f"CPU a trigger median: accepting (API) {statistics.median(side.api_us):.0f} µs, "
            f"to delivery (all of Herald) {statistics.median(side.cpu_us):.0f} µs"
        )
    wins = sum(1 for difference in differences if difference > 0)
    lines.append(
        f"  B - A: median {statistics.median(differences):+.1%} of the ceiling, B ahead in {wins} of {len(differences)} rounds; "
        f"CPU a trigger median {statistics.median(api_differences):+.0f} µs accepting, {statistics.median(cpu_differences):+.0f} µs to delivery"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    a, b = asyncio.run(measure(args))
    print(summary(a, b, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
