"""Email delivery under faults: workers killed with SIGKILL and PostgreSQL crashed, then what arrived, counted.

    python -m bench.faults [--triggers 4000] [--rate 200] [--kill-every 3] [--lease 5] [--provider smtp|resend] [--tree CHECKOUT]

Runs Herald as a deployment does, on a PostgreSQL server of its own (a
cluster made with ``initdb`` in a temporary folder and started with
``pg_ctl``, tests/fixtures/private_postgres.py, so it may be crashed without
touching anyone else's): ``herald serve --no-worker`` and two ``herald
worker`` processes (bench/harness.py), and an SMTP sink (aiosmtpd, in a
process of its own) that writes down every message it accepts. With
``--provider resend`` the sink is Resend's API instead, keeping its
idempotency keys as Resend does (a repeated key is answered as the first time,
and nothing is sent).

``--triggers`` triggers of a one-step email workflow go out in bulk at
``--rate`` a second, each with its own transactionId (``fault-<n>``; a bulk
request whose answer was lost is sent again, and what it had recorded is
refused as a duplicate, not run twice) and ``n`` in the subject. Meanwhile a
worker is killed with SIGKILL every ``--kill-every`` seconds, the two in turn,
and started again at once; halfway through, PostgreSQL is crashed (``pg_ctl
stop -m immediate``) and started again ``--outage`` seconds later. Kills go
on for ``--kill-after`` seconds after the last trigger, then the run waits
until every recorded trigger's email has arrived (or ``--settle`` seconds).

It prints, from the store and the sink:

- **sent**: the triggers the store recorded (each must become one email);
- **lost**: recorded triggers whose email never reached the sink;
- **duplicates**: copies beyond the first, and over how many triggers; and of
  those triggers, how many came each time under one Message-ID (which mail
  stores and clients can fold into one; with ``--provider resend``, one
  idempotency key) and how many did not.

It asserts nothing and times nothing: the figures are what they are, for the
delivery guarantee docs/delivery.md states. ``--tree`` runs another checkout
of Herald (the run before a change) with this bench.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import signal
import socket
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import harness
from bench.harness import Environment, Service, Store
from tests.fixtures.private_postgres import PrivatePostgres, server_programs_available

WORKFLOW = "fault email"
SUBSCRIBERS = 500
EVENTS_PER_REQUEST = 50
WORKERS = 2


def _smtp_sink(port: int, record: str) -> None:
    """An SMTP server that accepts every message and appends ``<n>\\t<Message-ID>`` for each to ``record``."""
    import logging
    import re
    from email.parser import BytesParser

    from aiosmtpd.smtp import SMTP

    logging.getLogger("mail.log").setLevel(logging.ERROR)
    parser = BytesParser()
    number = re.compile(r"Fault (\d+)")
    out = open(record, "a", buffering=1)  # noqa: SIM115 - the process's lifetime

    class Sink:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
            headers = parser.parsebytes(envelope.content, headersonly=True)
            found = number.search(str(headers.get("Subject", "")))
            out.write(f"{found.group(1) if found else '?'}\t{headers.get('Message-ID', '')}\n")
            return "250 2.0.0 OK"

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: SMTP(Sink(), hostname="fault-sink"), harness.HOST, port, backlog=512)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def _resend_peer(port: int, record: str) -> None:
    """Resend's ``POST /emails`` as its idempotency keys make it: a repeated key gets the first answer and sends nothing.

    Each message it does send is appended as ``<n>\t<Idempotency-Key>`` to ``record`` (its own process).
    """
    import json
    import re
    import uuid

    import uvicorn

    number = re.compile(r"Fault (\d+)")
    out = open(record, "a", buffering=1)  # noqa: SIM115 - the process's lifetime
    answers: dict[str, bytes] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        key = dict(scope["headers"]).get(b"idempotency-key", b"").decode()
        answer = answers.get(key) if key else None
        if answer is None:
            found = number.search(str(json.loads(body).get("subject", "")))
            out.write(f"{found.group(1) if found else '?'}\t{key}\n")
            answer = json.dumps({"id": str(uuid.uuid4())}).encode()
            if key:
                answers[key] = answer
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})

    uvicorn.Server(
        uvicorn.Config(app, host=harness.HOST, port=port, log_level="warning", access_log=False, lifespan="off", backlog=512)
    ).run()


@dataclass
class Chaos:
    """What was done to the deployment."""

    kills: int = 0
    restarts: int = 0
    log: list[str] = field(default_factory=list)


def sink_lines(record: Path) -> list[tuple[str, str]]:
    try:
        text = record.read_text()
    except FileNotFoundError:
        return []
    return [tuple(line.split("\t", 1)) for line in text.splitlines() if "\t" in line]  # type: ignore[misc]


async def recorded_triggers(url: str) -> set[str]:
    """The transaction ids of this run's events in the store."""
    import asyncpg

    connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        rows = await connection.fetch("SELECT transaction_id FROM events WHERE transaction_id LIKE 'fault-%'")
    finally:
        await connection.close()
    return {row["transaction_id"].removeprefix("fault-") for row in rows}


