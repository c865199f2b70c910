"""SIGTERM during a burst: both processes exit in bounded time, and every trigger they accepted is delivered.

The worker holds a send its provider never answers: past its grace it stops
that round and queues its jobs again, so the next worker takes them at once
(the lease here is the default minute, longer than the test waits).
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import httpx
from sqlalchemy import select

from herald.models import Job
from tests.fixtures.peers import HttpPeer
from tests.fixtures.processes import HeraldProcesses, wait_until
from tests.processes.conftest import (
    ProcessStore,
    StallFirstRequest,
    all_jobs_final,
    api_client,
    email_setup,
    messages_of,
    sendgrid_handler,
    trigger,
)

BURST = 60
# A process still running this long after SIGTERM is killed (exit code -9).
STOP_TIMEOUT = 15.0


async def accepted(api: httpx.AsyncClient, workflow: dict[str, Any], subscriber_id: str, number: int) -> str | None:
    """The transactionId of a trigger the API accepted; None for one it did not (refused or cut off by the stop)."""
    body = {"name": workflow["triggers"][0]["identifier"], "to": subscriber_id, "payload": {"order": f"B-{number}"}}
    try:
        response = await api.post("/v1/events/trigger", json=body)
    except httpx.TransportError:
        return None
    if response.status_code != 201:
        return None
    return str(response.json()["data"]["transactionId"])


async def test_sigterm_during_a_burst_loses_nothing_accepted(
    store: ProcessStore, herald: HeraldProcesses, peer: HttpPeer
) -> None:
    stall = StallFirstRequest(then=sendgrid_handler(peer))
    peer.route("POST", "/v3/mail/send", stall)
    try:
        server = await herald.serve()
        worker = await herald.worker()
        async with api_client(server.url or "", store.api_key) as api:
            subscriber, workflow = await email_setup(api, peer, "shutdown")
            subscriber_id = subscriber["subscriberId"]
            held = await trigger(api, workflow, subscriber_id, payload={"order": "held"})

            async def send_in_flight() -> bool:
                return bool(peer.requests_to("/v3/mail/send"))

            await wait_until(send_in_flight, timeout=30, what="the first send to reach the provider", describe=herald.describe)

            burst = [asyncio.create_task(accepted(api, workflow, subscriber_id, number)) for number in range(BURST)]
            answered = asyncio.as_completed(burst)
            await next(answered)  # the burst is under way
            exits = await asyncio.gather(
                asyncio.to_thread(server.stop, STOP_TIMEOUT), asyncio.to_thread(worker.stop, STOP_TIMEOUT)
            )
            transactions = [transaction for transaction in await asyncio.gather(*burst) if transaction]
        # Each exited on its own (uvicorn ends by raising the SIGTERM it handled again); -9 would be the kill.
        assert all(code in (0, -signal.SIGTERM) for code in exits), (exits, herald.describe())
        assert transactions, "no trigger of the burst was accepted"

        # The held send's job is queued again, due now: not left running until its lease runs out.
        async with store.sessionmaker() as session:
            [job] = (await session.execute(select(Job).where(Job.transaction_id == held, Job.kind == "step"))).scalars()
        assert (job.status, job.locked_by) == ("queued", None)

        stall.released.set()
        await herald.serve()
        await herald.worker()

        async def all_delivered() -> bool:
            herald.check_alive()
            for transaction in [held, *transactions]:
                if not await all_jobs_final(store, transaction, expected_steps=1):
                    return False
            return True

        await wait_until(all_delivered, timeout=60, what="every accepted trigger to be delivered", describe=herald.describe)
    finally:
        stall.released.set()
    for transaction in [held, *transactions]:
        messages = await messages_of(store, transaction)
        assert [message.status for message in messages] == ["sent"], transaction
