"""A worker process killed with SIGKILL in the middle of its work: another finishes it, once.

The API runs in its own process (``herald serve --no-worker``) and the jobs
in ``herald worker`` processes with a 2 s lease, so a job left behind by the
dead worker can be taken again quickly.
"""

from __future__ import annotations

import asyncio
import email
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from sqlalchemy import func, select

from herald.models import ExecutionDetail, Job, Message, Notification, Subscriber
from tests.fixtures.peers import HttpPeer, SmtpPeer
from tests.fixtures.processes import HeraldProcess, HeraldProcesses, wait_until
from tests.processes.conftest import (
    EMAIL,
    FAST_RECOVERY,
    IN_APP,
    ProcessStore,
    StallFirstRequest,
    all_jobs_final,
    api_client,
    create,
    email_setup,
    messages_of,
    sendgrid_handler,
    step_jobs,
    trigger,
)


async def test_worker_killed_while_sending_an_email_is_replaced_and_the_email_is_recorded_once(
    store: ProcessStore, herald: HeraldProcesses, peer: HttpPeer
) -> None:
    stall = StallFirstRequest(then=sendgrid_handler(peer))
    peer.route("POST", "/v3/mail/send", stall)
    try:
        server = await herald.serve(**FAST_RECOVERY)
        doomed = await herald.worker(**FAST_RECOVERY)
        async with api_client(server.url or "", store.api_key) as api:
            subscriber, workflow = await email_setup(api, peer, f"mail-{uuid.uuid4().hex[:8]}")
            transaction_id = await trigger(api, workflow, subscriber["subscriberId"], payload={"order": "A-1"})

        async def stalled_send_arrived() -> bool:
            herald.check_alive()
            return len(peer.requests_to("/v3/mail/send")) >= 1

        await wait_until(stalled_send_arrived, timeout=30, what="the worker to call SendGrid", describe=herald.describe)
        doomed.kill()

        # The job is left as the dead worker had it: running, under its lease.
        [job] = await step_jobs(store, transaction_id)
        assert (job.status, job.locked_by, job.attempts) == ("running", doomed.worker_id, 1)
        assert await messages_of(store, transaction_id) == []

        rescuer = await herald.worker(**FAST_RECOVERY)

        async def settled() -> bool:
            herald.check_alive()
            return await all_jobs_final(store, transaction_id, expected_steps=1)

        await wait_until(settled, timeout=60, what="the second worker to finish the job", describe=herald.describe)
    finally:
        stall.released.set()

    [job] = await step_jobs(store, transaction_id)
    assert job.status == "completed"
    assert job.attempts == 2
    assert job.locked_by == rescuer.worker_id
    [message] = await messages_of(store, transaction_id)
    assert (message.channel, message.status, message.email) == ("email", "sent", "ada@example.com")
    assert message.provider_message_id and message.provider_message_id != StallFirstRequest.STALLED_ID
    # The stalled call (never answered to the dead worker) and the rescuer's.
    sends = peer.requests_to("/v3/mail/send")
    assert len(sends) == 2
    assert [s.json()["personalizations"][0]["to"] for s in sends] == [[{"email": "ada@example.com"}]] * 2

    async with store.sessionmaker() as session:
        details = list(
            (
                await session.execute(
                    select(ExecutionDetail).where(ExecutionDetail.job_id == job.id).order_by(ExecutionDetail.created_at)
                )
            ).scalars()
        )
    assert details, "the job has no execution details"
    assert all(detail.is_retry for detail in details)
    assert any(detail.status == "Queued" and "attempt 2" in detail.detail for detail in details)
    assert any(detail.status == "Success" and detail.detail.startswith("Accepted by sendgrid") for detail in details)