async def store_summary(url: str) -> dict[str, Any]:
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        messages = dict(await connection.fetch("SELECT status, count(*) FROM messages WHERE channel = 'email' GROUP BY status"))
        jobs = dict(await connection.fetch("SELECT status, count(*) FROM jobs WHERE kind = 'step' GROUP BY status"))
        in_doubt = await connection.fetchval(
            "SELECT count(*) FROM execution_details WHERE detail LIKE '%may arrive twice%'"
        )
    finally:
        await connection.close()
    return {"messages": messages, "jobs": jobs, "in_doubt_details": in_doubt}


async def run(options: argparse.Namespace) -> None:
    if not server_programs_available():
        raise SystemExit("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
    tree = Path(options.tree).resolve() if options.tree else harness.REPO
    folder = harness.make_folder()
    postgres = PrivatePostgres.create()
    postgres.start()
    sink: Any = None
    environment: Environment | None = None
    try:
        url = postgres.create_database("herald_faults")
        environment = Environment(
            folder,
            Store("postgres", url),
            extra_env={
                "HERALD_OUTBOUND_ALLOW": harness.HOST,
                "HERALD_JOB_LEASE_SECONDS": str(options.lease),
                "HERALD_RETRY_BASE_SECONDS": "0.2",
            },
            tree=tree,
        )
        api_key = environment.prepare()
        deployment = await environment.start_herald("uvicorn", api_key, WORKERS)
        record = folder / "sink.tsv"
        port = harness.free_port()
        target = _smtp_sink if options.provider == "smtp" else _resend_peer
        sink = multiprocessing.get_context("spawn").Process(target=target, args=(port, str(record)), daemon=True)
        sink.start()
        for _ in range(300):
            try:
                with socket.create_connection((harness.HOST, port), timeout=1):
                    break
            except OSError:
                await asyncio.sleep(0.1)
        print(f"Herald from {tree}; PostgreSQL of its own on port {postgres.port}; logs in {folder}")
        async with httpx.AsyncClient(
            base_url=deployment.base_url, headers={"Authorization": f"ApiKey {api_key}"}, timeout=30
        ) as api:
            if options.provider == "smtp":
                provider, credentials = "nodemailer", {"host": harness.HOST, "port": str(port), "ignoreTls": True}
            else:
                provider, credentials = "resend", {"apiKey": "re_faults", "baseUrl": f"http://{harness.HOST}:{port}"}
            integration = await api.post(
                "/v1/integrations",
                json={
                    "providerId": provider,
                    "channel": "email",
                    "active": True,
                    "credentials": {**credentials, "from": "faults@example.com"},
                },
            )
            integration.raise_for_status()
            await api.post(f"/v1/integrations/{integration.json()['data']['_id']}/set-primary")
            workflow = await api.post(
                "/v1/workflows",
                json={
                    "name": WORKFLOW,
                    "active": True,
                    "steps": [{"template": {"type": "email", "subject": "Fault {{payload.n}}", "content": "<p>{{payload.n}}</p>"}}],
                },
            )
            workflow.raise_for_status()
            name = workflow.json()["data"]["triggers"][0]["identifier"]

            chaos = Chaos()
            fed = asyncio.Event()
            started = time.monotonic()
            feeding = asyncio.create_task(feed(api, name, options, fed))
            breaking = asyncio.create_task(break_things(environment, deployment, postgres, options, fed, chaos, started))
            await feeding
            await breaking
            print(f"fed {options.triggers} triggers in {time.monotonic() - started:.0f} s; "
                  f"{chaos.kills} workers killed, PostgreSQL crashed {chaos.restarts} time(s)")
            for line in chaos.log:
                print(f"  {line}")

            deadline = time.monotonic() + options.settle
            while True:
                try:
                    recorded = await recorded_triggers(url)
                except (OSError, Exception):  # noqa: BLE001 - the store may still be coming back
                    recorded = set()
                arrived = {n for n, _ in sink_lines(record)}
                if recorded and recorded <= arrived:
                    break
                if time.monotonic() > deadline:
                    print(f"gave up waiting after {options.settle:g} s")
                    break
                await asyncio.sleep(1.0)
            # Retries in flight may still bring copies: a few seconds more.
            await asyncio.sleep(options.lease + 2)

        lines = sink_lines(record)
        copies = Counter(n for n, _ in lines)
        ids: dict[str, set[str]] = defaultdict(set)
        for n, message_id in lines:
            ids[n].add(message_id)
        recorded = await recorded_triggers(url)
        lost = sorted(recorded - set(copies), key=int)
        twice = {n: count for n, count in copies.items() if count > 1}
        # Copies that all carried one identity (an empty one is none: no key was sent).
        one_id = sum(1 for n in twice if len(ids[n]) == 1 and "" not in ids[n])
        summary = await store_summary(url)
        print()
        print(f"sent        {len(recorded)} (triggers recorded; {len(lines)} emails received)")
        print(f"lost        {len(lost)}" + (f" (n = {', '.join(lost[:20])}{' ...' if len(lost) > 20 else ''})" if lost else ""))
        label = "Message-ID" if options.provider == "smtp" else "idempotency key"
        print(
            f"duplicates  {sum(twice.values()) - len(twice)} copies over {len(twice)} triggers; "
            f"{one_id} of them under one {label} each, {len(twice) - one_id} not"
        )
        print(f"store       email messages {summary['messages']}; step jobs {summary['jobs']}; "
              f"details of a resend in doubt: {summary['in_doubt_details']}")
    finally:
        if environment is not None:
            environment.stop_all()
        if sink is not None:
            sink.terminate()
            sink.join(5)
        postgres.destroy()
        if options.keep:
            print(f"kept {folder}")
        else:
            harness.remove_folder(folder)


async def feed(api: httpx.AsyncClient, name: str, options: argparse.Namespace, fed: asyncio.Event) -> None:
    """The triggers in bulk at the rate asked; a request that fails is sent again as it was."""
    try:
        start = time.monotonic()
        for first in range(0, options.triggers, EVENTS_PER_REQUEST):
            numbers = range(first, min(first + EVENTS_PER_REQUEST, options.triggers))
            events = [
                {
                    "name": name,
                    "to": {"subscriberId": f"fault-{n % SUBSCRIBERS}", "email": f"reader{n % SUBSCRIBERS}@example.com"},
                    "payload": {"n": n},
                    "transactionId": f"fault-{n}",
                }
                for n in numbers
            ]
            await asyncio.sleep(max(0.0, start + first / options.rate - time.monotonic()))
            while True:
                try:
                    answer = await api.post("/v1/events/trigger/bulk", json={"events": events})
                    if answer.status_code < 300:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.5)  # the store is down, or the answer was lost: the same events again
    finally:
        fed.set()


