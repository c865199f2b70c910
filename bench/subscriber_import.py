"""How long the console's CSV import takes for 100,000 subscribers.

    python -m bench.subscriber_import [--rows 100000] [--postgres ADMIN_URL]

Makes a CSV file of ``--rows`` new subscribers (subscriberId, email,
firstName, lastName, phone, locale and two ``data.`` columns, one line in a
thousand refused for a bad email), then imports it into a fresh store
(SQLite, or a fresh PostgreSQL database dropped after) as the Subscribers
page does (herald/subscribers/imports.py): the file checked and stored, then
written by the import's task in batches. Prints the time from the file
received to the last line written (and the CPU time it took, which a loaded machine does not inflate), the lines a second, and the same for the
file imported again (every subscriber updated). The target: 100,000
lines in under 60 s on SQLite.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import uvloop

from bench.harness import Store
from bench.inprocess import prepare_store


def make_file(rows: int) -> bytes:
    lines = ["subscriberId,email,firstName,lastName,phone,locale,data.plan,data.team"]
    for n in range(rows):
        email = "not-an-email" if n % 1000 == 999 else f"person-{n}@example.com"
        lines.append(f"person-{n},{email},First{n},Last{n % 97},+1555{n:07d},en-US,plan-{n % 3},team {n % 50}")
    return ("\n".join(lines) + "\n").encode()


async def run(store: Store, rows: int) -> None:
    from sqlalchemy import select

    from herald.app import create_app
    from herald.config import load_settings
    from herald.kit.auth import Principal
    from herald.models import Environment
    from herald.subscribers import imports

    prepare_store(store.url)
    app = create_app(load_settings(run_worker=False))
    content = make_file(rows)
    async with app.router.lifespan_context(app):
        async with app.state.sessionmaker() as session:
            environment = (await session.execute(select(Environment).where(Environment.name == "Development"))).scalars().first()
        assert environment is not None
        principal = Principal(environment.id, environment.organization_id, api_key_id="")
        runner = imports.runner_of(app.state)
        for turn in ("new subscribers", "imported again"):
            started, cpu = time.perf_counter(), time.process_time()
            async with app.state.sessionmaker() as session:
                row = await imports.start_import(session, principal, filename="bench.csv", content=content, member_email=None)
                await session.commit()
            runner.start(row.id)
            await runner.wait(row.id)
            seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
            async with app.state.sessionmaker() as session:
                done = await imports.get_import(session, principal, row.id)
            print(
                f"{store.label} {turn}: {rows:,} lines ({len(content) / 1e6:.1f} MB) in {seconds:.1f} s"
                f" ({rows / seconds:,.0f} lines/s; {cpu_seconds:.1f} s of CPU) · {done.status}: created {done.created_count:,},"
                f" updated {done.updated_count:,}, refused {done.refused_count:,}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="admin URL of a PostgreSQL server on 127.0.0.1 (default: SQLite)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="herald-import-") as folder:
        store = uvloop.run(Store.postgres(args.postgres)) if args.postgres else Store.sqlite(Path(folder))
        try:
            uvloop.run(run(store, args.rows))
        finally:
            uvloop.run(store.drop())


if __name__ == "__main__":
    main()
