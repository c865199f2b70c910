"""What a job's lease decides: who may run the job, and how often it is run again.

The lease is how other workers tell a dead worker from a busy one. These
tests hold SendGrid's answer (a local peer) to put a worker past its lease
while alive, or to kill it in the middle of a send, again and again.
"""

from __future__ import annotations

import asyncio
import threading

from starlette.responses import Response

from tests.fixtures.peers import HttpPeer, RecordedRequest
from tests.fixtures.processes import HeraldProcesses, wait_until
from tests.processes.conftest import (
    FAST_RECOVERY,
    ProcessStore,
    StallFirstRequest,
    all_jobs_final,
    api_client,
    email_setup,
    messages_of,
    sendgrid_handler,
    step_jobs,
    trigger,
)

# Longer than the 2 s lease (plus a poll), shorter than the 15 s provider timeout.
SLOW_ANSWER_SECONDS = 10.0


async def test_a_live_worker_slower_than_its_lease_does_not_get_the_email_sent_twice(
    store: ProcessStore, herald: HeraldProcesses, peer: HttpPeer
) -> None:
    slow = StallFirstRequest(then=sendgrid_handler(peer), hold=SLOW_ANSWER_SECONDS)
    peer.route("POST", "/v3/mail/send", slow)
    try:
        server = await herald.serve(**FAST_RECOVERY)
        await asyncio.gather(herald.worker(**FAST_RECOVERY), herald.worker(**FAST_RECOVERY))
        async with api_client(server.url or "", store.api_key) as api:
            subscriber, workflow = await email_setup(api, peer, "slow-provider")
            transaction_id = await trigger(api, workflow, subscriber["subscriberId"], payload={"order": "S-1"})

        async def settled() -> bool:
            herald.check_alive()
            return await all_jobs_final(store, transaction_id, expected_steps=1)

        await wait_until(settled, timeout=60, what="the job to be final", describe=herald.describe)
        # Let the slow call come back to its worker: whatever that worker does with it is part of the outcome.
        await asyncio.sleep(SLOW_ANSWER_SECONDS)
    finally:
        slow.released.set()

    [job] = await step_jobs(store, transaction_id)
    assert job.status == "completed"
    [message] = await messages_of(store, transaction_id)
    assert message.status == "sent"
    # Both workers lived; only one of them should have called the provider.
    sends = len(peer.requests_to("/v3/mail/send"))
    assert sends == 1, f"SendGrid was called {sends} times for one job (attempts={job.attempts})"


class HoldEveryRequest:
    """Answers no request until released; then accepts them all."""

    def __init__(self) -> None:
        self.released = threading.Event()

    async def __call__(self, _: RecordedRequest) -> Response:
        while not self.released.is_set():
            await asyncio.sleep(0.05)
        return Response(status_code=202, headers={"X-Message-Id": "sg-held"})


async def test_a_job_whose_workers_keep_dying_is_not_sent_more_than_max_attempts_times(
    store: ProcessStore, herald: HeraldProcesses, peer: HttpPeer
) -> None:
    held = HoldEveryRequest()
    peer.route("POST", "/v3/mail/send", held)
    try:
        server = await herald.serve(**FAST_RECOVERY)
        async with api_client(server.url or "", store.api_key) as api:
            subscriber, workflow = await email_setup(api, peer, "worker-killer")
            transaction_id = await trigger(api, workflow, subscriber["subscriberId"], payload={"order": "K-1"})
        max_attempts = 5  # what expand.py gives every step job (checked below)
        for killed in range(1, max_attempts + 1):
            worker = await herald.worker(**FAST_RECOVERY)

            async def send_arrived(count: int = killed) -> bool:
                herald.check_alive()
                return len(peer.requests_to("/v3/mail/send")) >= count

            await wait_until(send_arrived, timeout=30, what=f"send number {killed}", describe=herald.describe)
            worker.kill()
        [job] = await step_jobs(store, transaction_id)
        assert (job.status, job.attempts, job.max_attempts) == ("running", max_attempts, max_attempts)

        # Every attempt is used up: a worker may settle the job, not send it again.
        await herald.worker(**FAST_RECOVERY)

        async def settled_or_sent_again() -> bool:
            herald.check_alive()
            sent_again = len(peer.requests_to("/v3/mail/send")) > job.max_attempts
            if sent_again:
                held.released.set()  # let the extra send finish, so the job settles
            return await all_jobs_final(store, transaction_id, expected_steps=1)

        await wait_until(settled_or_sent_again, timeout=60, what="the job to be final", describe=herald.describe)
    finally:
        held.released.set()

    [job] = await step_jobs(store, transaction_id)
    sends = len(peer.requests_to("/v3/mail/send"))
    assert sends == job.max_attempts, f"SendGrid was called {sends} times (attempts={job.attempts})"
    assert job.status == "failed"
