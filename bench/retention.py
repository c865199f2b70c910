"""How fast the workers delete history past its retention.

    python -m bench.retention [--triggers 20000] [--fan-out N] [--postgres ADMIN_URL]

Fills a fresh store (SQLite, or a fresh PostgreSQL database dropped after) with
``--triggers`` triggers of a one-step in-app workflow, each to its own
subscriber, accepted through the app and delivered by a worker in this
process. Then it runs the workers' purge (``engine/retention.py``) as if the
activity were past its 30 days, and again as if the messages were past their
365, each until nothing is left, and prints the rows deleted a second and how
many purges (one a minute per worker) that took. A store must delete as fast as
it fills: at a million messages a day that is about 700 events a minute.
``--fan-out N`` fills it instead with one trigger to a topic of N subscribers:
one event whose history is deleted over several transactions and purges.
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


async def fill_fan_out(app: object, api_key: str, subscribers: int) -> None:
    """One trigger to a topic of ``subscribers``: one event with that many notifications and jobs."""

    async def post(path: str, body: object) -> None:
        status, answer = await call(app, "POST", path, json.dumps(body).encode(), api_key)  # type: ignore[arg-type]
        if status not in (200, 201):
            raise RuntimeError(f"POST {path} answered {status}: {answer[:300]!r}")

    steps = [{"template": {"type": "in_app", "content": "Hi {{payload.n}}"}}]
    await post("/v1/workflows", {"name": WORKFLOW, "active": True, "steps": steps})
    ids = [f"fan-{number}" for number in range(subscribers)]
    for start in range(0, subscribers, 500):
        await post("/v1/subscribers/bulk", {"subscribers": [{"subscriberId": id_} for id_ in ids[start : start + 500]]})
    await post("/v1/topics", {"key": "everyone", "name": "Everyone"})
    for start in range(0, subscribers, 2000):
        await post("/v1/topics/everyone/subscribers", {"subscribers": ids[start : start + 2000]})
    await post("/v1/events/trigger", {"name": WORKFLOW, "to": [{"type": "Topic", "topicKey": "everyone"}], "payload": {"n": 0}})


async def run(store: Store, triggers: int, fan_out: int) -> None:
    from herald.app import build_worker, create_app
    from herald.config import load_settings
    from herald.engine.retention import Purged, Retention, purge_history
    from herald.kit.time import utcnow

    api_key = prepare_store(store.url)
    settings = load_settings(run_worker=False)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        started = time.perf_counter()
        if fan_out:
            await fill_fan_out(app, api_key, fan_out)
            filled = f"one trigger to {fan_out:,} subscribers accepted"
        else:
            await fill(app, api_key, triggers)
            filled = f"{triggers:,} triggers accepted"
        worker = build_worker(settings, app.state.sessionmaker)
        delivered = await worker.run_until_idle(max_rounds=1_000_000)
        print(f"{store.label}: {filled} and {delivered:,} jobs run in {time.perf_counter() - started:.1f} s")
        for label, days in (("activity", 31), ("messages", 366)):
            total, purges, started, each = Purged(), 0, time.perf_counter(), []
            while True:
                began = time.perf_counter()
                purged = await purge_history(app.state.sessionmaker, Retention(), now=utcnow() + timedelta(days=days))
                if not purged:
                    break
                purges += 1
                each.append(time.perf_counter() - began)
                for name in ("events", "notifications", "jobs", "execution_details", "messages"):
                    setattr(total, name, getattr(total, name) + getattr(purged, name))
            seconds = time.perf_counter() - started
            rows = total.rows
            print(
                f"{store.label} {label}: {rows:,} rows in {seconds:.1f} s ({rows / seconds:,.0f} rows/s,"
                f" {total.events / seconds:,.0f} events/s) over {purges} purges"
                f" ({', '.join(f'{purge:.1f}' for purge in each)} s) · {total}"
            )
        if worker.http is not None:
            await worker.http.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triggers", type=int, default=20000)
    parser.add_argument("--fan-out", type=int, default=0, metavar="N", help="instead, one trigger to a topic of N subscribers")
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="admin URL of a PostgreSQL server on 127.0.0.1 (default: SQLite)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="herald-retention-") as folder:
        store = uvloop.run(Store.postgres(args.postgres)) if args.postgres else Store.sqlite(Path(folder))
        try:
            uvloop.run(run(store, args.triggers, args.fan_out))
        finally:
            uvloop.run(store.drop())


if __name__ == "__main__":
    main()
