"""How fast delivery moves to the fallback when the primary provider goes down.

    python -m bench.failover [--rounds 1] [--rate 20] [--postgres ADMIN_URL] [--workers N]

Starts Herald as ``make bench`` does (``herald serve``, its worker inside or
``--workers`` worker processes) with the retry and breaker settings at their
defaults, and two SMTP servers (aiosmtpd) on loopback: the email primary and
its fallback, two nodemailer integrations of one environment. Triggers for a
one-step email workflow go out at a steady ``--rate``, each to its own
subscriber. Once the primary has delivered for a few seconds it is stopped
(its port then refuses connections); the figure is the time from that moment
to the first email the fallback receives. Each round then brings the primary
back and waits until it takes traffic again (its breaker's cool-down and
probe) before the next. At the end every trigger sent must have been
delivered exactly once, by one server or the other: the run says so.

Target: under 2 s (docs/performance.md), with HERALD_RETRY_BASE_SECONDS and
the breaker's settings at their defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiosmtpd.controller import Controller

from bench import harness
from bench.harness import Environment, Store

TARGET_SECONDS = 2.0


@dataclass
class Inbox:
    """What one SMTP server received: the order number of each email and when it arrived."""

    arrivals: list[tuple[float, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
        text = (
            envelope.content.decode("utf-8", "replace")
            if isinstance(envelope.content, bytes)
            else str(envelope.content)
        )
        order = text.split("ORDER-", 1)[1].split("-END", 1)[0] if "ORDER-" in text else "?"
        with self.lock:
            self.arrivals.append((time.time(), order))
        return "250 OK"

    def first_after(self, moment: float) -> float | None:
        with self.lock:
            later = [at for at, _ in self.arrivals if at >= moment]
        return min(later) if later else None

    def orders(self) -> list[str]:
        with self.lock:
            return [order for _, order in self.arrivals]


class SmtpServer:
    """An aiosmtpd server on a fixed loopback port that can go down and come back."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self.port = harness.free_port()
        self.controller: Controller | None = None

    def up(self) -> None:
        self.controller = Controller(self.inbox, hostname=harness.HOST, port=self.port)
        self.controller.start()

    def down(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


class Sender:
    """Triggers at a steady rate, each for its own subscriber and order number, until stopped."""

    def __init__(self, client: httpx.AsyncClient, workflow: str, rate: float) -> None:
        self.client = client
        self.workflow = workflow
        self.rate = rate
        self.sent: list[str] = []
        self.failed = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        interval = 1 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            order = str(len(self.sent) + self.failed)
            body = {
                "name": self.workflow,
                "to": {"subscriberId": f"failover-{order}", "email": f"s{order}@example.com"},
                "payload": {"order": f"ORDER-{order}-END"},
            }
            response = await self.client.post("/v1/events/trigger", json=body)
            if response.status_code == 201:
                self.sent.append(order)
            else:
                self.failed += 1
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()


async def wait_for(check: Any, timeout: float, what: str) -> float:
    started = time.time()
    while time.time() - started < timeout:
        value = check()
        if value:
            return value  # type: ignore[no-any-return]
        await asyncio.sleep(0.01)
    raise TimeoutError(f"{what} did not happen within {timeout:g} s")


async def measure(options: argparse.Namespace) -> dict[str, Any]:
    folder = harness.make_folder()
    store = await Store.postgres(options.postgres) if options.postgres else Store.sqlite(folder)
    environment = Environment(folder, store, extra_env={"HERALD_OUTBOUND_ALLOW": harness.HOST})
    primary_inbox, fallback_inbox = Inbox(), Inbox()
    primary, fallback = SmtpServer(primary_inbox), SmtpServer(fallback_inbox)
    primary.up()
    fallback.up()
    try:
        api_key = await asyncio.to_thread(environment.prepare)
        deployment = await environment.start_herald("uvicorn", api_key, options.workers)
        async with httpx.AsyncClient(
            base_url=deployment.base_url, headers={"Authorization": f"ApiKey {api_key}"}, timeout=30
        ) as client:
            for identifier, server in (("smtp-primary", primary), ("smtp-fallback", fallback)):
                credentials = {
                    "host": harness.HOST,
                    "port": str(server.port),
                    "from": "bench@example.com",
                    "ignoreTls": True,
                }
                answer = await client.post(
                    "/v1/integrations",
                    json={
                        "providerId": "nodemailer",
                        "channel": "email",
                        "identifier": identifier,
                        "active": True,
                        "credentials": credentials,
                    },
                )
                answer.raise_for_status()
            created = await client.post(
                "/v1/workflows",
                json={
                    "name": "failover",
                    "active": True,
                    "steps": [
                        {
                            "name": "mail",
                            "template": {"type": "email", "subject": "Order", "content": "{{payload.order}}"},
                        }
                    ],
                },
            )
            created.raise_for_status()
            workflow = created.json()["data"]["triggers"][0]["identifier"]
            sender = Sender(client, workflow, options.rate)
            sending = asyncio.create_task(sender.run())
            figures: list[float] = []
            try:
                for round_index in range(options.rounds):
                    # The primary delivers for a while first.
                    marker = time.time()

                    # ... and has caught up (at most a second of triggers not yet delivered), so
                    # what is timed is the failover, not a backlog.
                    def steady(marker: float = marker) -> bool:
                        delivered = len(primary_inbox.orders()) + len(fallback_inbox.orders())
                        caught_up = len(sender.sent) - delivered <= options.rate
                        return bool(primary_inbox.first_after(marker + options.steady)) and caught_up

                    await wait_for(steady, 180, "steady delivery by the primary")
                    down_at = time.time()
                    primary.down()
                    before = (len(primary_inbox.orders()), len(fallback_inbox.orders()), len(sender.sent))
                    print(
                        f"round {round_index + 1}: {before[2]} triggers sent; {before[0]} emails by the primary, {before[1]} by the fallback so far"
                    )
                    first = await wait_for(
                        lambda down_at=down_at: fallback_inbox.first_after(down_at), 60, "delivery by the fallback"
                    )
                    figures.append(first - down_at)
                    print(
                        f"round {round_index + 1}: first email through the fallback {first - down_at:.3f} s after the primary went down"
                    )
                    primary.up()
                    if round_index + 1 < options.rounds:
                        # Back once its breaker lets it (the cool-down, then a probe).
                        back = time.time()
                        await wait_for(
                            lambda back=back: primary_inbox.first_after(back), 180, "the primary taking traffic again"
                        )
            finally:
                sender.stop()
                await sending
            # Every trigger sent: delivered, once, by one of the two.
            expected = set(sender.sent)

            def all_delivered() -> bool:
                return expected <= set(primary_inbox.orders()) | set(fallback_inbox.orders())

            try:
                await wait_for(all_delivered, 120, "delivery of every trigger")
            except TimeoutError:
                pass
            received = Counter(primary_inbox.orders() + fallback_inbox.orders())
            missing = len(expected - set(received))
            duplicates = sum(count - 1 for count in received.values() if count > 1)
        deployment.stop()
        return {
            "store": store.label,
            "workers": options.workers,
            "rate_per_s": options.rate,
            "failover_seconds": figures,
            "triggers": len(sender.sent),
            "refused_triggers": sender.failed,
            "by_primary": len(primary_inbox.orders()),
            "by_fallback": len(fallback_inbox.orders()),
            "missing": missing,
            "duplicates": duplicates,
        }
    finally:
        primary.down()
        fallback.down()
        environment.stop_all()
        await store.drop()
        harness.remove_folder(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=1, help="times the primary goes down (each after the last one's recovery, ~30 s)"
    )
    parser.add_argument("--rate", type=float, default=20.0, help="triggers a second")
    parser.add_argument("--steady", type=float, default=2.0, help="seconds the primary delivers before it goes down")
    parser.add_argument(
        "--workers", type=int, default=0, help="worker processes (0: the worker inside the API process)"
    )
    parser.add_argument(
        "--postgres", metavar="ADMIN_URL", help="a PostgreSQL server on 127.0.0.1 (a database of the run's own)"
    )
    options = parser.parse_args(argv)
    result = asyncio.run(measure(options))
    figures = result["failover_seconds"]
    worst = max(figures) if figures else float("nan")
    print()
    print(
        f"Failover · {result['store']} · "
        + (f"API + {result['workers']} workers" if result["workers"] else "worker inside the API process")
    )
    print(
        f"  primary down -> first email through the fallback: median {statistics.median(figures):.3f} s, "
        f"worst {worst:.3f} s over {len(figures)} round(s) (target < {TARGET_SECONDS:g} s: {'met' if worst < TARGET_SECONDS else 'NOT met'})"
    )
    print(
        f"  {result['triggers']} triggers at {result['rate_per_s']:g}/s: {result['by_primary']} emails by the primary, "
        f"{result['by_fallback']} by the fallback, {result['missing']} missing, {result['duplicates']} duplicates"
        + (f", {result['refused_triggers']} triggers refused" if result["refused_triggers"] else "")
    )
    return 0 if result["missing"] == 0 and result["duplicates"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
