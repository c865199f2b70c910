"""A running ``herald serve`` (SQLite, its worker in the API process) keeps answering while workflows
attack it: a template that doubles a string 31 times, one that runs upcase on a large payload string
thousands of times, a LIKE filter that backtracked exponentially, and one past the filter limits.

A thread polls GET /v1/health-check the whole time. The criterion: every poll
answers in under 100 ms (a healthy poll takes a few ms; on the old code the doubling grew the process
to 5.4 GB, the upcase held the loop 13 s, the LIKE 11 s to 82 s) and the server's resident memory
stays under 500 MB. Each attack's trigger is accepted and its step is recorded as failed (or, for the
LIKE that is merely slow to backtrack, filtered out with the right answer) with the limit named.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.processes import HeraldProcesses, wait_until
from tests.processes.conftest import api_client, create, trigger

HEALTH_SECONDS = 0.1
RSS_BYTES = 500 * 1024 * 1024
FINAL = {"completed", "failed", "skipped", "canceled", "merged"}


def like_filter(pattern: str) -> list[dict[str, Any]]:
    return [{"isNegated": False, "type": "GROUP", "value": "AND",
             "children": [{"on": "payload", "field": "text", "operator": "LIKE", "value": pattern}]}]


# name: (step, payload, expected job status, text its execution details must contain)
ATTACKS: dict[str, tuple[dict[str, Any], dict[str, Any], str, str]] = {
    "bomb": (
        {"template": {"type": "in_app", "content":
            '{% assign s = "aa" %}{% for i in (1..31) %}{% assign s = s | append: s %}{% endfor %}{{ s }}'}},
        {},
        "failed",
        "append would make a string of 1,048,576 characters, more than 1,000,000 (render limit)",
    ),
    "cpu": (
        {"template": {"type": "in_app", "content": "{% for i in (1..10000) %}{% assign u = payload.big | upcase %}{% endfor %}"}},
        {"big": "x" * 200_000},
        "failed",
        "render took more than 250 ms of CPU (render limit)",
    ),
    "like": (
        {"template": {"type": "in_app", "content": "matched"}, "filters": like_filter("{{payload.pattern}}")},
        {"text": "a" * 200, "pattern": "%a%a%a%a%a%a%b"},
        "skipped",
        'payload.text LIKE "%a%a%a%a%a%a%b" is false',
    ),
    "long-like": (
        {"template": {"type": "in_app", "content": "matched"}, "filters": like_filter("{{payload.pattern}}")},
        {"text": "a" * 200, "pattern": "%a" * 600 + "%b"},
        "failed",
        "LIKE pattern has 1,202 characters, more than 1,000 (filter limit)",
    ),
}


@pytest.fixture
def herald(tmp_path: Path) -> Iterator[HeraldProcesses]:
    """Processes on a SQLite file of their own; every one is killed after the test."""
    launcher = HeraldProcesses(
        database_url=f"sqlite:///{tmp_path / 'herald.db'}", data_dir=tmp_path / "data", log_dir=tmp_path / "logs"
    )
    try:
        yield launcher
    finally:
        launcher.stop_all()


# Polls back to back from a process of its own (neither the test's event loop nor its threads can hold a
# poll up); prints, for each poll, the seconds it took, its status and the server's resident bytes after it.
POLLER = """
import sys, time, httpx
url, pid = sys.argv[1], int(sys.argv[2])
def rss():
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
with httpx.Client(base_url=url, timeout=30) as client:
    while True:
        started = time.perf_counter()
        status = client.get("/v1/health-check").status_code
        print(time.perf_counter() - started, status, rss(), flush=True)
        time.sleep(0.005)