async def break_things(
    environment: Environment,
    deployment: harness.Deployment,
    postgres: PrivatePostgres,
    options: argparse.Namespace,
    fed: asyncio.Event,
    chaos: Chaos,
    started: float,
) -> None:
    """Kill a worker every --kill-every seconds (started again at once), crash PostgreSQL once halfway through."""
    crash_at = started + options.triggers / options.rate / 2
    stop_at: float | None = None
    turn = 0
    while stop_at is None or time.monotonic() < stop_at:
        await asyncio.sleep(options.kill_every)
        if fed.is_set() and stop_at is None:
            stop_at = time.monotonic() + options.kill_after
        index = turn % WORKERS
        turn += 1
        victim = deployment.workers[index]
        if victim.alive():
            os.kill(victim.pid, signal.SIGKILL)
            victim.process.wait()
            chaos.kills += 1
        deployment.workers[index] = restart_worker(environment, index, turn)
        if not chaos.restarts and time.monotonic() >= crash_at:
            await asyncio.to_thread(postgres.stop, "immediate")
            chaos.log.append(f"PostgreSQL crashed at {time.monotonic() - started:.1f} s")
            await asyncio.sleep(options.outage)
            await asyncio.to_thread(postgres.start)
            chaos.restarts += 1
            chaos.log.append(f"PostgreSQL back at {time.monotonic() - started:.1f} s")


def restart_worker(environment: Environment, index: int, turn: int) -> Service:
    return environment._start(f"herald-worker-{index + 1}-{turn}", [*harness.herald_command(environment.tree), "worker"], environment.env())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triggers", type=int, default=4000)
    parser.add_argument("--rate", type=float, default=200.0, help="triggers a second")
    parser.add_argument("--kill-every", type=float, default=3.0, help="seconds between two SIGKILLs")
    parser.add_argument("--kill-after", type=float, default=10.0, help="seconds of kills after the last trigger")
    parser.add_argument("--lease", type=float, default=5.0, help="HERALD_JOB_LEASE_SECONDS")
    parser.add_argument("--outage", type=float, default=3.0, help="seconds PostgreSQL stays down")
    parser.add_argument("--settle", type=float, default=300.0, help="seconds to wait for the last emails")
    parser.add_argument(
        "--provider", choices=("smtp", "resend"), default="smtp", help="the sink: an SMTP server, or Resend's API with its idempotency keys"
    )
    parser.add_argument("--tree", help="another checkout of Herald to run (the run before a change)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (the processes' logs)")
    options = parser.parse_args(argv)
    asyncio.run(run(options))


if __name__ == "__main__":
    sys.exit(main())
