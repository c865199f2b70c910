"""The large-store rows of ``make bench``: the reads people and the console make, on 10,000,000 messages.

    python -m bench.store [--postgres ADMIN_URL] [--messages 10000000] [--subscribers 1000000] [--requests 60]

A database of its own gets ``--messages`` messages, each with its run
(notification) and event, over the last 30 days, and ``--subscribers``
subscribers, inserted straight into the store by ``INSERT ... SELECT
generate_series`` (the statements of bench/console.py, at these sizes). The
secondary indexes of the seeded tables are dropped before the seed and built
again after it: one sorted build each is many times faster than ten million
inserts into them, and the store ends the same. Then ``herald serve
--no-worker`` on it, and each read of :data:`READS` is asked for once, then
``--warmup`` times, then ``--requests`` times one after another, timed from
the request to the answer's last byte over loopback (the server's time plus
a loopback round trip, under a millisecond). Each row also prints the top
node of the PostgreSQL plan of the read's costliest statement, built by the
feature's own repository code in this process (EXPLAIN, no ANALYZE).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench import console, harness, report, results
from bench.harness import Environment, Store
from bench.report import Row, verdict

TARGET_P95 = 0.050
MESSAGES = 10_000_000
SUBSCRIBERS = 1_000_000
WORKFLOWS = 20
# The subscriber whose feed, Inbox and messages are read: one with the most in-app messages (g % 4 == 2).
SUBSCRIBER = 2
SEARCH_PREFIX = "user-00012"
SEEDED_TABLES = ("subscribers", "events", "notifications", "messages")


@dataclass
class Read:
    """One read: its row name, whether it needs the API key, the Inbox token or the console's sign-in, and its path."""

    name: str
    auth: str  # "api", "inbox" or "console"
    path: str


def reads(ids: dict[str, str]) -> list[Read]:
    """The reads measured; ``ids`` names the seeded rows they ask for."""
    subscriber, transaction, workflow = ids["subscriber"], ids["transaction"], ids["workflow"]
    return [
        Read("GET /v1/messages", "api", "/v1/messages"),
        Read("GET /v1/messages?channel=email", "api", "/v1/messages?channel=email"),
        Read("GET /v1/messages?subscriberId=", "api", f"/v1/messages?subscriberId={subscriber}"),
        Read("GET /v1/messages?transactionId=", "api", f"/v1/messages?transactionId={transaction}"),
        Read("GET /v1/messages?channel=in_app&subscriberId=", "api", f"/v1/messages?channel=in_app&subscriberId={subscriber}"),
        Read("GET /v1/notifications", "api", "/v1/notifications"),
        Read("GET /v1/notifications?channels=email", "api", "/v1/notifications?channels=email"),
        Read("GET /v1/notifications?subscriberIds=", "api", f"/v1/notifications?subscriberIds={subscriber}"),
        Read("GET /v1/notifications?templates=", "api", f"/v1/notifications?templates={workflow}"),
        Read("GET /v1/notifications?transactionId=", "api", f"/v1/notifications?transactionId={transaction}"),
        Read("Subscriber feed", "api", f"/v1/subscribers/{subscriber}/notifications/feed"),
        Read("Subscriber unseen count", "api", f"/v1/subscribers/{subscriber}/notifications/unseen"),
        Read("Inbox list", "inbox", "/v1/inbox/notifications?limit=10"),
        Read("Inbox counts", "inbox", '/v1/inbox/notifications/count?filters=[{"read":false},{"seen":false}]'),
        Read("Console Activity", "console", "/console/activity"),
        Read("Console subscriber search", "console", f"/console/subscribers?search={SEARCH_PREFIX}"),
    ]