async def test_worker_killed_after_an_smtp_server_took_the_data_is_followed_by_a_copy_with_the_same_message_id(
    store: ProcessStore, herald: HeraldProcesses
) -> None:
    """SIGKILL while the server holds its answer to the data: the email may have been taken, so it goes again, and says so."""
    smtp = SmtpPeer()
    smtp.hold_data = threading.Event()
    smtp.start()
    try:
        server = await herald.serve(**FAST_RECOVERY)
        doomed = await herald.worker(**FAST_RECOVERY)
        async with api_client(server.url or "", store.api_key) as api:
            integration = await create(
                api,
                "/v1/integrations",
                {
                    "providerId": "nodemailer",
                    "channel": "email",
                    "active": True,
                    "credentials": {"host": "127.0.0.1", "port": str(smtp.port), "from": "herald@example.com", "ignoreTls": True},
                },
            )
            await create(api, f"/v1/integrations/{integration['_id']}/set-primary", {})
            name = f"smtp-{uuid.uuid4().hex[:8]}"
            subscriber = await create(api, "/v1/subscribers", {"subscriberId": f"{name}-subscriber", "email": "ada@example.com"})
            workflow = await create(api, "/v1/workflows", {"name": name, "active": True, "steps": [EMAIL]})
            transaction_id = await trigger(api, workflow, subscriber["subscriberId"], payload={"order": "S-1"})

        async def data_arrived() -> bool:
            herald.check_alive()
            return len(smtp.received) >= 1

        await wait_until(data_arrived, timeout=30, what="the worker to send the email's data", describe=herald.describe)
        doomed.kill()
        [job] = await step_jobs(store, transaction_id)
        assert (job.status, job.locked_by, job.attempts, job.handed_over) == ("running", doomed.worker_id, 1, 1)
        smtp.hold_data.set()

        rescuer = await herald.worker(**FAST_RECOVERY)

        async def settled() -> bool:
            herald.check_alive()
            return await all_jobs_final(store, transaction_id, expected_steps=1)

        await wait_until(settled, timeout=60, what="the second worker to finish the job", describe=herald.describe)
    finally:
        smtp.hold_data.set()
        smtp.stop()

    [job] = await step_jobs(store, transaction_id)
    assert (job.status, job.attempts, job.locked_by, job.handed_over) == ("completed", 2, rescuer.worker_id, None)
    [first, again] = [email.message_from_bytes(mail.data) for mail in smtp.received]
    assert first["Message-ID"] == again["Message-ID"]
    [message] = await messages_of(store, transaction_id)
    assert (message.status, message.provider_message_id) == ("sent", first["Message-ID"])
    async with store.sessionmaker() as session:
        details = (await session.execute(select(ExecutionDetail.detail).where(ExecutionDetail.job_id == job.id))).scalars().all()
    assert any(detail.startswith("Attempt 1 began sending this email to its SMTP server") for detail in details)


CROWD = 2000


@dataclass
class Crowd:
    """A topic whose members are CROWD subscribers, made once for the module."""

    topic: str
    subscriber_ids: list[str]


@pytest.fixture(scope="module")
async def crowd(store: ProcessStore, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Crowd]:
    launcher = HeraldProcesses(
        database_url=store.url, data_dir=store.data_dir, log_dir=tmp_path_factory.mktemp("crowd-logs")
    )
    try:
        server = await launcher.serve()
        prefix = f"crowd-{uuid.uuid4().hex[:6]}"
        ids = [f"{prefix}-{n:05d}" for n in range(CROWD)]
        async with api_client(server.url or "", store.api_key) as api:
            pending = iter(ids)

            async def create_some() -> None:
                for subscriber_id in pending:
                    response = await api.post("/v1/subscribers", json={"subscriberId": subscriber_id})
                    assert response.status_code == 201, response.text

            await asyncio.gather(*(create_some() for _ in range(32)))
            topic = f"{prefix}-topic"
            for start in range(0, CROWD, 500):
                chunk = ids[start : start + 500]
                added = await create(api, f"/v1/topics/{topic}/subscribers", {"subscribers": chunk})
                assert added["succeeded"] == chunk, added
    except BaseException:
        print(launcher.describe())
        raise
    finally:
        launcher.stop_all()
    yield Crowd(topic=topic, subscriber_ids=ids)


