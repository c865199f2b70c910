"""``herald serve`` on SQLite, killed with SIGKILL while a delay and a digest wait: after a restart both deliver, once.

Everything the engine waits on is a row in the one SQLite file, so a process
that dies loses nothing: the restarted server's worker finds the delay and
the open digest and runs them when they are due.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.processes import HeraldProcesses, wait_until
from tests.processes.conftest import api_client, create, trigger

WAIT_SECONDS = 3
DELAYED = [
    {"name": "wait", "template": {"type": "delay"}, "metadata": {"type": "regular", "amount": WAIT_SECONDS, "unit": "seconds"}},
    {"name": "inbox", "template": {"type": "in_app", "content": "delayed {{payload.n}}"}},
]
DIGESTED = [
    {"name": "digest", "template": {"type": "digest"}, "metadata": {"type": "regular", "amount": WAIT_SECONDS, "unit": "seconds"}},
    {"name": "inbox", "template": {"type": "in_app", "content": "{{step.total_count}} digested"}},
]
FINAL = {"completed", "failed", "skipped", "canceled", "merged"}


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


async def job_statuses(api: httpx.AsyncClient, transaction_id: str) -> list[str]:
    response = await api.get("/v1/notifications", params={"transactionId": transaction_id})
    assert response.status_code == 200, response.text
    return [job["status"] for item in response.json()["data"] for job in item["jobs"]]


async def inbox(api: httpx.AsyncClient, subscriber_id: str) -> list[str]:
    response = await api.get(f"/v1/subscribers/{subscriber_id}/notifications/feed", params={"limit": 50})
    assert response.status_code == 200, response.text
    return sorted(item["content"] for item in response.json()["data"])


async def test_a_killed_sqlite_server_delivers_its_delay_and_digest_after_a_restart(herald: HeraldProcesses) -> None:
    herald.migrate()
    boot = herald.bootstrap()
    api_key = next(env for env in boot["environments"] if env["name"] == "Development")["apiKey"]
    server = await herald.serve(worker=True)
    async with api_client(server.url or "", api_key) as api:
        delayed: dict[str, Any] = await create(api, "/v1/workflows", {"name": "delayed", "active": True, "steps": DELAYED})
        digested: dict[str, Any] = await create(api, "/v1/workflows", {"name": "digested", "active": True, "steps": DIGESTED})
        subscriber_id = (await create(api, "/v1/subscribers", {"subscriberId": "restart-reader"}))["subscriberId"]
        waiting = await trigger(api, delayed, subscriber_id, payload={"n": 1})
        opened = await trigger(api, digested, subscriber_id, payload={"n": 1})
        merged = await trigger(api, digested, subscriber_id, payload={"n": 2})

        async def all_waiting() -> bool:
            herald.check_alive()
            return (
                await job_statuses(api, waiting) == ["delayed", "pending"]
                and await job_statuses(api, opened) == ["delayed", "pending"]
                and await job_statuses(api, merged) == ["merged", "merged"]
            )

        await wait_until(all_waiting, timeout=10, what="the delay and the digest to wait", describe=herald.describe)
        assert await inbox(api, subscriber_id) == []
    server.kill()

    restarted = await herald.serve(worker=True)
    async with api_client(restarted.url or "", api_key) as api:

        async def all_final() -> bool:
            herald.check_alive()
            statuses = [status for t in (waiting, opened, merged) for status in await job_statuses(api, t)]
            return len(statuses) == 6 and set(statuses) <= FINAL

        await wait_until(all_final, timeout=30, what="the delay and the digest to deliver", describe=herald.describe)
        assert await job_statuses(api, waiting) == ["completed", "completed"]
        assert await job_statuses(api, opened) == ["completed", "completed"]
        # One message each: the delay's, and the digest's of both events.
        assert await inbox(api, subscriber_id) == ["2 digested", "delayed 1"]