def say(text: str) -> None:
    print(f"[bench.store {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


async def seed(store: Store, environment: Environment, workflow_ids: list[tuple[str, str]], messages: int, subscribers: int) -> float:
    """bench/console.py's seed at these sizes, with the seeded tables' secondary indexes built after it."""
    import asyncpg

    started = time.monotonic()
    connection = await asyncpg.connect(store.url)
    try:
        indexes = await connection.fetch(
            "SELECT i.indexname, i.indexdef FROM pg_indexes AS i"
            " JOIN pg_class AS c ON c.relname = i.indexname JOIN pg_index AS x ON x.indexrelid = c.oid"
            " WHERE i.tablename = ANY($1::text[]) AND NOT x.indisprimary AND NOT x.indisunique",
            list(SEEDED_TABLES),
        )
        for index in indexes:
            await connection.execute(f'DROP INDEX "{index["indexname"]}"')
        await connection.execute("SET maintenance_work_mem = '256MB'")
        await console.seed_with(connection, environment, workflow_ids, messages=messages, subscribers=subscribers, log=say)
        say(f"building {len(indexes)} indexes")
        for index in indexes:
            await connection.execute(index["indexdef"])
        await connection.execute("VACUUM ANALYZE")
    finally:
        await connection.close()
    return time.monotonic() - started


# Plans: the costliest statement of each read, built by the feature's repository --------------------


def statements_of(name: str, environment_id: str, ids: dict[str, str]) -> list[Any]:
    """The statements behind a read, as the repository builds them (those that do not need a session's answers)."""
    from sqlalchemy import select

    from herald.kit.pagination import count_bound
    from herald.messages.repository import FeedFilter, MessageRepository, _count
    from herald.models import Notification
    from herald.notifications.repository import ActivityFilter, NotificationRepository

    messages = MessageRepository(None)  # type: ignore[arg-type]
    notifications = NotificationRepository(None)  # type: ignore[arg-type]
    internal = ids["internal_subscriber"]
    if name.startswith("GET /v1/messages"):
        query = messages.list_query(
            environment_id,
            subscriber_id=internal if "subscriberId" in name else None,
            channel=("email" if "email" in name else "in_app" if "in_app" in name else None),
            transaction_ids=[ids["transaction"]] if "transactionId" in name else None,
        )
        return [_count(query, count_bound(0, 10)), query.limit(10)]
    if name.startswith("GET /v1/notifications"):
        filters = ActivityFilter(
            channels=["email"] if "channels" in name else None,
            subscriber_ids=[ids["subscriber"]] if "subscriberIds" in name else None,
            workflow_ids=[ids["workflow"]] if "templates" in name else None,
            transaction_ids=[ids["transaction"]] if "transactionId" in name else None,
        )
        conditions = notifications._conditions(environment_id, filters)
        count = notifications.count_query(conditions, count_bound(0, 10))
        page = select(Notification).where(*conditions).order_by(Notification.created_at.desc(), Notification.id.desc()).limit(10)
        return [count, page]
    if name == "Subscriber feed":
        query = messages.feed_query(environment_id, internal, FeedFilter())
        return [_count(query, count_bound(0, 10)), query.limit(10)]
    if name == "Subscriber unseen count":
        return [messages.count_query(environment_id, internal, seen=False, limit=100)]
    return []


async def top_node(store: Store, statements: list[Any]) -> str:
    """The top node of the costliest statement's plan, with the index it reads if any."""
    if not statements:
        return "—"
    import asyncpg
    from sqlalchemy.dialects import postgresql

    connection = await asyncpg.connect(store.url)
    try:
        costliest: tuple[float, str] = (-1.0, "—")
        for statement in statements:
            sql = str(statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
            [plan] = json.loads(await connection.fetchval("EXPLAIN (FORMAT JSON) " + sql))
            node = plan["Plan"]
            cost = float(node["Total Cost"])
            if cost > costliest[0]:
                costliest = (cost, describe(node))
        return costliest[1]
    finally:
        await connection.close()


def describe(node: dict[str, Any]) -> str:
    """``Limit > Index Scan (ix_…)``: the top node and the first node under it that reads a table or an index."""
    names = [node["Node Type"]]
    stack = list(node.get("Plans", []))
    while stack:
        child = stack.pop(0)
        if "Relation Name" in child or "Index Name" in child:
            names.append(f"{child['Node Type']} ({child.get('Index Name') or child['Relation Name']})")
            break
        stack[:0] = child.get("Plans", [])
    return " > ".join(names)


# Measuring -----------------------------------------------------------------------------------------


@dataclass
class Timed:
    read: Read
    status: str
    times: list[float]
    plan: str = "—"

    def percentile(self, share: float) -> float | None:
        if not self.times:
            return None
        ordered = sorted(self.times)
        return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


async def time_read(client: httpx.AsyncClient, read: Read, warmup: int, requests: int) -> Timed:
    first = await client.get(read.path)
    if first.status_code == 404 and read.auth == "console":
        return Timed(read, "not built", [])
    if first.status_code != 200:
        return Timed(read, f"answered {first.status_code}: {first.text[:200]}", [])
    for _ in range(warmup):
        await client.get(read.path)
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        answer = await client.get(read.path)
        times.append(time.perf_counter() - started)
        if answer.status_code != 200:
            return Timed(read, f"answered {answer.status_code}", times)
    return Timed(read, "measured", times)


def rows_of(measured: list[Timed], messages: int) -> list[Row]:
    rows = []
    for timed in measured:
        name = f"{messages:,}-message store: {timed.read.name}"
        target = f"p95 < {TARGET_P95 * 1000:.0f} ms"
        if timed.status != "measured":
            rows.append(Row(name, timed.status, target, "", None, None, {"path": timed.read.path, "plan": timed.plan}))
            continue
        p50, p95 = timed.percentile(0.5), timed.percentile(0.95)
        assert p50 is not None and p95 is not None
        rows.append(
            Row(
                name,
                f"p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms; plan: {timed.plan}",
                target,
                verdict(p95 < TARGET_P95 if messages >= MESSAGES else None),
                round(p95 * 1000, 2),
                "ms",
                {"path": timed.read.path, "p50_ms": round(p50 * 1000, 2), "p95_ms": round(p95 * 1000, 2),
                 "max_ms": round(max(timed.times) * 1000, 2), "views": len(timed.times), "plan": timed.plan},
            )
        )
    return rows


CHANNEL_INDEX = "ix_messages_environment_channel_created"


async def without_channel_index(
    store: Store, client: httpx.AsyncClient, ids: dict[str, str], environment_id: str, warmup: int, requests: int
) -> list[Timed]:
    """The channel read again with migration 0032's index dropped: what the index is worth on this store."""
    import asyncpg

    connection = await asyncpg.connect(store.url)
    try:
        if not await connection.fetchval("SELECT 1 FROM pg_indexes WHERE indexname = $1", CHANNEL_INDEX):
            return []
        await connection.execute(f"DROP INDEX {CHANNEL_INDEX}")
    finally:
        await connection.close()
    timed_reads = []
    for read in reads(ids):
        if read.name == "GET /v1/messages?channel=email":
            read = Read(f"{read.name} (without {CHANNEL_INDEX})", read.auth, read.path)
            say(f"measuring {read.name}")
            timed = await time_read(client, read, warmup, requests)
            timed.plan = await top_node(store, statements_of("GET /v1/messages?channel=email", environment_id, ids))
            say(f"  {timed.status}; p95 {((timed.percentile(0.95) or 0) * 1000):.1f} ms; plan {timed.plan}")
            timed_reads.append(timed)
    return timed_reads


async def measure(
    admin_url: str, *, messages: int = MESSAGES, subscribers: int = SUBSCRIBERS, warmup: int = 5, requests: int = 60,
    notes: list[str] | None = None, keep: bool = False,
) -> list[Row]:
    """Seed a database of its own, serve it, time the reads; the rows of the table (the database is dropped)."""
    notes = notes if notes is not None else []
    folder = harness.make_folder()
    store = await Store.postgres(admin_url)
    environment = Environment(folder, store)
    say(f"database {store.database}, folder {folder}")
    try:
        server = await harness.serve_for_reads(
            environment, "herald-store", viewer=(console.EMAIL, console.PASSWORD), workflows=WORKFLOWS,
        )
        base_url, workflow_ids = server.base_url, server.workflow_ids
        headers = {"Authorization": f"ApiKey {server.api_key}"}
        seconds = await seed(store, environment, workflow_ids, messages, subscribers)
        say(f"seeded in {seconds:.0f} s")
        notes.append(
            f"{messages:,} messages (each with its run and event) over {console.DAYS} days and {subscribers:,} subscribers "
            f"seeded in {seconds:.0f} s (indexes built after); {requests} requests per read after {warmup}, one at a time, "
            "timed over loopback; the plan is the top node of the read's costliest statement"
        )
        ids = {
            "subscriber": f"user-{SUBSCRIBER:06d}",
            "internal_subscriber": "s" + format(SUBSCRIBER, "x").rjust(23, "0"),
            "transaction": f"txn-{messages // 2}",
            "workflow": workflow_ids[0][0],
        }
        import asyncpg

        connection = await asyncpg.connect(store.url)
        try:
            application = await connection.fetchval("SELECT identifier FROM environments WHERE id = $1", environment.environment_id)
        finally:
            await connection.close()
        measured = []
        async with (
            httpx.AsyncClient(base_url=base_url, headers=headers, timeout=120) as api_client,
            httpx.AsyncClient(base_url=base_url, timeout=120) as inbox_client,
            httpx.AsyncClient(base_url=base_url, timeout=120, follow_redirects=False) as console_client,
        ):
            session = await inbox_client.post("/v1/inbox/session", json={"applicationIdentifier": application, "subscriberId": ids["subscriber"]})
            session.raise_for_status()
            inbox_client.headers["Authorization"] = f"Bearer {session.json()['data']['token']}"
            await console.sign_in(console_client)
            clients: dict[str, httpx.AsyncClient] = {"api": api_client, "inbox": inbox_client, "console": console_client}
            for read in reads(ids):
                say(f"measuring {read.name}: {read.path}")
                timed = await time_read(clients[read.auth], read, warmup, requests)
                timed.plan = await top_node(store, statements_of(read.name, environment.environment_id, ids))
                say(f"  {timed.status}; p95 {((timed.percentile(0.95) or 0) * 1000):.1f} ms; plan {timed.plan}")
                measured.append(timed)
            measured.extend(await without_channel_index(store, clients["api"], ids, environment.environment_id, warmup, requests))
        return rows_of(measured, messages)
    finally:
        environment.stop_all()
        if keep:
            say(f"kept database {store.database}")
        else:
            try:
                await store.drop()
            except Exception as exc:
                print(f"could not drop database {store.database}: {exc}", file=sys.stderr)
        harness.remove_folder(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres", help="admin URL of a PostgreSQL server on 127.0.0.1")
    parser.add_argument("--messages", type=int, default=MESSAGES, help=f"messages seeded (default {MESSAGES:,})")
    parser.add_argument("--subscribers", type=int, default=SUBSCRIBERS, help=f"subscribers seeded (default {SUBSCRIBERS:,})")
    parser.add_argument("--requests", type=int, default=60, help="requests of each read measured (default 60)")
    parser.add_argument("--warmup", type=int, default=5, help="requests of each read before measuring (default 5)")
    parser.add_argument("--keep", action="store_true", help="keep the seeded database after the run")
    parser.add_argument("--no-write", action="store_true", help="print the table only; write no result file")
    parser.add_argument("--results", default=str(results.RESULTS), help="folder for the run's JSON file (default bench/results)")
    args = parser.parse_args(argv)
    started = datetime.now(UTC)
    notes: list[str] = []
    rows = asyncio.run(
        measure(args.postgres, messages=args.messages, subscribers=args.subscribers, warmup=args.warmup,
                requests=args.requests, notes=notes, keep=args.keep)
    )
    command = "python -m bench.store " + shlex.join(sys.argv[1:] if argv is None else argv)
    title = f"PostgreSQL · {args.messages:,}-message store · uvicorn, no worker"
    print()
    print(report.section(title, command, notes, rows, started))
    if not args.no_write:
        record = results.record(
            kind="store", store="postgres", server="uvicorn", workers=0, title=title, command=command,
            settings={"requests": args.requests, "warmup": args.warmup, "messages": args.messages, "subscribers": args.subscribers},
            notes=notes, rows=rows, started=started, finished=datetime.now(UTC), source="python -m bench.store",
        )
        print(f"written to {results.write(record, Path(args.results))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