async def claimed_jobs(store: ProcessStore, transaction_id: str, worker: HeraldProcess, kind: str) -> list[str]:
    """Jobs of this kind the worker claimed (committed) and has not finished."""
    async with store.sessionmaker() as session:
        result = await session.execute(
            select(Job.id).where(
                Job.transaction_id == transaction_id,
                Job.kind == kind,
                Job.status == "running",
                Job.locked_by == worker.worker_id,
            )
        )
        return list(result.scalars())


async def count_messages(store: ProcessStore, transaction_id: str) -> int:
    async with store.sessionmaker() as session:
        return int(
            await session.scalar(
                select(func.count()).select_from(Message).where(Message.transaction_id == transaction_id)
            )
            or 0
        )


async def kill_while_holding(store: ProcessStore, transaction_id: str, worker: HeraldProcess, kind: str) -> list[str]:
    """Freeze the worker at a moment it holds claimed jobs of ``kind``, kill it there; returns those jobs.

    A claim is committed before its job runs, so a frozen worker that holds
    one is in the middle of running it (or about to). What the worker sent
    just before it froze (a batch's finish and its COMMIT) still lands, so
    the jobs are read once that has had time to.
    """
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline, f"never caught the worker holding a claimed {kind} job"
        worker.pause()
        await asyncio.sleep(0.2)
        if await claimed_jobs(store, transaction_id, worker, kind):
            break
        worker.resume()
        await asyncio.sleep(0.01)
    worker.kill()
    held = await claimed_jobs(store, transaction_id, worker, kind)
    assert held
    return held


async def assert_everyone_got_their_messages(store: ProcessStore, transaction_id: str, crowd: Crowd, each: int = 1) -> None:
    """Every job of the fan-out completed, and each member has ``each`` in-app messages (one a step), no more."""
    async with store.sessionmaker() as session:
        statuses = dict(
            (
                await session.execute(
                    select(Job.status, func.count()).where(Job.transaction_id == transaction_id).group_by(Job.status)
                )
            ).all()
        )
        steps = await session.scalar(
            select(func.count()).select_from(Job).where(Job.transaction_id == transaction_id, Job.kind == "step")
        )
        notifications = await session.scalar(
            select(func.count()).select_from(Notification).where(Notification.transaction_id == transaction_id)
        )
        per_subscriber = (
            await session.execute(
                select(Subscriber.subscriber_id, func.count())
                .join(Message, Message.subscriber_id == Subscriber.id)
                .where(Message.transaction_id == transaction_id, Message.channel == "in_app")
                .group_by(Subscriber.subscriber_id)
            )
        ).all()
    # The event job, the parts it shared the topic out in, and a step job per member and step: all completed.
    assert list(statuses) == ["completed"]
    assert steps == len(crowd.subscriber_ids) * each
    assert notifications == len(crowd.subscriber_ids)
    assert sorted(subscriber_id for subscriber_id, _ in per_subscriber) == crowd.subscriber_ids
    assert [row for row in per_subscriber if row[1] != each] == []
    assert await count_messages(store, transaction_id) == len(crowd.subscriber_ids) * each


async def fan_out(
    store: ProcessStore, herald: HeraldProcesses, crowd: Crowd, steps: tuple[dict, ...] = (IN_APP,)
) -> tuple[str, HeraldProcess]:
    """Start the API and a worker, and trigger an in_app workflow to the crowd's topic."""
    server = await herald.serve(**FAST_RECOVERY)
    worker = await herald.worker(**FAST_RECOVERY)
    async with api_client(server.url or "", store.api_key) as api:
        workflow = await create(
            api, "/v1/workflows", {"name": f"fan-out-{uuid.uuid4().hex[:8]}", "active": True, "steps": list(steps)}
        )
        transaction_id = await trigger(api, workflow, [{"type": "Topic", "topicKey": crowd.topic}])
    return transaction_id, worker


