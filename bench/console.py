"""The console row of ``make bench``: server time of the console's busiest pages on a large PostgreSQL store.

    python -m bench.console --postgres postgresql://postgres@127.0.0.1:5432/postgres [--requests 60] [--no-write]

A database of its own gets 1,000,000 messages (each with its notification and
event) over the last 30 days and 100,000 subscribers, inserted by
``INSERT ... SELECT generate_series`` in a few statements, then ``herald
serve`` (no worker: nothing is delivered) on it. A viewer signs in through
the sign-in page; each page of :data:`PAGES` is asked for once (a page that
answers 404 is not built in this checkout and is reported so), then
``--warmup`` times, then ``--requests`` times one after another, each
answer's time taken from sending the request to its last byte over
loopback (the server's time plus a loopback round trip, under a
millisecond). The Members page comes first as the reference: it reads next
to nothing of the seeded data, so it shows what any page costs on the
machine at that moment (the machine is often shared: each row also says how
many cores other processes used while it was timed). Analytics' first view counts the 30 days from the messages (a
day that ended is counted once and kept, herald/analytics/service.py): it is
reported apart, and the p50/p95 are of the views after it.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from bench import harness, report, results
from bench.harness import Environment, Store
from bench.report import Row, verdict

TARGET_P95 = 0.150
MESSAGES = 1_000_000
SUBSCRIBERS = 100_000
WORKFLOWS = 20
DAYS = 30
EMAIL = "bench-viewer@example.com"
PASSWORD = "bench console password"
# The seeded subscribers' ids are user-000000 ... user-099999: this prefix finds 100 of them.
SEARCH_PREFIX = "user-0012"
# Table-driven: (row name, path). {notification_id} is a seeded run's id.
PAGES = (
    # The reference: a page that reads next to nothing of the seeded data (the console's own cost per view).
    ("Members (reference)", "/console/members"),
    ("Activity", "/console/activity"),
    ("A run's page", "/console/activity/{notification_id}"),
    ("Subscribers search", f"/console/subscribers?search={SEARCH_PREFIX}"),
    ("Analytics, 30 days", "/console/analytics?days=30"),
)
_FORM_TOKEN = re.compile(r'name="csrf_token" value="([^"]*)"')

# Ids are 24 characters, as Herald's (herald.kit.ids); a letter per table keeps them apart.
_SEED = (
    """INSERT INTO subscribers (id, environment_id, organization_id, subscriber_id, first_name, last_name, email, phone,
        channels, deleted, version, created_at, updated_at)
    SELECT 's' || lpad(to_hex(g), 23, '0'), :env, :org, 'user-' || lpad(g::text, 6, '0'), 'First' || g, 'Last' || g,
        'user' || g || '@example.com', '+1555' || lpad(g::text, 7, '0'), '[]'::jsonb, false, 0,
        now() - interval '60 days', now() - interval '60 days'
    FROM generate_series(0, :subscribers - 1) AS g""",
    # Event, notification and message of run g: created (g / count) of the way back over the days,
    # one channel of four in turn, every 50th failed.
    """INSERT INTO events (id, environment_id, organization_id, transaction_id, workflow_id, trigger_identifier, kind,
        steps, recipients, payload, overrides, rejected_recipients, status, created_at)
    SELECT 'e' || lpad(to_hex(g), 23, '0'), :env, :org, 'txn-' || g, w.id, w.trigger_identifier, 'trigger',
        '[]'::jsonb, jsonb_build_array('user-' || lpad((g % :subscribers)::text, 6, '0')),
        jsonb_build_object('order', g), '{}'::jsonb, '[]'::jsonb, 'processed',
        now() - (g::float / :messages) * (:days * interval '1 day')
    FROM generate_series(0, :messages - 1) AS g
    JOIN bench_workflows AS w ON w.position = g % :workflows""",
    """INSERT INTO notifications (id, environment_id, organization_id, event_id, workflow_id, subscriber_id,
        transaction_id, channels, "to", payload, created_at)
    SELECT 'n' || substr(e.id, 2), e.environment_id, e.organization_id, e.id, e.workflow_id,
        's' || lpad(to_hex(substr(e.transaction_id, 5)::bigint % :subscribers), 23, '0'), e.transaction_id,
        '[]'::jsonb, '{}'::jsonb, e.payload, e.created_at
    FROM events AS e WHERE e.environment_id = :env""",
    """INSERT INTO messages (id, environment_id, organization_id, notification_id, subscriber_id, workflow_id,
        delivery_key, transaction_id, channel, subject, content, cta, payload, overrides, provider_id, status,
        error_text, delivered_at, context_keys, created_at, updated_at)
    SELECT 'm' || substr(n.id, 2), n.environment_id, n.organization_id, n.id, n.subscriber_id, n.workflow_id,
        '', n.transaction_id, c.channel, 'Your order', '"Hello"'::jsonb, '{}'::jsonb, n.payload, '{}'::jsonb,
        c.provider, CASE WHEN substr(n.transaction_id, 5)::bigint % 50 = 0 THEN 'error' ELSE 'sent' END,
        CASE WHEN substr(n.transaction_id, 5)::bigint % 50 = 0 THEN 'provider refused' END,
        '[]'::jsonb, '[]'::jsonb, n.created_at, n.created_at
    FROM notifications AS n
    JOIN (VALUES (0, 'email', 'sendgrid'), (1, 'sms', 'twilio'), (2, 'in_app', NULL), (3, 'push', 'fcm'))
        AS c(position, channel, provider) ON c.position = substr(n.transaction_id, 5)::bigint % 4
    WHERE n.environment_id = :env""",
)


@dataclass
class PageTime:
    name: str
    path: str
    status: str  # "measured", "not built", or what went wrong
    times: list[float]
    first: float | None = None
    # Cores other processes than Herald's, its database's and this one's used while the views were timed.
    others: float | None = None

    def percentile(self, share: float) -> float | None:
        if not self.times:
            return None
        ordered = sorted(self.times)
        return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def say(text: str) -> None:
    print(f"[bench.console {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


async def seed(store: Store, environment: Environment, workflow_ids: list[tuple[str, str]]) -> float:
    """The messages, runs and subscribers, straight into the store; returns the seconds it took."""
    import asyncpg

    started = time.monotonic()
    connection = await asyncpg.connect(store.url)
    try:
        await seed_with(connection, environment, workflow_ids, messages=MESSAGES, subscribers=SUBSCRIBERS, log=say)
        await connection.execute("ANALYZE")
    finally:
        await connection.close()
    return time.monotonic() - started


async def seed_with(
    connection: Any, environment: Environment, workflow_ids: list[tuple[str, str]], *, messages: int, subscribers: int,
    log: Any = say,
) -> None:
    """The seed statements at these sizes on an open asyncpg connection (bench/store.py seeds ten times more)."""
    await connection.execute("CREATE TEMPORARY TABLE bench_workflows (position int, id text, trigger_identifier text)")
    await connection.executemany(
        "INSERT INTO bench_workflows VALUES ($1, $2, $3)",
        [(position, workflow_id, identifier) for position, (workflow_id, identifier) in enumerate(workflow_ids)],
    )
    # The sizes are written into the statements; the ids are parameters.
    sizes = {":subscribers": subscribers, ":messages": messages, ":workflows": len(workflow_ids), ":days": DAYS}
    for statement in _SEED:
        text = statement.replace(":env", "$1").replace(":org", "$2")
        for name, size in sizes.items():
            text = text.replace(name, str(size))
        log(f"seeding: {statement.split('(')[0].strip()}")
        ids = [environment.environment_id, environment.organization_id][: 2 if "$2" in text else 1]
        await connection.execute(text, *ids)


async def sign_in(client: httpx.AsyncClient) -> None:
    page = await client.get("/console/sign-in")
    token = _FORM_TOKEN.search(page.text)
    assert token, "no CSRF token on the sign-in page"
    answer = await client.post("/console/sign-in", data={"email": EMAIL, "password": PASSWORD, "csrf_token": token.group(1)})
    if answer.status_code != 303:
        raise RuntimeError(f"sign-in answered {answer.status_code}")


async def measure_page(client: httpx.AsyncClient, name: str, path: str, warmup: int, requests: int, meter: Any) -> PageTime:
    started = time.perf_counter()
    first = await client.get(path)
    first_time = time.perf_counter() - started
    if first.status_code == 404:
        return PageTime(name, path, "not built", [])
    if first.status_code != 200:
        return PageTime(name, path, f"answered {first.status_code}", [])
    for _ in range(warmup):
        await client.get(path)
    times = []
    meter.start()
    for _ in range(requests):
        started = time.perf_counter()
        answer = await client.get(path)
        times.append(time.perf_counter() - started)
        if answer.status_code != 200:
            return PageTime(name, path, f"answered {answer.status_code}", times, first_time)
    return PageTime(name, path, "measured", times, first_time, meter.stop()["other"])


def rows_of(measured: list[PageTime]) -> list[Row]:
    rows = []
    for page in measured:
        name = f"Console: {page.name}"
        reference = "(reference)" in page.name
        target = "" if reference else f"p95 < {TARGET_P95 * 1000:.0f} ms"
        if page.status != "measured":
            rows.append(Row(name, page.status, target, "", None, None, {"path": page.path}))
            continue
        p50, p95 = page.percentile(0.5), page.percentile(0.95)
        assert p50 is not None and p95 is not None
        first = f"; first view {page.first * 1000:,.0f} ms" if page.first is not None and not reference else ""
        busy = f"; other processes {page.others:.2f} cores" if page.others is not None else ""
        rows.append(
            Row(
                name,
                f"p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms ({len(page.times)} views{first}{busy})",
                target,
                "" if reference else verdict(p95 < TARGET_P95),
                round(p95 * 1000, 2),
                "ms",
                {
                    "path": page.path,
                    "p50_ms": round(p50 * 1000, 2),
                    "p95_ms": round(p95 * 1000, 2),
                    "max_ms": round(max(page.times) * 1000, 2),
                    "mean_ms": round(statistics.fmean(page.times) * 1000, 2),
                    "first_view_ms": round((page.first or 0) * 1000, 2),
                    "views": len(page.times),
                    "other_processes_cores": None if page.others is None else round(page.others, 2),
                },
            )
        )
    return rows


async def measure(admin_url: str, *, warmup: int = 5, requests: int = 60, notes: list[str] | None = None) -> list[Row]:
    """Seed a database of its own, serve it, time the pages; the rows of the table (the database is dropped)."""
    notes = notes if notes is not None else []
    folder = harness.make_folder()
    store = await Store.postgres(admin_url)
    environment = Environment(folder, store)
    say(f"database {store.database}, folder {folder}")
    try:
        server = await harness.serve_for_reads(environment, "herald-console", viewer=(EMAIL, PASSWORD), workflows=WORKFLOWS)
        base_url, workflow_ids = server.base_url, server.workflow_ids
        seconds = await seed(store, environment, workflow_ids)
        notes.append(
            f"Console: {MESSAGES:,} messages (with their runs) over {DAYS} days and {SUBSCRIBERS:,} subscribers seeded in "
            f"{seconds:.0f} s; {requests} views per page after {warmup}, one at a time, timed over loopback"
        )
        notification_id = "n" + format(MESSAGES // 2, "x").rjust(23, "0")
        from bench.run import CpuMeter  # bench.run imports this module

        meter = CpuMeter(environment)
        measured = []
        async with httpx.AsyncClient(base_url=base_url, timeout=120, follow_redirects=False) as client:
            await sign_in(client)
            for name, template in PAGES:
                path = template.format(notification_id=notification_id)
                say(f"measuring {name}: {path}")
                measured.append(await measure_page(client, name, path, warmup, requests, meter))
        return rows_of(measured)
    finally:
        environment.stop_all()
        try:
            await store.drop()
        except Exception as exc:
            print(f"could not drop database {store.database}: {exc}", file=sys.stderr)
        harness.remove_folder(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.console", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres", help="admin URL of a PostgreSQL server on 127.0.0.1")
    parser.add_argument("--requests", type=int, default=60, help="views of each page measured (default 60)")
    parser.add_argument("--warmup", type=int, default=5, help="views of each page before measuring (default 5)")
    parser.add_argument("--no-write", action="store_true", help="print the table only; write no result file")
    parser.add_argument("--results", default=str(results.RESULTS), help="folder for the run's JSON file (default bench/results)")
    args = parser.parse_args(argv)
    started = datetime.now(UTC)
    notes: list[str] = []
    rows = asyncio.run(measure(args.postgres, warmup=args.warmup, requests=args.requests, notes=notes))
    command = "python -m bench.console " + shlex.join(sys.argv[1:] if argv is None else argv)
    title = "PostgreSQL · console pages · uvicorn, no worker"
    print()
    print(report.section(title, command, notes, rows, started))
    if not args.no_write:
        from pathlib import Path

        record = results.record(
            kind="console", store="postgres", server="uvicorn", workers=0, title=title, command=command,
            settings={"requests": args.requests, "warmup": args.warmup, "postgres": _without_password(args.postgres),
                      "messages": MESSAGES, "subscribers": SUBSCRIBERS, "days": DAYS},
            notes=notes, rows=rows, started=started, finished=datetime.now(UTC), source="python -m bench.console",
        )
        print(f"written to {results.write(record, Path(args.results))}", file=sys.stderr)
    return 0


def _without_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


if __name__ == "__main__":
    sys.exit(main())
