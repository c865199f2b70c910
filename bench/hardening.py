"""The health check while Herald is attacked: one load case at a time, each on a Herald of its own.

    python -m bench.hardening [--store sqlite|postgres] [--postgres ADMIN_URL] [--workers N]
                              [--duration 10] [--cases baseline,translations,...] [--smoke]
                              [--no-write] [--results DIR]

Each case starts Herald as ``make bench`` does (a fresh store, ``herald migrate``,
``herald bootstrap``, ``herald serve`` with its worker inside, or ``--workers``
worker processes) with the settings a deployment gets by default: the rate
limits are on here, since some of the defences are limits. After the case's
set-up (not measured), a client in a process of its own asks
``GET /v1/health-check`` every 50 ms (open loop: on schedule, answered or
not, each poll timed from when it was due) while the attack runs for about
``--duration`` seconds; the case then says what the attack met: refused
(4xx), bounded (the limit held), or served in full. The figure of each case is
the health check's median; the target is under 100 ms.

The cases (``CASES``), each one a finding of a security probe:

- ``baseline``: no attack;
- ``translations`` (item 2): a step whose template holds 2,002 ``{{t.big}}``
  with ``big`` a 45,000-character translation, triggered;
- ``big-heads`` (item 3): eight connections without a key, each sending a
  100 MB header;
- ``inbox-filters`` (item 6): 3 inbox clients counting 20 ``data`` filters
  each over a subscriber with 10,000 notifications;
- ``previews`` (item 7): 3 clients previewing a step whose template loops
  10,000 times through string filters;
- ``large-bodies`` (item 15): five 19 MB triggers at once, again while the
  duration lasts;
- ``sessions`` (item 13): 2,000 inbox sessions, each for a new subscriber;
- ``webhook-backlog`` (item 10): 18,000 webhook deliveries queued for an
  endpoint that holds each request 0.5 s, then one trigger (the time until
  its message is stored).

``--smoke`` runs every case at a tiny size for a second: it checks that the
cases run, and measures nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shlex
import statistics
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench import harness, results
from bench.harness import Deployment, Environment, Store
from bench.report import Row, table, verdict

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
HEALTH_PATH = "/v1/health-check"
HEALTH_INTERVAL = 0.05
HEALTH_TARGET_MS = 100.0
# What the render limits allow a message to hold (docs/templates.md: output of one render).
RENDER_OUTPUT_LIMIT = 1_000_000
# Set-up waits (messages delivered, jobs settled): how long before the case gives up and says so.
SETTLE_SECONDS = 120.0
# Jobs in these states have not run yet.
PENDING_JOBS = ("queued", "running", "pending", "delayed")


@dataclass(frozen=True)
class Scale:
    """The size of every case: the probe's figures, or a tiny one (``--smoke``)."""

    duration: float = 10.0
    translation_refs: int = 2002
    translation_chars: int = 45_000
    translation_triggers: int = 2
    head_clients: int = 8
    head_bytes: int = 100 * 2**20
    inbox_messages: int = 10_000
    inbox_clients: int = 3
    inbox_filters: int = 20
    preview_clients: int = 3
    preview_loops: int = 100  # two loops nested: this many squared iterations
    body_clients: int = 5
    body_bytes: int = 19 * 2**20
    body_rounds: int = 3
    sessions: int = 2000
    session_concurrency: int = 20
    backlog: int = 18_000
    backlog_hold: float = 0.5
    backlog_wait: float = 60.0


SMOKE = Scale(
    duration=1.0,
    translation_refs=20,
    translation_chars=100,
    translation_triggers=1,
    head_clients=2,
    head_bytes=256 * 1024,
    inbox_messages=40,
    inbox_clients=1,
    inbox_filters=3,
    preview_clients=1,
    preview_loops=5,
    body_clients=2,
    body_bytes=200_000,
    body_rounds=1,
    sessions=20,
    session_concurrency=5,
    backlog=40,
    backlog_hold=0.05,
    backlog_wait=30.0,
)


@dataclass
class Outcome:
    """What a case's attack met: ``attack`` and ``defence`` as printed, ``bounded`` when the case can tell."""

    attack: str
    defence: str
    bounded: bool | None = None
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass
class Health:
    """The health check's answers during the attack (seconds each, and the status; 0: no answer)."""

    samples: list[tuple[float, int]]

    @property
    def asked(self) -> list[float]:
        """The seconds of every poll sent (a missed one was not)."""
        return [took for took, status in self.samples if status != -1]

    def quantile(self, q: float) -> float | None:
        ordered = sorted(self.asked)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.asked) if self.asked else None

    @property
    def failures(self) -> int:
        """Polls answered with anything but 200, or not answered at all."""
        return sum(1 for _, status in self.samples if status not in (200, -1))

    @property
    def missed(self) -> int:
        return sum(1 for _, status in self.samples if status == -1)


