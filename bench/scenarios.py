"""The measurements, each against a running Herald (or the bare endpoint) over HTTP.

Every wait here is bounded by a deadline; a measurement that runs out of time
reports what it saw and says so instead of hanging.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bench.loadgen import Api, LoadResult, Sender, closed_loop, json_bytes, open_loop, percentile
from herald.kit.time import parse_iso

TRIGGER_PATH = "/v1/events/trigger"
IN_APP_WORKFLOW = "bench inapp"
DIGEST_WORKFLOW = "bench digest"
SUBSCRIBER_POOL = 1000
# How often the end-to-end poller asks for the messages of pending triggers.
POLL_SECONDS = 0.025
BULK_SIZE = 100


def in_app_steps() -> list[dict[str, Any]]:
    return [{"template": {"type": "in_app", "content": "Hi {{payload.n}}"}}]


def digest_steps(window_seconds: int) -> list[dict[str, Any]]:
    return [
        {"template": {"type": "digest"}, "metadata": {"type": "regular", "amount": window_seconds, "unit": "seconds"}},
        {"template": {"type": "in_app", "content": "{{step.total_count}} events"}},
    ]


def trigger_body(workflow: str, prefix: str) -> Any:
    """The measured request: one subscriber out of a pool of 1,000, a small payload."""
    head = b'{"name":' + json_bytes(workflow) + b',"to":"' + prefix.encode() + b"-"

    def make(index: int) -> bytes:
        return head + str(index % SUBSCRIBER_POOL).encode() + b'","payload":{"n":' + str(index).encode() + b"}}"

    return make


class Accounting:
    """How many in-app messages the runs so far should have stored, to wait for the backlog."""

    def __init__(self) -> None:
        self.expected_in_app = 0

    def add(self, count: int) -> None:
        self.expected_in_app += count


# Trigger acceptance ------------------------------------------------------------------------


async def acceptance(
    base_url: str,
    api_key: str | None,
    workflow: str,
    concurrency: int,
    duration: float,
    warmup: float,
    client: str,
    prefix: str,
) -> tuple[LoadResult, int]:
    """Closed loop on the trigger route; returns the result and every 2xx answer sent (warm-up included)."""
    sender = Sender(client, base_url, api_key, concurrency)
    make = trigger_body(workflow, prefix)
    try:
        result = await closed_loop(sender, TRIGGER_PATH, make, concurrency, duration, warmup)
    finally:
        await sender.close()
    return result, result.accepted_total


async def wait_for_backlog(api: Api, expected: int, timeout: float) -> tuple[float, int]:
    """Wait until the environment holds ``expected`` in-app messages; returns (seconds, count seen)."""
    start = time.monotonic()
    deadline = start + timeout
    count = 0
    while time.monotonic() < deadline:
        count = await api.count_messages()
        if count >= expected:
            break
        await asyncio.sleep(0.25)
    return time.monotonic() - start, count


# End-to-end latency -----------------------------------------------------------------------------


@dataclass
class EndToEnd:
    sent: int = 0
    accepted: LoadResult = field(default_factory=LoadResult)
    seen_latencies: list[float] = field(default_factory=list)
    stored_latencies: list[float] = field(default_factory=list)
    missing: int = 0
    poll_requests: int = 0

    def p_seen(self, fraction: float) -> float | None:
        return percentile(sorted(self.seen_latencies), fraction)

    def p_stored(self, fraction: float) -> float | None:
        return percentile(sorted(self.stored_latencies), fraction)


async def end_to_end(
    api: Api, base_url: str, api_key: str, workflow: str, rate: float, duration: float, client: str, run_id: str,
    settle_timeout: float = 30.0,
) -> EndToEnd:
    """Open-loop triggers at ``rate``/s, each to its own subscriber, while a poller looks for their messages.

    Two latencies per trigger, both from its scheduled send time:
    - stored: the message's ``createdAt`` (written by the worker on the same
      machine's clock, in the transaction that stores it): trigger sent →
      message stored, to the millisecond, whatever the polling;
    - seen: when a ``GET /v1/messages?transactionId=...`` answer first contained
      the message (what a client polling the API observes: up to one poll
      round, POLL_SECONDS, later).
    The poller only has to find the messages; it looks every POLL_SECONDS so
    that its own requests do not load the service it measures.
    """
    outcome = EndToEnd()
    wall_offset = time.time() - time.perf_counter()
    scheduled_at: dict[str, float] = {}
    pending: set[str] = set()
    head = b'{"name":' + json_bytes(workflow) + b',"to":"e2e-' + run_id.encode() + b"-"

    def make(index: int) -> bytes:
        transaction_id = f"e2e-{run_id}-{index}"
        return (
            head + str(index).encode() + b'","transactionId":"' + transaction_id.encode()
            + b'","payload":{"n":' + str(index).encode() + b"}}"
        )

    def on_answer(index: int, scheduled: float, status: int, _body: bytes) -> None:
        # Only accepted triggers are waited for; refused ones and requests lost on the
        # wire are counted as errors of the sending side (outcome.accepted.errors).
        if 200 <= status < 300:
            transaction_id = f"e2e-{run_id}-{index}"
            scheduled_at[transaction_id] = scheduled
            pending.add(transaction_id)

    sending_done = asyncio.Event()

    async def poll() -> None:
        deadline = time.monotonic() + duration + settle_timeout + 5
        while time.monotonic() < deadline:
            if not pending:
                if sending_done.is_set():
                    return
                await asyncio.sleep(POLL_SECONDS)
                continue
            batch = sorted(pending)[:100]
            messages = await api.messages_of(batch)
            outcome.poll_requests += 1
            seen = time.perf_counter()
            for message in messages:
                transaction_id = message.get("transactionId")
                if transaction_id not in pending:
                    continue
                pending.discard(transaction_id)
                start = scheduled_at[transaction_id]
                outcome.seen_latencies.append(seen - start)
                created = parse_iso(message["createdAt"]).timestamp()
                outcome.stored_latencies.append(created - (start + wall_offset))
            await asyncio.sleep(POLL_SECONDS)

    sender = Sender(client, base_url, api_key, 256)
    poller = asyncio.create_task(poll())
    try:
        outcome.accepted = await open_loop(sender, TRIGGER_PATH, make, rate, duration, on_answer)
        outcome.sent = int(rate * duration)
        sending_done.set()
        await asyncio.wait_for(poller, timeout=settle_timeout + 10)
    except TimeoutError:
        pass
    finally:
        poller.cancel()
        await sender.close()
    outcome.missing = len(pending)
    return outcome


# Sustained delivery -------------------------------------------------------------------------------


# How often the sustained measurement counts the stored messages. A count is
# GET /v1/messages' totalCount, which reads every in-app message of the
# environment, and the measurement itself grows that table by a hundred
# thousand rows a minute: asked every half second, the count (and the page
# served with it) kept about a sixth of a PostgreSQL backend busy on a fresh
# database and more on one grown by earlier measurements, CPU the workers then
# did not have. Between counts the feeders go by the measured rate.
SUSTAINED_COUNT_SECONDS = 2.0
# The backlog the feeders keep, judged against the last count: this many
# seconds of delivery at the fastest rate counted, and never less than
# SUSTAINED_MIN_BACKLOG triggers. Until 2026-11-24 it was two seconds at the
# smoothed rate, extrapolated between counts: the estimate could only grow as
# fast as the delivery it allowed, so the window's first counts measured a slow
# start of the feeders, not of the service. The log prints every interval's
# rate, so a dip shows where it fell.
SUSTAINED_BACKLOG_SECONDS = 3.0
SUSTAINED_MIN_BACKLOG = 5000


@dataclass
class Sustained:
    duration: float = 0.0
    delivered: int = 0
    triggers_accepted: int = 0
    # The lowest rate over one interval between counts (SUSTAINED_COUNT_SECONDS).
    slowest_interval: float | None = None
    # Messages/s over each interval between counts, in order (the log shows where a dip fell).
    intervals: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.delivered / self.duration if self.duration else 0.0


async def sustained(api: Api, workflow: str, duration: float, warmup: float, feeders: int = 2) -> Sustained:
    """Keep a backlog of single-subscriber triggers and count the in-app messages stored per second.

    Triggers go in bulk (50 events per request) so accepting them costs the API
    little. The backlog is judged against the last count and topped up to
    SUSTAINED_BACKLOG_SECONDS of delivery at the fastest rate counted so far
    (at least SUSTAINED_MIN_BACKLOG triggers), so the workers have work until
    the next count however fast they are. The warm-up lets the pipeline
    (expansion, then the in-app step) fill first.
    """
    outcome = Sustained()
    base = await api.count_messages()
    # "stored": the last count; "fastest": the highest messages/s over one interval between counts.
    state = {"stored": base, "accepted": 0, "fastest": 0.0}
    stop = asyncio.Event()
    counter = iter(range(10**9))
    start = time.monotonic()
    window_start = start + warmup
    window_end = window_start + duration

    async def feed() -> None:
        while not stop.is_set() and time.monotonic() < window_end:
            backlog = state["accepted"] - (state["stored"] - base)
            if backlog > max(SUSTAINED_MIN_BACKLOG, SUSTAINED_BACKLOG_SECONDS * state["fastest"]):
                await asyncio.sleep(0.05)
                continue
            events = []
            for _ in range(BULK_SIZE // 2):
                index = next(counter)
                events.append({"name": workflow, "to": f"sus-{index % SUBSCRIBER_POOL}", "payload": {"n": index}})
            accepted = await api.trigger_bulk(events)  # read the total only after the await
            state["accepted"] += accepted

    samples: list[tuple[float, int]] = []

    async def sample() -> None:
        give_up = window_end + 60
        while (not samples or samples[-1][0] < window_end) and time.monotonic() < give_up:
            asked = time.monotonic()
            stored = await api.count_messages()
            now = time.monotonic()
            if samples and now > samples[-1][0]:
                state["fastest"] = max(state["fastest"], (stored - samples[-1][1]) / (now - samples[-1][0]))
            state["stored"] = stored
            samples.append((now, stored))
            await asyncio.sleep(max(0.0, SUSTAINED_COUNT_SECONDS - (now - asked)))

    sampler = asyncio.create_task(sample())
    try:
        await asyncio.wait_for(asyncio.gather(*(feed() for _ in range(feeders))), timeout=warmup + duration + 30)
    finally:
        stop.set()
    try:
        await asyncio.wait_for(sampler, timeout=70)
    except TimeoutError:
        pass
    # From the first sample in the window to the first one at or after its end.
    inside = [(t, n) for t, n in samples if t >= window_start]
    if len(inside) >= 2:
        outcome.duration = inside[-1][0] - inside[0][0]
        outcome.delivered = inside[-1][1] - inside[0][1]
        per_interval = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(inside, inside[1:], strict=False) if b[0] - a[0] > 0]
        outcome.intervals = per_interval
        outcome.slowest_interval = min(per_interval) if per_interval else None
    outcome.triggers_accepted = state["accepted"]
    return outcome


# Topic fan-out ------------------------------------------------------------------------------------


@dataclass
class FanOut:
    size: int
    seconds: float | None
    stored: int
    first_message_seconds: float | None = None

    @property
    def rate(self) -> float:
        return self.stored / self.seconds if self.seconds else 0.0


async def create_fanout_audience(
    api: Api, count: int, timeout: float, seed: Callable[[list[str]], Awaitable[None]] | None = None
) -> tuple[list[str], float]:
    """``count`` subscribers: ``POST /v1/subscribers/bulk``, 500 a request, 4 at a time, or ``seed`` (straight into the store).

    Returns their ids and the seconds it took.
    """
    start = time.monotonic()
    ids = [f"fan-{index:06d}" for index in range(count)]
    if seed is not None:
        await asyncio.wait_for(seed(ids), timeout=timeout)
    else:
        await api.create_subscribers(ids, concurrency=4, deadline=start + timeout)
    return ids, time.monotonic() - start


async def fan_out(api: Api, workflow: str, subscriber_ids: list[str], size: int, run_id: str, timeout: float) -> FanOut:
    """One trigger to a topic of ``size`` members; seconds until every member's message is stored."""
    key = f"fanout-{size}-{run_id}"
    await api.create_topic(key, subscriber_ids[:size])
    transaction_id = f"fanout-{size}-{run_id}"
    start = time.monotonic()
    # The end is the last message's own createdAt (this host's clock, as time.time is), not the poll that
    # saw it: at a million the polls are 5 s apart.
    sent_at = time.time()
    await api.trigger({"name": workflow, "to": [{"type": "Topic", "topicKey": key}], "transactionId": transaction_id, "payload": {"n": 0}})
    deadline = start + timeout
    stored = 0
    first = None
    while time.monotonic() < deadline:
        stored = await api.count_messages(transaction_id)
        if stored and first is None:
            first = time.monotonic() - start
        if stored >= size:
            last = await api.newest_message_at(transaction_id)
            return FanOut(size, last - sent_at if last is not None else time.monotonic() - start, stored, first)
        # Each count reads every message stored so far: for a million, one every 5 s (2.5% of the
        # fan-out's time) keeps the polling from taking a share of the store it measures.
        await asyncio.sleep(0.25 if size <= 20_000 else max(0.5, size / 200_000))
    return FanOut(size, None, stored, first)


