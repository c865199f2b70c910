"""Steps that fail for good outside a step's own outcome (a crash on every attempt, a vanished subscriber,
workers that kept dying) settle the workflow like any failed step."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.engine import queue
from herald.engine.steps import STEP_RUNNERS
from herald.engine.steps.base import StepContext
from herald.engine.worker import Worker
from herald.kit.time import utcnow
from herald.models import Job
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, jobs_of, messages_of, trigger
from tests.fixtures.builders import create_subscriber, create_workflow

SMS = {"name": "text", "template": {"type": "sms", "content": "Order shipped"}}
IN_APP = {"name": "inbox", "template": {"type": "in_app", "content": "done"}}
FINAL = {"completed", "failed", "skipped", "canceled", "merged"}


def name_of(workflow: dict[str, Any]) -> str:
    return workflow["triggers"][0]["identifier"]


async def step_jobs(app: FastAPI, transaction_id: str) -> list[Job]:
    return [job for job in await jobs_of(app, transaction_id) if job.kind == "step"]


async def settle(worker: Worker, app: FastAPI, transaction_id: str) -> list[Job]:
    """Run the worker (retries included) until every step job of the transaction is final."""
    for _ in range(200):
        await worker.run_until_idle()
        jobs = await step_jobs(app, transaction_id)
        if jobs and all(job.status in FINAL for job in jobs):
            return jobs
        await asyncio.sleep(0.02)
    raise AssertionError(f"jobs did not settle: {[(j.step_type, j.status) for j in jobs]}")


async def expand_only(worker: Worker, app: FastAPI, transaction_id: str) -> None:
    """Worker rounds until the trigger is expanded, its first step left queued (not handed to the worker)."""
    worker.runner.batch_size = 0
    for _ in range(20):
        await worker.run_once()
        if [job.status for job in await jobs_of(app, transaction_id) if job.kind == "event"] == ["completed"]:
            worker.runner.batch_size = worker.batch_size
            return
    raise AssertionError("the trigger was not expanded")


@pytest.fixture
def crashing_sms(monkeypatch: pytest.MonkeyPatch) -> None:
    async def crash(ctx: StepContext) -> Any:
        raise RuntimeError("the sms step broke")

    monkeypatch.setitem(STEP_RUNNERS, "sms", crash)


@pytest.mark.parametrize("stop_on_fail", [True, False], ids=["stop-on-fail", "go-on"])
async def test_a_step_that_crashes_on_every_attempt_fails_like_any_failed_step(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, crashing_sms: None, stop_on_fail: bool
) -> None:
    subscriber = await create_subscriber(api, phone="+15550003")
    workflow = await create_workflow(api, steps=[{**SMS, "shouldStopOnFail": stop_on_fail}, IN_APP])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"])

    [sms, after] = await settle(worker, app, result["transactionId"])

    assert (sms.status, sms.attempts) == ("failed", sms.max_attempts)
    assert "RuntimeError: the sms step broke" in sms.error_text
    assert after.status == ("canceled" if stop_on_fail else "completed")
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"], channel="sms")
    assert (message.status, message.error_text) == ("error", sms.error_text)
    assert message.error_id
    if stop_on_fail:
        assert any("Workflow halted" in d.detail for d in await details_of(app, result["transactionId"]))


async def test_a_step_whose_subscriber_is_gone_fails_and_the_workflow_settles(
    api: httpx.AsyncClient, app: FastAPI, worker: Worker
) -> None:
    subscriber = await create_subscriber(api, phone="+15550004")
    workflow = await create_workflow(api, steps=[{**SMS, "shouldStopOnFail": True}, IN_APP])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"])
    await expand_only(worker, app, result["transactionId"])  # the subscriber goes before its first step runs
    assert [job.status for job in await step_jobs(app, result["transactionId"])] == ["queued", "pending"]
    assert (await api.delete(f"/v1/subscribers/{subscriber['subscriberId']}")).status_code == 200

    [sms, after] = await settle(worker, app, result["transactionId"])

    assert (sms.status, sms.error_text) == ("failed", "Step not run: the subscriber was deleted")
    assert after.status == "canceled"


@pytest.mark.parametrize("stop_on_fail", [True, False], ids=["stop-on-fail", "go-on"])
async def test_a_job_whose_workers_kept_dying_fails_like_any_failed_step(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, stop_on_fail: bool
) -> None:
    subscriber = await create_subscriber(api, phone="+15550005")
    workflow = await create_workflow(api, steps=[{**SMS, "shouldStopOnFail": stop_on_fail}, IN_APP])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"])
    await expand_only(worker, app, result["transactionId"])
    [sms, _] = await step_jobs(app, result["transactionId"])
    # The last of its workers died holding it: running, every attempt used, the lease gone.
    async with app.state.sessionmaker() as session:
        job = await session.get(Job, sms.id)
        job.status, job.attempts, job.locked_by = "running", job.max_attempts, "dead-worker"
        job.locked_until = utcnow() - timedelta(seconds=1)
        await session.commit()

    await worker.runner.fail_abandoned()
    [sms, after] = await settle(worker, app, result["transactionId"])

    assert (sms.status, sms.error_text) == ("failed", queue.ABANDONED)
    assert after.status == ("canceled" if stop_on_fail else "completed")
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"], channel="sms")
    assert (message.status, message.error_text) == ("error", queue.ABANDONED)