# Polls waiting for an answer at once, at most: 15 s of polls. A poll due beyond them is counted as missed.
HEALTH_IN_FLIGHT = 300
HEALTH_TIMEOUT = 30.0


def _poll_health(url: str, interval: float, stop: Any, sink: Any) -> None:
    """The health client, in a process of its own: GET ``url`` every ``interval`` s until ``stop`` is set.

    Open loop: a poll goes out on its schedule whether or not the ones before have been answered (each
    on a connection of its own when they have not), so a stall of ten seconds shows as the two hundred
    polls that waited in it, not as one slow poll (coordinated omission). The samples are
    ``(seconds, status)``, status 0 for no answer within HEALTH_TIMEOUT, and -1 for a poll missed
    because HEALTH_IN_FLIGHT were waiting already.
    """
    asyncio.run(_poll_health_loop(url, interval, stop, sink))


async def _poll_health_loop(url: str, interval: float, stop: Any, sink: Any) -> None:
    samples: list[tuple[float, int]] = []
    limits = httpx.Limits(max_connections=HEALTH_IN_FLIGHT, max_keepalive_connections=HEALTH_IN_FLIGHT)
    async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT, limits=limits) as client:
        waiting: set[asyncio.Task[None]] = set()

        async def poll(due: float) -> None:
            try:
                status = (await client.get(url)).status_code
            except httpx.HTTPError:
                status = 0
            samples.append((time.monotonic() - due, status))

        sink.send("ready")
        due = time.monotonic()
        while not stop.is_set():
            if len(waiting) < HEALTH_IN_FLIGHT:
                task = asyncio.create_task(poll(due))
                waiting.add(task)
                task.add_done_callback(waiting.discard)
            else:
                samples.append((0.0, -1))
            due += interval
            await asyncio.sleep(max(0.0, due - time.monotonic()))
        if waiting:
            await asyncio.wait(waiting, timeout=HEALTH_TIMEOUT + 5)
    sink.send(samples)
    sink.close()


@dataclass
class Window:
    """What was seen while an attack ran: the health check, the API's memory, and where the CPU went."""

    health: Health
    seconds: float
    rss_start_mb: float | None
    rss_peak_mb: float | None
    # Cores busy on average over the window: the whole machine, and Herald's processes (and their
    # PostgreSQL backends). The machine is shared: what the rest took is the difference.
    machine_cores: float
    herald_cores: float