async def bulk_fan_out(api: Api, workflow: str, events: int, recipients: int, run_id: str, timeout: float) -> FanOut:
    """One bulk trigger of ``events`` events, each to the same ``recipients`` subscribers; seconds until every message is stored.

    The recipients are subscribers of their own with short ids ("b000"...), so that the request of
    100 events to 1,000 each stays under HERALD_MAX_BODY (1 MB): about 0.7 MB.
    """
    subscriber_ids = [f"b{index:03d}" for index in range(recipients)]
    await api.create_subscribers(subscriber_ids, concurrency=2, deadline=time.monotonic() + timeout)
    base = await api.count_messages()
    size = events * recipients
    batch = [
        {"name": workflow, "to": subscriber_ids, "transactionId": f"bulk-{run_id}-{index}", "payload": {"n": index}}
        for index in range(events)
    ]
    start = time.monotonic()
    accepted = await api.trigger_bulk(batch)
    if accepted != events:
        raise RuntimeError(f"the bulk trigger took {accepted} of {events} events")
    deadline = start + timeout
    stored, first = 0, None
    while time.monotonic() < deadline:
        stored = await api.count_messages() - base
        if stored and first is None:
            first = time.monotonic() - start
        if stored >= size:
            return FanOut(size, time.monotonic() - start, stored, first)
        await asyncio.sleep(0.25)
    return FanOut(size, None, stored, first)