"""


@dataclass
class HealthPoller:
    url: str
    pid: int
    polls: list[tuple[float, int]] = field(default_factory=list)  # (seconds, status)
    rss: list[int] = field(default_factory=list)
    process: subprocess.Popen[str] | None = None
    reader: threading.Thread | None = None

    def start(self) -> HealthPoller:
        self.process = subprocess.Popen(
            [sys.executable, "-c", POLLER, self.url, str(self.pid)], stdout=subprocess.PIPE, text=True
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            seconds, status, rss = line.split()
            self.polls.append((float(seconds), int(status)))
            self.rss.append(int(rss))

    def finish(self) -> None:
        assert self.process is not None and self.reader is not None
        self.process.kill()
        self.process.wait(timeout=10)
        self.reader.join(timeout=10)


async def notification_jobs(api: httpx.AsyncClient, transaction_id: str) -> list[dict[str, Any]]:
    response = await api.get("/v1/notifications", params={"transactionId": transaction_id})
    assert response.status_code == 200, response.text
    return [job for item in response.json()["data"] for job in item["jobs"]]


async def test_the_service_keeps_answering_while_workflows_attack_it(herald: HeraldProcesses) -> None:
    herald.migrate()
    boot = herald.bootstrap()
    api_key = next(env for env in boot["environments"] if env["name"] == "Development")["apiKey"]
    server = await herald.serve(worker=True)
    async with api_client(server.url or "", api_key) as api:
        subscriber_id = (await create(api, "/v1/subscribers", {"subscriberId": "attacked"}))["subscriberId"]
        workflows = {
            name: await create(api, "/v1/workflows", {"name": f"attack {name}", "active": True,
                                                      "steps": [{"name": name, **step}]})
            for name, (step, _, _, _) in ATTACKS.items()
        }
        # One round unmeasured warms the server (imports, statements compiled on their first use, each
        # outcome's path once): what is timed after it is what the attacks cost, not a cold start.
        warm = await create(api, "/v1/workflows", {"name": "warm-up", "active": True, "steps": [
            {"name": "inbox", "template": {"type": "in_app", "content": "{{ payload.n }}"}}]})
        warming = [await trigger(api, warm, subscriber_id, payload={"n": 1})]
        for name, (_, payload, _, _) in ATTACKS.items():
            warming.append(await trigger(api, workflows[name], subscriber_id, payload=payload))
        await wait_until(lambda: _settled(api, warming), timeout=120, interval=0.5, what="the warm-up round to settle")
        poller = HealthPoller(server.url or "", server.pid).start()
        try:
            await wait_until(lambda: _polled(poller, 20), timeout=30, what="20 healthy polls before the attack")
            before = len(poller.polls)
            sent: list[tuple[str, str]] = []
            for _ in range(3):
                for name, (_, payload, _, _) in ATTACKS.items():
                    sent.append((name, await trigger(api, workflows[name], subscriber_id, payload=payload)))

            async def all_settled() -> bool:
                herald.check_alive()
                for _, transaction_id in sent:
                    jobs = await notification_jobs(api, transaction_id)
                    if not jobs or any(job["status"] not in FINAL for job in jobs):
                        return False
                return True

            await wait_until(all_settled, timeout=120, interval=0.5, what="every attack's step to settle",
                             describe=herald.describe)
            during = len(poller.polls) - before
            after = len(poller.polls) + 10
            await wait_until(lambda: _polled(poller, after), timeout=30, what="10 polls after the attacks")
        finally:
            poller.finish()

        for name, transaction_id in sent:
            _, _, status, text = ATTACKS[name]
            [job] = await notification_jobs(api, transaction_id)
            details = [detail["detail"] for detail in job["executionDetails"]]
            assert job["status"] == status, (name, job["status"], details)
            assert any(text in detail for detail in details), (name, details)
        response = await api.get(f"/v1/subscribers/{subscriber_id}/notifications/feed")
        assert response.status_code == 200
        assert [item["content"] for item in response.json()["data"]] == ["1"]  # the warm-up's only

    assert during >= 10, f"only {during} polls while the attacks ran"
    assert all(status == 200 for _, status in poller.polls)
    slow = sorted((seconds for seconds, _ in poller.polls), reverse=True)
    assert slow[0] < HEALTH_SECONDS, (
        f"{sum(s >= HEALTH_SECONDS for s in slow)} of {len(slow)} polls took {HEALTH_SECONDS * 1000:.0f} ms or more; "
        f"slowest {[round(s * 1000, 1) for s in slow[:5]]} ms, median {slow[len(slow) // 2] * 1000:.1f} ms"
    )
    assert max(poller.rss) < RSS_BYTES, f"resident memory reached {max(poller.rss) / 2**20:.0f} MB"


async def _settled(api: httpx.AsyncClient, transaction_ids: list[str]) -> bool:
    for transaction_id in transaction_ids:
        jobs = await notification_jobs(api, transaction_id)
        if not jobs or any(job["status"] not in FINAL for job in jobs):
            return False
    return True


async def _polled(poller: HealthPoller, count: int) -> bool:
    return len(poller.polls) >= count
