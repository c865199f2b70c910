"""What one trigger costs when it is delivered alone: CPU, statements and latency at a trickle.

    python -m bench.trickle [--triggers 1000] [--rate 50] [--postgres ADMIN_URL]

Runs Herald's app in this process with its in-process worker (as ``herald
serve`` does), against a fresh SQLite store or a fresh PostgreSQL database,
and sends triggers for a one-step in-app workflow at a steady ``--rate``,
each to its own subscriber, so each is accepted, expanded and delivered on
its own: the regime of the end-to-end target, where a round of one job costs
what a round of a hundred does in statements. It prints the process's CPU
per trigger (API and worker together; with PostgreSQL, the database's share
is not in it), the statements sent per trigger, and the latency from the
trigger's send to its message's ``createdAt``.

``make bench`` measures what a user meets; this isolates the per-trigger cost
of the engine, which is what a change to a round's statements moves.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvloop
from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine

from bench.harness import Store
from bench.inprocess import call

WORKFLOW = "trickle"
SUBSCRIBERS = 200
WARMUP = 50


class StatementCounter:
    """Statements sent to the store (each cursor execute, BEGIN IMMEDIATE included), by their opening words."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.enabled = False
        event.listen(Engine, "before_cursor_execute", self._count)

    def _count(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # Counted as sent (a regular expression here cost a few percent of the CPU measured).
        if self.enabled:
            self.counts[statement] += 1

    def by_opening(self) -> Counter[str]:
        """The counts by the statements' opening words, whitespace folded."""
        folded: Counter[str] = Counter()
        for statement, count in self.counts.items():
            folded[re.sub(r"\s+", " ", statement).strip()[:70]] += count
        return folded

    def close(self) -> None:
        event.remove(Engine, "before_cursor_execute", self._count)


async def run(store: Store, triggers: int, rate: float, show_statements: bool) -> None:
    from herald.app import create_app
    from herald.config import load_settings
    from herald.kit import tracing
    from herald.kit.heap import settle_heap
    from herald.migrations import upgrade_async
    from herald.models import Message
    from herald.organizations.service import create_organization

    await upgrade_async(store.url)
    settings = load_settings(
        data_dir=Path(tempfile.mkdtemp(prefix="herald-trickle-")),
        database_url=store.url,
        secret_key="bench-trickle",
        run_worker=True,
        log_level="warning",
    )
    tracing.configure()  # as `herald serve` does: on only when the OTEL_* variables ask
    app = create_app(settings)
    counter = StatementCounter()
    async with app.router.lifespan_context(app):
        settle_heap()  # as `herald serve` does
        async with app.state.sessionmaker() as session:
            organization = await create_organization(session)
            await session.commit()
        api_key = organization.environments[0].api_key or ""
        steps = [{"template": {"type": "in_app", "content": "Hi {{subscriber.firstName}}, {{payload.n}}"}}]
        status, answer = await call(
            app, "POST", "/v1/workflows", json.dumps({"name": WORKFLOW, "active": True, "steps": steps}).encode(), api_key
        )
        if status != 201:
            raise RuntimeError(f"creating the workflow answered {status}: {answer[:300]!r}")
        for index in range(SUBSCRIBERS):
            body = json.dumps({"subscriberId": f"sub-{index}", "firstName": f"Sub {index}"}).encode()
            status, answer = await call(app, "POST", "/v1/subscribers", body, api_key)
            if status != 201:
                raise RuntimeError(f"creating a subscriber answered {status}: {answer[:300]!r}")

        async def stored() -> int:
            async with app.state.sessionmaker() as session:
                return int(await session.scalar(select(func.count()).select_from(Message)) or 0)

        async def send(count: int, offset: int) -> dict[str, datetime]:
            sent: dict[str, datetime] = {}
            start = time.perf_counter()
            for index in range(count):
                # A fixed schedule, whatever the answers (no coordinated omission).
                delay = start + index / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                transaction = f"t-{offset + index}"
                body = json.dumps(
                    {"name": WORKFLOW, "to": f"sub-{(offset + index) % SUBSCRIBERS}", "payload": {"n": index}, "transactionId": transaction}
                ).encode()
                sent[transaction] = datetime.now(UTC)
                status, answer = await call(app, "POST", "/v1/events/trigger", body, api_key)
                if status != 201:
                    raise RuntimeError(f"a trigger answered {status}: {answer[:300]!r}")
            return sent

        async def drained(expected: int, timeout: float = 60.0) -> None:
            deadline = time.monotonic() + timeout
            while await stored() < expected:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {await stored()} of {expected} messages were stored in {timeout:.0f} s")
                await asyncio.sleep(0.05)

        await send(WARMUP, 0)
        await drained(WARMUP)
        counter.enabled = True
        cpu = time.process_time()
        sent = await send(triggers, WARMUP)
        await drained(WARMUP + triggers)
        cpu = time.process_time() - cpu
        counter.enabled = False
        async with app.state.sessionmaker() as session:
            rows = (
                await session.execute(
                    select(Message.transaction_id, Message.created_at).where(Message.transaction_id.in_(list(sent)))
                )
            ).all()
    counter.close()
    latencies = sorted(
        (created.replace(tzinfo=UTC) if created.tzinfo is None else created) - sent[transaction] for transaction, created in rows
    )
    milliseconds = [latency.total_seconds() * 1000 for latency in latencies]
    # The drain's own count queries are in the statements; take them out.
    counts = counter.by_opening()
    statements = sum(count for text, count in counts.items() if not text.startswith("SELECT count(*)"))
    p99 = milliseconds[min(len(milliseconds) - 1, int(len(milliseconds) * 0.99))]
    print(
        f"{store.label}: {triggers} triggers at {rate:g}/s · CPU {cpu / triggers * 1000:.2f} ms a trigger (API and worker) · "
        f"{statements / triggers:.1f} statements a trigger · trigger → message stored p50 {statistics.median(milliseconds):.1f} ms "
        f"p99 {p99:.1f} ms"
    )
    if show_statements:
        for text, count in counts.most_common():
            if not text.startswith("SELECT count(*)"):
                print(f"  {count / triggers:5.2f}  {text}")


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="herald-trickle-") as folder:
        store = await Store.postgres(args.postgres) if args.postgres else Store.sqlite(Path(folder))
        try:
            await run(store, args.triggers, args.rate, args.statements)
        finally:
            await store.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triggers", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=50.0, help="triggers a second (default 50)")
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="a PostgreSQL server on 127.0.0.1 (default: SQLite)")
    parser.add_argument("--statements", action="store_true", help="list the statements a trigger sends")
    uvloop.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