# Digest ------------------------------------------------------------------------------------------------


@dataclass
class Digest:
    events: int
    window: int
    accepted: int = 0
    send_seconds: float = 0.0
    first_message_seconds: float | None = None
    messages: int = 0
    digested_counts: list[int] = field(default_factory=list)

    @property
    def after_window(self) -> float | None:
        return None if self.first_message_seconds is None else self.first_message_seconds - self.window


async def digest(api: Api, workflow: str, events: int, window: int, run_id: str, timeout: float) -> Digest:
    """``events`` triggers for one subscriber into one digest; seconds until the digest's in-app message exists.

    Time counts from the first trigger sent; the digest opens when the first
    event reaches its digest step and stays open ``window`` seconds, so the
    figure is at least the window. Every event should be in the one message.
    """
    outcome = Digest(events, window)
    subscriber = f"digest-{run_id}"
    start = time.monotonic()
    batches = [
        [{"name": workflow, "to": subscriber, "payload": {"n": index}} for index in range(first, min(events, first + BULK_SIZE))]
        for first in range(0, events, BULK_SIZE)
    ]

    async def send() -> None:
        while batches:
            batch = batches.pop()
            accepted = await api.trigger_bulk(batch)  # read the total only after the await
            outcome.accepted += accepted

    await asyncio.wait_for(asyncio.gather(*(send() for _ in range(4))), timeout=timeout)
    outcome.send_seconds = time.monotonic() - start
    deadline = start + timeout
    while time.monotonic() < deadline:
        feed = await api.feed(subscriber, limit=100)
        if feed is None:
            await asyncio.sleep(0.25)
            continue
        if feed["totalCount"] and outcome.first_message_seconds is None:
            outcome.first_message_seconds = time.monotonic() - start
        counts = [_digested(message.get("content")) for message in feed["data"]]
        outcome.messages = int(feed["totalCount"])
        outcome.digested_counts = counts
        if sum(counts) >= outcome.accepted:
            break
        await asyncio.sleep(0.25)
    return outcome


def _digested(content: Any) -> int:
    match = re.match(r"\s*(\d+) events", content if isinstance(content, str) else "")
    return int(match.group(1)) if match else 0