async def finish_with_another_worker(
    store: ProcessStore, herald: HeraldProcesses, transaction_id: str, steps_each: int = 1
) -> HeraldProcess:
    rescuer = await herald.worker(**FAST_RECOVERY)

    async def settled() -> bool:
        herald.check_alive()
        return await all_jobs_final(store, transaction_id, expected_steps=CROWD * steps_each)

    await wait_until(settled, timeout=180, what="the second worker to finish the fan-out", describe=herald.describe)
    return rescuer


# A second in-app step: the first is run in its batch's expansion (herald/engine/expand.py), so the jobs a
# worker claims and holds while it runs them are the second ones, which the first releases.
SECOND_IN_APP = {"name": "again", "template": {"type": "in_app", "content": "Again {{payload.item}}"}}


async def test_worker_killed_holding_claimed_in_app_jobs_loses_and_duplicates_nothing(
    store: ProcessStore, herald: HeraldProcesses, crowd: Crowd
) -> None:
    transaction_id, doomed = await fan_out(store, herald, crowd, steps=(IN_APP, SECOND_IN_APP))

    async def under_way() -> bool:
        herald.check_alive()
        return await count_messages(store, transaction_id) >= CROWD // 2 + 100

    await wait_until(under_way, timeout=60, what="the worker to make its first messages", describe=herald.describe)
    held = await kill_while_holding(store, transaction_id, doomed, "step")
    assert await count_messages(store, transaction_id) < 2 * CROWD, "the worker finished everything before it was killed"

    rescuer = await finish_with_another_worker(store, herald, transaction_id, steps_each=2)

    await assert_everyone_got_their_messages(store, transaction_id, crowd, each=2)
    # The jobs the dead worker held were run again by the other worker, and made one message each.
    async with store.sessionmaker() as session:
        rescued = list((await session.execute(select(Job).where(Job.id.in_(held)))).scalars())
        messages = (await session.execute(select(Message.job_id).where(Message.job_id.in_(held)))).scalars().all()
    assert [(job.status, job.attempts, job.locked_by) for job in rescued] == [
        ("completed", 2, rescuer.worker_id)
    ] * len(held)
    assert sorted(messages) == sorted(held)


async def test_worker_killed_while_expanding_a_topic_resumes_without_duplicates(
    store: ProcessStore, herald: HeraldProcesses, crowd: Crowd
) -> None:
    transaction_id, doomed = await fan_out(store, herald, crowd)
    # The event job, or one of the parts it shared the topic out in (one a thousand members).
    held = await kill_while_holding(store, transaction_id, doomed, "event")
    async with store.sessionmaker() as session:
        notified_before_kill = await session.scalar(
            select(func.count()).select_from(Notification).where(Notification.transaction_id == transaction_id)
        )
    assert notified_before_kill < CROWD, "the expansion was over before the worker was killed"

    rescuer = await finish_with_another_worker(store, herald, transaction_id)

    await assert_everyone_got_their_messages(store, transaction_id, crowd)
    async with store.sessionmaker() as session:
        expansions = list((await session.execute(select(Job).where(Job.transaction_id == transaction_id, Job.kind == "event"))).scalars())
        details = (
            (
                await session.execute(
                    select(ExecutionDetail.detail).where(ExecutionDetail.job_id.in_([job.id for job in expansions]))
                )
            )
            .scalars()
            .all()
        )
    assert len(expansions) == 1 + CROWD // 1000  # the event job and its parts
    assert all(job.status == "completed" for job in expansions)
    assert {job.locked_by for job in expansions if job.id in held} == {rescuer.worker_id}
    # Said once, by whichever of them finished last.
    assert details == [f"Trigger expanded into {CROWD} notifications"]
