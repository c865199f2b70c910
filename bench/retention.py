"""How fast the workers delete history past its retention.

    python -m bench.retention [--triggers 20000] [--postgres ADMIN_URL]

Fills a fresh store (SQLite, or a fresh PostgreSQL database dropped after) with
``--triggers`` triggers of a one-step in-app workflow, each to its own
subscriber, accepted through the app and delivered by a worker in this
process. Then it runs the workers' purge (``engine/retention.py``) as if the
activity were past its 30 days, and again as if the messages were past their
365, each until nothing is left, and prints the rows deleted a second and how
many purges (one a minute per worker) that took. A store must delete as fast as
it fills: at a million messages a day that is about 700 events a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import uvloop

from bench.harness import Store
from bench.inprocess import WORKFLOW, call, prepare_store


async def fill(app: object, api_key: str, triggers: int) -> None:
    steps = [{"template": {"type": "in_app", "content": "Hi {{payload.n}}"}}]
    status, answer = await call(app, "POST", "/v1/workflows", json.dumps({"name": WORKFLOW, "active": True, "steps": steps}).encode(), api_key)  # type: ignore[arg-type]
    if status != 201:
        raise RuntimeError(f"creating the workflow answered {status}: {answer[:300]!r}")
    numbers = iter(range(triggers))

    async def client() -> None:
        for number in numbers:
            body = json.dumps({"name": WORKFLOW, "to": f"sub-{number}", "payload": {"n": number}}).encode()
            status, answer = await call(app, "POST", "/v1/events/trigger", body, api_key)  # type: ignore[arg-type]
            if status != 201:
                raise RuntimeError(f"a trigger answered {status}: {answer[:300]!r}")

    await asyncio.gather(*(client() for _ in range(32)))


async def run(store: Store, triggers: int) -> None:
    from herald.app import build_worker, create_app
    from herald.config import load_settings
    from herald.engine.retention import Purged, Retention, purge_history
    from herald.kit.time import utcnow

    api_key = prepare_store(store.url)
    settings = load_settings(run_worker=False)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        started = time.perf_counter()
        await fill(app, api_key, triggers)
        worker = build_worker(settings, app.state.sessionmaker)
        delivered = await worker.run_until_idle(max_rounds=1_000_000)
        print(f"{store.label}: {triggers:,} triggers accepted and {delivered:,} jobs run in {time.perf_counter() - started:.1f} s")
        for label, days in (("activity", 31), ("messages", 366)):
            total, purges, started = Purged(), 0, time.perf_counter()
            while True:
                purged = await purge_history(app.state.sessionmaker, Retention(), now=utcnow() + timedelta(days=days))
                if not purged:
                    break
                purges += 1
                for name in ("events", "notifications", "jobs", "execution_details", "messages"):
                    setattr(total, name, getattr(total, name) + getattr(purged, name))
            seconds = time.perf_counter() - started
            rows = total.rows
            print(
                f"{store.label} {label}: {rows:,} rows in {seconds:.1f} s ({rows / seconds:,.0f} rows/s,"
                f" {total.events / seconds:,.0f} events/s) over {purges} purges · {total}"
            )
        if worker.http is not None:
            await worker.http.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triggers", type=int, default=20000)
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="admin URL of a PostgreSQL server on 127.0.0.1 (default: SQLite)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="herald-retention-") as folder:
        store = uvloop.run(Store.postgres(args.postgres)) if args.postgres else Store.sqlite(Path(folder))
        try:
            uvloop.run(run(store, args.triggers))
        finally:
            uvloop.run(store.drop())


if __name__ == "__main__":
    main()