@dataclass
class Run:
    """One case's Herald and what the case needs to attack it."""

    environment: Environment
    deployment: Deployment
    client: httpx.AsyncClient
    application_identifier: str
    scale: Scale
    window: Window | None = None

    @property
    def port(self) -> int:
        return int(self.deployment.base_url.rsplit(":", 1)[1])

    @asynccontextmanager
    async def attack(self) -> AsyncIterator[None]:
        """The measured window: the health client polls and the processes' memory is sampled meanwhile."""
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        receiving, sending = context.Pipe(duplex=False)
        poller = context.Process(
            target=_poll_health, args=(self.deployment.base_url + HEALTH_PATH, HEALTH_INTERVAL, stop, sending), daemon=True
        )
        poller.start()
        sending.close()
        # The attack starts once the client asks: a process takes a second or more to start on a busy machine.
        if not await asyncio.to_thread(receiving.poll, 60.0):
            raise RuntimeError("the health client did not start")
        receiving.recv()
        api_pid = self.deployment.api.pid
        rss_start = harness.rss_mb(api_pid)
        peak = [rss_start or 0.0]
        started, busy, herald = time.monotonic(), harness.machine_busy_seconds(), self.herald_cpu_seconds()
        sampling = asyncio.Event()

        async def sample_memory() -> None:
            while not sampling.is_set():
                peak[0] = max(peak[0], harness.rss_mb(api_pid) or 0.0)
                try:
                    await asyncio.wait_for(sampling.wait(), timeout=0.1)
                except TimeoutError:
                    pass

        sampler = asyncio.create_task(sample_memory())
        try:
            yield
        finally:
            stop.set()
            sampling.set()
            await sampler
            seconds = max(time.monotonic() - started, 1e-6)
            machine = (harness.machine_busy_seconds() - busy) / seconds
            herald = (self.herald_cpu_seconds() - herald) / seconds
            samples = await asyncio.to_thread(_receive, receiving, 60.0)
            await asyncio.to_thread(poller.join, 10)
            if poller.is_alive():
                poller.kill()
            self.window = Window(Health(samples), seconds, rss_start, peak[0], machine, herald)

    def herald_cpu_seconds(self) -> float:
        pids = [pid for service in self.deployment.services for pid in service.pids()]
        return sum(harness.cpu_seconds(pid) for pid in pids + self.environment.store.backend_pids())

    async def in_app_workflow(self, name: str, template: dict[str, Any] | None = None) -> str:
        """An active one-step in-app workflow (``template``: the step's, ``content`` "hi" by default); its identifier."""
        step = {"type": "in_app", "content": "hi", **(template or {})}
        created = await self.client.post("/v1/workflows", json={"name": name, "active": True, "steps": [{"template": step}]})
        created.raise_for_status()
        return str(created.json()["data"]["triggers"][0]["identifier"])

    async def store_rows(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        """Rows of a read straight from the store, for what the API does not show (a message's size).

        A list parameter is expanded: ``IN :ids`` with ``ids=[...]``.
        """
        from sqlalchemy import bindparam, text

        from herald.kit.db import create_engine

        statement = text(sql).bindparams(
            *(bindparam(name, expanding=True) for name, value in params.items() if isinstance(value, (list, tuple)))
        )
        engine = create_engine(self.environment.store.url, pool_size=1)
        try:
            async with engine.connect() as connection:
                return [tuple(row) for row in (await connection.execute(statement, params)).all()]
        finally:
            await engine.dispose()


def _receive(connection: Any, timeout: float) -> list[tuple[float, int]]:
    if connection.poll(timeout):
        return list(connection.recv())
    return []


def statuses(counter: Counter[int]) -> str:
    """``201×12, 429×3`` (0: no answer)."""
    return ", ".join(f"{status or 'none'}×{count}" for status, count in sorted(counter.items())) or "none sent"


async def post_until_taken(client: httpx.AsyncClient, path: str, body: Any) -> httpx.Response:
    """POST, waiting out 429s (set-up, which the environment's rate limits also apply to)."""
    while True:
        answer = await client.post(path, json=body)
        if answer.status_code != 429:
            return answer
        await asyncio.sleep(float(answer.headers.get("retry-after", "1") or 1))


async def repeat_until(deadline: float, clients: int, request: Callable[[], Awaitable[int]]) -> tuple[Counter[int], list[float]]:
    """``clients`` loops each sending ``request`` until ``deadline``; the statuses and each request's seconds."""
    answers: Counter[int] = Counter()
    took: list[float] = []

    async def loop() -> None:
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                status = await request()
            except httpx.HTTPError:
                status = 0
            answers[status] += 1
            took.append(time.monotonic() - started)

    await asyncio.gather(*(loop() for _ in range(clients)))
    return answers, took


def median_ms(values: list[float]) -> float | None:
    return statistics.median(values) * 1000 if values else None


def _ms_text(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


# The cases ---------------------------------------------------------------------------------------


async def baseline(run: Run) -> Outcome:
    async with run.attack():
        await asyncio.sleep(run.scale.duration)
    return Outcome("none", "—")


async def translations(run: Run) -> Outcome:
    scale = run.scale
    workflow_id = "translated-bomb"
    created = await run.client.post(
        "/v2/workflows",
        json={
            "name": "translated bomb",
            "workflowId": workflow_id,
            "active": True,
            "isTranslationEnabled": True,
            "steps": [{"name": "inbox", "type": "in_app", "controlValues": {"body": "{{t.big}}" * scale.translation_refs}}],
        },
    )
    if created.status_code >= 400:
        return Outcome("workflow refused", f"refused at save ({created.status_code})", True)
    translation = await run.client.post(
        "/v2/translations",
        json={"resourceId": workflow_id, "resourceType": "workflow", "locale": "en_US", "content": {"big": "x" * scale.translation_chars}},
    )
    if translation.status_code >= 400:
        return Outcome("translation refused", f"refused at save ({translation.status_code})", True)
    transactions: list[str] = []
    answers: Counter[int] = Counter()
    async with run.attack():
        started = time.monotonic()
        for number in range(scale.translation_triggers):
            await asyncio.sleep(max(0.0, started + number * scale.duration / scale.translation_triggers - time.monotonic()))
            answer = await run.client.post(
                "/v1/events/trigger", json={"name": workflow_id, "to": {"subscriberId": f"reader-{number}"}, "payload": {}}
            )
            answers[answer.status_code] += 1
            if answer.status_code < 300 and answer.json()["data"].get("status") == "processed":
                transactions.append(answer.json()["data"]["transactionId"])
        await asyncio.sleep(max(0.0, started + scale.duration - time.monotonic()))
        settled = await wait_for_jobs(run, transactions)
    refs = f"{scale.translation_refs:,} × {{{{t.big}}}} of {scale.translation_chars:,} chars"
    if not transactions:
        return Outcome(f"{refs}; triggers {statuses(answers)}", "refused at trigger", True)
    found = await run.store_rows(
        "SELECT count(*), max(length(CAST(content AS TEXT))) FROM messages WHERE transaction_id IN :ids", ids=transactions
    )
    limited = await run.store_rows(
        "SELECT count(*) FROM execution_details WHERE detail LIKE :limit AND transaction_id IN :ids",
        ids=transactions,
        limit="%render limit%",
    )
    messages, largest = found[0][0], found[0][1] or 0
    over = largest > RENDER_OUTPUT_LIMIT
    if messages and over:
        defence = f"not bounded: {messages} message(s) stored, largest {largest / 1e6:,.1f} MB"
    elif limited[0][0]:
        defence = f"bounded: the step failed on a render limit ({limited[0][0]} detail(s))"
    else:
        defence = f"{messages} message(s), largest {largest:,} chars" + ("" if settled else "; jobs still pending")
    return Outcome(
        f"{refs}; {len(transactions)} trigger(s)",
        defence,
        None if not settled and not messages else not over,
        {"messages": messages, "largest_message_chars": largest, "render_limit_details": limited[0][0], "jobs_settled": settled},
    )


async def wait_for_jobs(run: Run, transactions: list[str], timeout: float = SETTLE_SECONDS) -> bool:
    """Wait until every job of the transactions has run (or ``timeout``); whether they all did."""
    if not transactions:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = await run.store_rows(
            "SELECT count(*), sum(CASE WHEN status IN :pending THEN 1 ELSE 0 END) FROM jobs WHERE transaction_id IN :ids",
            pending=list(PENDING_JOBS),
            ids=transactions,
        )
        total, pending = rows[0][0], rows[0][1] or 0
        if total and not pending:
            return True
        if not total and time.monotonic() > deadline - timeout + 10:
            return False  # nothing was queued
        await asyncio.sleep(0.25)
    return False


async def big_heads(run: Run) -> Outcome:
    scale = run.scale
    async with run.attack():
        deadline = time.monotonic() + scale.duration

        async def client() -> list[tuple[str, int]]:
            # Again and again until the deadline: a head refused at once must not end the attack (and the
            # health check's window) in a moment.
            sent: list[tuple[str, int]] = []
            while time.monotonic() < deadline:
                sent.append(await send_big_head(run.port, scale.head_bytes, deadline))
                if sent[-1][0] in ("stalled", "sent whole"):
                    break
            return sent

        sent = [head for heads in await asyncio.gather(*(client() for _ in range(scale.head_clients))) for head in heads]
    answers = Counter(answer for answer, _ in sent)
    most = max(count for _, count in sent)
    window = run.window
    growth = ((window.rss_peak_mb or 0) - (window.rss_start_mb or 0)) if window else 0.0
    refused = [answer for answer, count in sent if answer not in ("stalled", "sent whole")]
    heads = f"{scale.head_clients} clients × {scale.head_bytes / 2**20:,.1f} MB headers, no key, {len(sent)} sent"
    text = ", ".join(f"{answer}×{count}" for answer, count in sorted(answers.items()))
    defence = f"{text}; most sent {most / 2**20:,.1f} MB; API RSS +{growth:,.0f} MB"
    return Outcome(
        heads,
        defence,
        growth < 100 and len(refused) == len(sent),
        {"answers": dict(answers), "most_sent_bytes": most, "api_rss_growth_mb": round(growth, 1)},
    )


async def send_big_head(port: int, size: int, deadline: float) -> tuple[str, int]:
    """Send a request whose one header is ``size`` bytes; what the server did, and the bytes it took.

    The answer is its status line (``431``), ``closed`` (the connection ended without one),
    ``stalled`` (the server stopped reading before the deadline) or ``sent whole``.
    """
    reader, writer = await asyncio.open_connection(harness.HOST, port)
    chunk = b"a" * min(size, 2**20)
    sent = 0
    answer = "sent whole"
    first = asyncio.create_task(reader.read(256))
    try:
        writer.write(b"GET /v1/subscribers HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ")
        while sent < size and not first.done():
            left = deadline - time.monotonic()
            if left <= 0:
                answer = "stalled"
                break
            piece = chunk[: size - sent]
            writer.write(piece)
            try:
                await asyncio.wait_for(writer.drain(), timeout=left)
            except TimeoutError:
                answer = "stalled"
                break
            sent += len(piece)
        if sent >= size and not first.done():
            writer.write(b"\r\n\r\n")
            await writer.drain()
        if answer != "stalled" or first.done():
            data = await asyncio.wait_for(first, timeout=max(1.0, deadline - time.monotonic() + 5))
            answer = data.split(b"\r\n", 1)[0].split(b" ")[1].decode() if data.startswith(b"HTTP/") else "closed"
    except (ConnectionError, TimeoutError):
        answer = "closed" if answer != "stalled" else answer
        if first.done() and not first.cancelled() and first.exception() is None:
            data = first.result()
            if data.startswith(b"HTTP/"):
                answer = data.split(b"\r\n", 1)[0].split(b" ")[1].decode()
    finally:
        first.cancel()
        # Not close(): it would wait to hand Herald the rest of the buffered header first.
        writer.transport.abort()
    return answer, sent


async def inbox_filters(run: Run) -> Outcome:
    scale = run.scale
    subscriber = "inbox-heavy"
    workflow = await run.in_app_workflow(
        "inbox heavy", {"content": "n {{payload.n}}", "data": {"kind": "{{payload.kind}}", "n": "{{payload.n}}"}}
    )
    kinds = max(1, scale.inbox_filters)
    for start in range(0, scale.inbox_messages, 100):
        events = [
            {"name": workflow, "to": {"subscriberId": subscriber}, "payload": {"n": n, "kind": f"k{n % kinds}"}}
            for n in range(start, min(start + 100, scale.inbox_messages))
        ]
        (await post_until_taken(run.client, "/v1/events/trigger/bulk", {"events": events})).raise_for_status()
    stored = await wait_for_messages(run, subscriber, scale.inbox_messages)
    session = await run.client.post(
        "/v1/inbox/session", json={"applicationIdentifier": run.application_identifier, "subscriberId": subscriber}
    )
    session.raise_for_status()
    token = session.json()["data"]["token"]
    filters = json.dumps([{"data": {"kind": f"k{index}"}} for index in range(scale.inbox_filters)])
    async with httpx.AsyncClient(
        base_url=run.deployment.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as inbox:

        async def count() -> int:
            return (await inbox.get("/v1/inbox/notifications/count", params={"filters": filters})).status_code

        async with run.attack():
            answers, took = await repeat_until(time.monotonic() + scale.duration, scale.inbox_clients, count)
    return request_outcome(
        f"{scale.inbox_clients} clients × {scale.inbox_filters} data filters over {stored:,} notifications",
        answers,
        took,
    )


def request_outcome(attack: str, answers: Counter[int], took: list[float], extra: dict[str, Any] | None = None) -> Outcome:
    """A looping attack's outcome: refused when every answer was 4xx, else served, with the answers' median."""
    refused = sum(count for status, count in answers.items() if 400 <= status < 500)
    total = sum(answers.values())
    if total and refused == total:
        defence = f"refused: {statuses(answers)}"
    elif refused:
        defence = f"limited: {statuses(answers)}"
    else:
        defence = f"served: {statuses(answers)}"
    defence += f"; answer p50 {_ms_text(median_ms(took))}"
    figures = {"answers": {str(status): count for status, count in answers.items()}, "answer_p50_ms": median_ms(took)}
    return Outcome(attack, defence, None, figures | (extra or {}))


async def wait_for_messages(run: Run, subscriber: str, expected: int, timeout: float = SETTLE_SECONDS) -> int:
    """Wait until the subscriber has ``expected`` messages stored (or ``timeout``); how many it has."""
    deadline = time.monotonic() + timeout
    count = 0
    while time.monotonic() < deadline:
        rows = await run.store_rows(
            "SELECT count(*) FROM messages m JOIN subscribers s ON s.id = m.subscriber_id WHERE s.subscriber_id = :subscriber",
            subscriber=subscriber,
        )
        count = int(rows[0][0])
        if count >= expected:
            break
        await asyncio.sleep(0.5)
    return count


async def previews(run: Run) -> Outcome:
    scale = run.scale
    created = await run.client.post(
        "/v2/workflows",
        json={"name": "preview heavy", "workflowId": "preview-heavy", "active": True, "steps": [{"name": "inbox", "type": "in_app", "controlValues": {"body": "hi"}}]},
    )
    created.raise_for_status()
    step = created.json()["data"]["steps"][0]["stepId"]
    loops = scale.preview_loops
    heavy = (
        f"{{% for i in (1..{loops}) %}}{{% for j in (1..{loops}) %}}"
        '{{ "abcdefghij" | append: i | append: j | upcase | replace: "A", "b" | downcase | size }}'
        "{% endfor %}{% endfor %}"
    )
    path = f"/v2/workflows/preview-heavy/step/{step}/preview"
    limited: Counter[str] = Counter()

    async def preview() -> int:
        answer = await run.client.post(path, json={"controlValues": {"body": heavy}, "previewPayload": {"payload": {}}})
        if answer.status_code < 300:
            error = (answer.json()["data"].get("result") or {}).get("error")
            limited["render limit" if error and "render limit" in str(error) else "rendered"] += 1
        return answer.status_code

    async with run.attack():
        answers, took = await repeat_until(time.monotonic() + scale.duration, scale.preview_clients, preview)
    outcome = request_outcome(
        f"{scale.preview_clients} clients previewing {loops * loops:,} loop iterations", answers, took, {"previews": dict(limited)}
    )
    if limited["render limit"]:
        outcome.defence += f"; {limited['render limit']} stopped by a render limit"
    return outcome


async def large_bodies(run: Run) -> Outcome:
    scale = run.scale
    workflow = await run.in_app_workflow("large body")
    head = json.dumps({"name": workflow, "to": {"subscriberId": "large"}, "payload": {"blob": ""}})[:-3].encode()
    body = head + b"a" * (scale.body_bytes - len(head) - 3) + b'"}}'
    answers: Counter[int] = Counter()
    took: list[float] = []
    async with httpx.AsyncClient(
        base_url=run.deployment.base_url,
        headers={"Authorization": f"ApiKey {run.deployment.api_key}", "Content-Type": "application/json"},
        timeout=120,
    ) as sender:

        async def send() -> None:
            started = time.monotonic()
            try:
                answers[(await sender.post("/v1/events/trigger", content=body)).status_code] += 1
            except httpx.HTTPError:
                answers[0] += 1
            took.append(time.monotonic() - started)

        async with run.attack():
            deadline = time.monotonic() + scale.duration
            rounds = 0
            while rounds < scale.body_rounds and (rounds == 0 or time.monotonic() < deadline):
                await asyncio.gather(*(send() for _ in range(scale.body_clients)))
                rounds += 1
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
    return request_outcome(f"{scale.body_clients} × {scale.body_bytes / 2**20:,.1f} MB triggers, {rounds} round(s)", answers, took)


async def sessions(run: Run) -> Outcome:
    scale = run.scale
    answers: Counter[int] = Counter()
    took: list[float] = []
    gate = asyncio.Semaphore(scale.session_concurrency)
    # A page's client: no API key, only the environment's public identifier.
    page = httpx.AsyncClient(base_url=run.deployment.base_url, timeout=60)

    async def start(number: int) -> None:
        async with gate:
            started = time.monotonic()
            try:
                answer = await page.post(
                    "/v1/inbox/session",
                    json={"applicationIdentifier": run.application_identifier, "subscriberId": f"flood-{number}"},
                )
                answers[answer.status_code] += 1
            except httpx.HTTPError:
                answers[0] += 1
            took.append(time.monotonic() - started)

    async with page, run.attack():
        started = time.monotonic()
        await asyncio.gather(*(start(number) for number in range(scale.sessions)))
        spent = time.monotonic() - started
        await asyncio.sleep(max(0.0, scale.duration - spent))
    created = (await run.store_rows("SELECT count(*) FROM subscribers WHERE subscriber_id LIKE 'flood-%'"))[0][0]
    outcome = request_outcome(f"{scale.sessions:,} sessions, {scale.session_concurrency} at once", answers, took,
                              {"subscribers_created": created, "seconds": round(spent, 1)})
    outcome.defence += f"; {created:,} subscribers created in {spent:,.1f} s"
    outcome.bounded = created < scale.sessions
    return outcome


async def webhook_backlog(run: Run) -> Outcome:
    from bench.webhook_backlog import Receiver, queue_backlog

    scale = run.scale
    slow = Receiver(scale.backlog_hold, 204)
    await slow.start()
    try:
        (await run.client.post("/v1/webhooks/endpoints", json={"url": slow.url, "eventTypes": ["workflow.updated"]})).raise_for_status()
        workflow = await run.in_app_workflow("backlog probe")
        await queue_backlog(run.environment, scale.backlog)
        await asyncio.sleep(min(3.0, scale.duration))
        seen_after: float | None = None
        async with run.attack():
            sent_at = time.monotonic()
            answer = await run.client.post(
                "/v1/events/trigger", json={"name": workflow, "to": {"subscriberId": "backlog-probe"}, "payload": {}}
            )
            answer.raise_for_status()
            transaction = answer.json()["data"]["transactionId"]
            while time.monotonic() - sent_at < scale.backlog_wait:
                found = (await run.client.get("/v1/messages", params={"transactionId": transaction})).json()["data"]
                if found:
                    seen_after = time.monotonic() - sent_at
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(max(0.0, sent_at + scale.duration - time.monotonic()))
        delivered = len(slow.arrivals)
    finally:
        await slow.stop()
    waited = "not within " + f"{scale.backlog_wait:g} s" if seen_after is None else f"after {seen_after:,.1f} s"
    return Outcome(
        f"{scale.backlog:,} webhooks queued for an endpoint holding each {scale.backlog_hold:g} s, then a trigger",
        f"its message stored {waited}; {delivered:,} webhooks delivered meanwhile",
        seen_after is not None and seen_after < 5.0,
        {"trigger_to_message_s": seen_after, "webhooks_delivered": delivered},
    )


CASES: dict[str, Callable[[Run], Awaitable[Outcome]]] = {
    "baseline": baseline,
    "translations": translations,
    "big-heads": big_heads,
    "inbox-filters": inbox_filters,
    "previews": previews,
    "large-bodies": large_bodies,
    "sessions": sessions,
    "webhook-backlog": webhook_backlog,
}
TITLES = {
    "baseline": "Baseline (no attack)",
    "translations": "Translations bomb (item 2)",
    "big-heads": "Big heads (item 3)",
    "inbox-filters": "Inbox data filters (item 6)",
    "previews": "Step previews (item 7)",
    "large-bodies": "Large bodies (item 15)",
    "sessions": "Sessions flood (item 13)",
    "webhook-backlog": "Webhook backlog (item 10)",
}


# Running the cases -------------------------------------------------------------------------------


@dataclass
class CaseResult:
    name: str
    outcome: Outcome | None
    window: Window | None
    error: str | None = None

    @property
    def health(self) -> Health | None:
        return self.window.health if self.window else None

    def row(self) -> Row:
        health = self.health
        window = self.window
        median = health.median if health else None
        p95 = health.quantile(0.95) if health else None
        worst = max(health.asked, default=None) if health else None
        figures: dict[str, Any] = {
            "health_p50_ms": _round(median, 1000),
            "health_p95_ms": _round(p95, 1000),
            "health_max_ms": _round(worst, 1000),
            "health_polls": len(health.asked) if health else 0,
            "health_failures": health.failures if health else 0,
            "health_missed": health.missed if health else 0,
            "window_s": _round(window.seconds) if window else None,
            "api_rss_start_mb": _round(window.rss_start_mb) if window else None,
            "api_rss_peak_mb": _round(window.rss_peak_mb) if window else None,
            "machine_busy_cores": round(window.machine_cores, 2) if window else None,
            "herald_cpu_cores": round(window.herald_cores, 2) if window else None,
        }
        if self.outcome is not None:
            figures.update(attack=self.outcome.attack, defence=self.outcome.defence, bounded=self.outcome.bounded)
            figures.update(self.outcome.figures)
        if self.error:
            figures["error"] = self.error
        polls = f"{figures['health_polls']} polls" + (f", {figures['health_failures']} failed" if figures["health_failures"] else "")
        polls += f", {figures['health_missed']} missed" if figures["health_missed"] else ""
        text = (
            f"health p50 {_ms_text(figures['health_p50_ms'])}, p95 {_ms_text(figures['health_p95_ms'])}, "
            f"max {_ms_text(figures['health_max_ms'])} ({polls}); "
        )
        if window:
            text += (
                f"{window.seconds:,.0f} s, cores busy {window.machine_cores:.1f} (Herald {window.herald_cores:.1f}), "
                f"API RSS peak {window.rss_peak_mb or 0:,.0f} MB; "
            )
        text += f"case failed: {self.error}" if self.error else f"{self.outcome.attack} → {self.outcome.defence}"  # type: ignore[union-attr]
        passed = None if median is None else median * 1000 < HEALTH_TARGET_MS
        return Row(
            TITLES[self.name],
            text,
            target=f"health p50 < {HEALTH_TARGET_MS:g} ms",
            verdict=verdict(passed),
            value=figures["health_p50_ms"],
            unit="ms",
            figures=figures,
        )


def _load_average() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "unknown"


def _round(value: float | None, factor: float = 1.0) -> float | None:
    return None if value is None else round(value * factor, 1)


# Herald's own defaults for the rate limits (herald/config.py): the cases meet the limits a deployment has.
DEFAULT_LIMITS = {"HERALD_RATE_LIMIT_TRIGGERS": "1000", "HERALD_RATE_LIMIT_REQUESTS": "500"}


async def run_case(name: str, options: argparse.Namespace, scale: Scale) -> CaseResult:
    """One case on a Herald and a store of its own, stopped and removed afterwards whatever happened."""
    folder = harness.make_folder()
    store = await Store.postgres(options.postgres) if options.store == "postgres" else Store.sqlite(folder)
    environment = Environment(folder, store, extra_env={**DEFAULT_LIMITS, "HERALD_OUTBOUND_ALLOW": harness.HOST})
    run: Run | None = None
    try:
        api_key = await asyncio.to_thread(environment.prepare)
        deployment = await environment.start_herald("uvicorn", api_key, options.workers)
        async with httpx.AsyncClient(
            base_url=deployment.base_url, headers={"Authorization": f"ApiKey {api_key}"}, timeout=60
        ) as client:
            run = Run(environment, deployment, client, environment.application_identifier, scale)
            outcome = await asyncio.wait_for(CASES[name](run), timeout=scale.duration + 2 * SETTLE_SECONDS + 120)
        return CaseResult(name, outcome, run.window)
    except Exception as exc:  # one case failing must not stop the others: it is reported in its row
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return CaseResult(name, None, run.window if run else None, detail)
    finally:
        environment.stop_all()
        await store.drop()
        harness.remove_folder(folder)


async def measure(options: argparse.Namespace) -> list[CaseResult]:
    scale = replace(SMOKE if options.smoke else Scale(), duration=options.duration)
    found: list[CaseResult] = []
    for name in options.cases:
        print(f"{TITLES[name]} ...", flush=True)
        result = await run_case(name, options, scale)
        print("  " + result.row().result, flush=True)
        found.append(result)
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.hardening", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres", metavar="ADMIN_URL", default=DEFAULT_POSTGRES,
                        help="the PostgreSQL server's admin URL, with --store postgres (a database of its own a case)")
    parser.add_argument("--workers", type=int, default=0, help="worker processes (0: the worker inside the API process)")
    parser.add_argument("--duration", type=float, default=None, help="seconds each attack runs (10; 1 with --smoke)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, of: " + ", ".join(CASES))
    parser.add_argument("--smoke", action="store_true", help="every case at a tiny size: checks that they run")
    parser.add_argument("--no-write", action="store_true", help="write no result file")
    parser.add_argument("--results", type=Path, default=results.RESULTS, help="the folder of the result file")
    options = parser.parse_args(argv)
    if options.duration is None:
        options.duration = (SMOKE if options.smoke else Scale()).duration
    options.cases = [name.strip() for name in options.cases.split(",") if name.strip()]
    unknown = [name for name in options.cases if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    started = datetime.now(UTC)
    load_before = _load_average()
    found = asyncio.run(measure(options))
    rows = [result.row() for result in found]
    busy = [result.window.machine_cores - result.window.herald_cores for result in found if result.window]
    notes = [f"Load average (1 min) {load_before} at the start, {_load_average()} at the end"]
    if busy and max(busy) > 0.25:
        notes.append(
            f"Other processes kept {min(busy):.1f}-{max(busy):.1f} of the {os.cpu_count()} cores busy during the"
            " attacks: Herald had the rest, and its figures are slower than on a machine of its own"
        )
    label = "SQLite" if options.store == "sqlite" else "PostgreSQL"
    workers = "the worker inside the API" if not options.workers else f"{options.workers} worker process(es)"
    title = f"Load cases, {label}, {workers}" + (" — smoke" if options.smoke else "")
    print()
    print(title)
    print("\n".join(notes))
    print(table(rows))
    if not options.no_write and not options.smoke:
        command = "python -m bench.hardening " + " ".join(shlex.quote(arg) for arg in (argv if argv is not None else sys.argv[1:]))
        settings = {key: value for key, value in vars(options).items() if key != "postgres"}
        data = results.record(
            kind="hardening", store=options.store, server="uvicorn", workers=options.workers, title=title,
            command=command, settings=settings, notes=notes, rows=rows, started=started,
            finished=datetime.now(UTC), source="python -m bench.hardening",
        )
        print(f"written to {results.write(data, options.results)}")
    return 1 if any(result.error for result in found) else 0


if __name__ == "__main__":
    raise SystemExit(main())
