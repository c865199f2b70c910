"""End to end over HTTP: trigger → worker → messages, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from herald.engine import queue
from herald.engine.queue import job_from_row
from herald.engine.repository import EngineRepository
from herald.engine.worker import SOLE_WRITER_POLL_SECONDS, Worker
from herald.kit.crypto import SecretBox, mask_secret
from herald.kit.db import create_engine, create_sessionmaker
from herald.kit.time import utcnow
from herald.migrations import upgrade_async
from herald.models import Event, Job, Notification, Subscriber
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, fast_forward, jobs_of, messages_of, trigger
from tests.fixtures.builders import (
    create_integration,
    create_subscriber,
    create_unchecked_workflow,
    create_workflow,
    unique,
)

IN_APP = {"name": "inbox", "template": {"type": "in_app", "content": "Hello {{subscriber.firstName}}, {{payload.item}}"}}


def workflow_name(workflow: dict[str, Any]) -> str:
    return workflow["triggers"][0]["identifier"]


async def test_in_app_step_creates_the_message(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    subscriber = await create_subscriber(api, firstName="Ada")
    workflow = await create_workflow(api, steps=[IN_APP])
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"item": "a book"})
    await worker.run_until_idle()
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.channel == "in_app"
    assert message.content == "Hello Ada, a book"
    assert message.status == "sent"
    assert (message.seen, message.read) == (False, False)
    assert message.delivered_at and message.payload == {"item": "a book"}
    assert message.subscriber_id == subscriber["_id"]
    feed = (await api.get(f"/v1/subscribers/{subscriber['subscriberId']}/notifications/feed")).json()
    assert [item["_id"] for item in feed["data"]] == [message.id]
    jobs = await jobs_of(app, result["transactionId"])
    assert sorted((job.kind, job.status) for job in jobs) == [("event", "completed"), ("step", "completed")]


async def test_trigger_creates_unknown_subscribers_and_updates_given_fields(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    existing = await create_subscriber(api, firstName="Old", lastName="Keep")
    workflow = await create_workflow(api, steps=[IN_APP])
    new_id = unique("new")
    await trigger(
        api,
        workflow_name(workflow),
        [{"subscriberId": existing["subscriberId"], "firstName": "New"}, new_id, new_id],
    )
    await worker.run_until_idle()
    updated = (await api.get(f"/v1/subscribers/{existing['subscriberId']}")).json()["data"]
    assert (updated["firstName"], updated["lastName"]) == ("New", "Keep")
    created = (await api.get(f"/v1/subscribers/{new_id}")).json()["data"]
    assert created["subscriberId"] == new_id
    messages = await messages_of(app, tenancy.environment_id)
    assert sorted(m.subscriber_id for m in messages) == sorted([existing["_id"], created["_id"]])


async def test_inline_channels_are_saved_against_their_integrations(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """A trigger's subscriber channels are kept as PATCH /credentials keeps them; one without an integration is reported."""
    slack = await create_integration(api, providerId="slack", channel="chat", active=True, credentials={})
    existing = await create_subscriber(api)
    patched = await api.patch(
        f"/v1/subscribers/{existing['subscriberId']}/credentials",
        json={"providerId": "slack", "credentials": {"webhookUrl": "https://hooks.example.com/old"}},
    )
    assert patched.status_code == 200, patched.text
    workflow = await create_workflow(api, steps=[IN_APP])
    fresh = unique("fresh")
    channels = [
        {"providerId": "slack", "credentials": {"webhookUrl": "https://hooks.example.com/new", "channel": "#general"}},
        {"providerId": "fcm", "credentials": {"deviceTokens": ["token-1"]}},
    ]
    result = await trigger(
        api,
        workflow_name(workflow),
        [{"subscriberId": fresh, "channels": channels}, {"subscriberId": existing["subscriberId"], "channels": channels}],
    )
    await worker.run_until_idle()

    expected = [
        {
            "providerId": "slack",
            "_integrationId": slack["_id"],
            "integrationIdentifier": slack["identifier"],
            # webhookUrl is a secret: shown masked, stored sealed (herald.subscribers.channels).
            "credentials": {"webhookUrl": mask_secret("https://hooks.example.com/new"), "channel": "#general"},
        }
    ]
    for subscriber_id in (fresh, existing["subscriberId"]):
        response = await api.get(f"/v1/subscribers/{subscriber_id}")
        assert response.status_code == 200, response.text
        assert response.json()["data"]["channels"] == expected
    async with app.state.sessionmaker() as session:
        stored = (
            await session.execute(select(Subscriber.channels).where(Subscriber.subscriber_id.in_([fresh, existing["subscriberId"]])))
        ).scalars().all()
        events = (await session.execute(select(Event.recipients).where(Event.transaction_id == result["transactionId"]))).scalars().all()
    for channels in stored:
        [entry] = channels
        assert entry["credentials"]["webhookUrl"].startswith("hsk1.")
        assert app.state.secret_box.open(entry["credentials"]["webhookUrl"]) == "https://hooks.example.com/new"
    assert events and "hooks.example.com" not in str(events)
    expansion = [detail.detail for detail in await details_of(app, result["transactionId"]) if detail.detail.startswith("Trigger expanded")]
    assert expansion == [
        "Trigger expanded into 2 notifications"
        f"; channel of subscriber {fresh} not saved: no active integration for provider fcm"
        f"; channel of subscriber {existing['subscriberId']} not saved: no active integration for provider fcm"
    ]


async def test_steps_run_in_order_and_a_retried_in_app_step_makes_one_message(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    second = {"name": "second", "template": {"type": "in_app", "content": "second"}}
    workflow = await create_workflow(api, steps=[IN_APP, second])
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"item": "x"})
    await worker.run_until_idle()
    jobs = await jobs_of(app, result["transactionId"])
    step_jobs = [job for job in jobs if job.kind == "step"]
    assert [job.status for job in step_jobs] == ["completed", "completed"]
    assert step_jobs[1].parent_id == step_jobs[0].id
    # Run the first step again, as a worker whose lease expired would: no second message.
    async with app.state.sessionmaker() as session:
        job = await session.get(Job, step_jobs[0].id)
        job.status = "queued"
        await session.commit()
    await worker.run_until_idle()
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert sorted(m.content for m in messages) == ["Hello Ada, x", "second"]
    # The rerun found the message it made the first time and finished, as a fresh run would.
    rerun = next(job for job in await jobs_of(app, result["transactionId"]) if job.id == step_jobs[0].id)
    assert (rerun.status, rerun.error_text) == ("completed", None)


async def test_topic_fan_out_collapses_duplicates_and_excludes_the_actor(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    members = [await create_subscriber(api) for _ in range(4)]
    key = unique("topic")
    assert (await api.post("/v1/topics", json={"key": key, "name": "T"})).status_code == 201
    added = await api.post(f"/v1/topics/{key}/subscribers", json={"subscribers": [m["subscriberId"] for m in members]})
    assert added.status_code == 200, added.text
    workflow = await create_workflow(api, steps=[IN_APP])
    result = await trigger(
        api,
        workflow_name(workflow),
        [{"type": "Topic", "topicKey": key}, members[0]["subscriberId"]],
        actor=members[1]["subscriberId"],
    )
    await worker.run_until_idle()
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert sorted(m.subscriber_id for m in messages) == sorted([members[0]["_id"], members[2]["_id"], members[3]["_id"]])


async def test_large_topic_expands_in_batches(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    from herald.engine import expand

    key = unique("big")
    ids = [unique("m") for _ in range(25)]
    for subscriber_id in ids:
        await create_subscriber(api, subscriberId=subscriber_id)
    assert (await api.post(f"/v1/topics/{key}/subscribers", json={"subscribers": ids})).status_code == 200
    workflow = await create_workflow(api, steps=[IN_APP])
    original = expand.BATCH_SIZE
    expand.BATCH_SIZE = 10
    try:
        result = await trigger(api, workflow_name(workflow), {"type": "Topic", "topicKey": key})
        await worker.run_until_idle()
    finally:
        expand.BATCH_SIZE = original
    async with app.state.sessionmaker() as session:
        count = await session.scalar(
            select(func.count()).select_from(Notification).where(Notification.transaction_id == result["transactionId"])
        )
    assert count == 25
    details = [d.detail for d in await details_of(app, result["transactionId"]) if d.job_id and "expan" in d.detail]
    assert details[-1] == "Trigger expanded into 25 notifications"


async def test_broadcast_reaches_every_subscriber_of_the_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    ours = [await create_subscriber(api) for _ in range(3)]
    await create_subscriber(production_api)
    workflow = await create_workflow(api, steps=[IN_APP])
    response = await api.post("/v1/events/trigger/broadcast", json={"name": workflow_name(workflow), "payload": {"item": "news"}})
    transaction_id = response.json()["data"]["transactionId"]
    await worker.run_until_idle()
    messages = await messages_of(app, tenancy.environment_id, transaction_id=transaction_id)
    assert sorted(m.subscriber_id for m in messages) == sorted(s["_id"] for s in ours)


async def test_regular_delay_waits_then_continues(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    subscriber = await create_subscriber(api)
    delay = {"name": "wait", "template": {"type": "delay"}, "metadata": {"type": "regular", "amount": 2, "unit": "hours"}}
    workflow = await create_workflow(api, steps=[delay, IN_APP])
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"item": "x"})
    await worker.run_until_idle()
    jobs = await jobs_of(app, result["transactionId"])
    step_jobs = [j for j in jobs if j.kind == "step"]
    assert [j.status for j in step_jobs] == ["delayed", "pending"]
    waited = (step_jobs[0].run_at - step_jobs[0].updated_at).total_seconds()
    assert 7100 < waited < 7300
    assert await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"]) == []
    assert await fast_forward(app, result["transactionId"]) == 1
    await worker.run_until_idle()
    assert len(await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])) == 1


async def test_scheduled_delay_uses_the_payload_date_and_rejects_a_bad_one(
    api: httpx.AsyncClient, app: FastAPI, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    delay = {"name": "wait", "template": {"type": "delay"}, "metadata": {"type": "scheduled", "delayPath": "sendAt"}}
    workflow = await create_workflow(api, steps=[delay, IN_APP])
    ok = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"sendAt": "2099-01-01T10:00:00Z"})
    past = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"sendAt": "2001-01-01T10:00:00Z"})
    missing = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={})
    await worker.run_until_idle()
    [waiting, _] = [j for j in await jobs_of(app, ok["transactionId"]) if j.kind == "step"]
    assert waiting.status == "delayed"
    assert waiting.run_at.isoformat().startswith("2099-01-01T10:00:00")
    for result in (past, missing):
        [failed, after] = [j for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"]
        assert failed.status == "failed"
        assert "Delay misconfigured" in (failed.error_text or "")
        # The step did not stop the workflow (shouldStopOnFail is off): the next step ran.
        assert after.status == "completed"


async def test_cancel_stops_a_delayed_run(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    subscriber = await create_subscriber(api)
    delay = {"name": "wait", "template": {"type": "delay"}, "metadata": {"type": "regular", "amount": 1, "unit": "days"}}
    workflow = await create_workflow(api, steps=[delay, IN_APP])
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"])
    await worker.run_until_idle()
    response = await api.delete(f"/v1/events/trigger/{result['transactionId']}")
    assert response.json() == {"data": True}
    await fast_forward(app, result["transactionId"])
    await worker.run_until_idle()
    assert [j.status for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"] == ["canceled", "canceled"]
    assert await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"]) == []
    assert (await api.delete(f"/v1/events/trigger/{result['transactionId']}")).json() == {"data": False}


DIGEST_IN_APP = {
    "name": "summary",
    "template": {"type": "in_app", "content": "{{step.total_count}} events: {% for e in step.events %}{{e.n}} {% endfor %}"},
}


async def test_regular_digest_merges_events_into_one_message(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    digest = {"name": "digest", "template": {"type": "digest"}, "metadata": {"type": "regular", "amount": 5, "unit": "minutes"}}
    workflow = await create_workflow(api, steps=[digest, DIGEST_IN_APP])
    results = []
    for n in range(4):
        results.append(await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"n": n}))
        await worker.run_until_idle()
    statuses = [[j.status for j in await jobs_of(app, r["transactionId"]) if j.kind == "step"] for r in results]
    assert statuses[0] == ["delayed", "pending"]
    assert statuses[1:] == [["merged", "merged"]] * 3
    await fast_forward(app, results[0]["transactionId"])
    await worker.run_until_idle()
    [message] = await messages_of(app, tenancy.environment_id, subscriber_id=subscriber["_id"])
    assert message.content == "4 events: 0 1 2 3 "
    # The digest's first run and the run that closed it are attempts 1 of their claims (never "attempt 0").
    master = [j for j in await jobs_of(app, results[0]["transactionId"]) if j.kind == "step"][0]
    queued = [d.detail for d in await details_of(app, results[0]["transactionId"]) if d.job_id == master.id and d.status == "Queued"]
    assert queued == ["Step digest queued; attempt 1", "Step digest queued; attempt 1"]


async def test_digest_key_groups_events(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    subscriber = await create_subscriber(api)
    digest = {
        "name": "digest",
        "template": {"type": "digest"},
        "metadata": {"type": "regular", "amount": 5, "unit": "minutes", "digestKey": "project"},
    }
    workflow = await create_workflow(api, steps=[digest, DIGEST_IN_APP])
    results = [
        await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"n": n, "project": project})
        for n, project in enumerate(["a", "b", "a"])
    ]
    await worker.run_until_idle()
    for result in results:
        await fast_forward(app, result["transactionId"])
    await worker.run_until_idle()
    messages = await messages_of(app, tenancy.environment_id, subscriber_id=subscriber["_id"])
    assert sorted(m.content for m in messages) == ["1 events: 1 ", "2 events: 0 2 "]


async def test_backoff_digest_sends_the_first_event_straight_through(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    digest = {
        "name": "digest",
        "template": {"type": "digest"},
        "metadata": {"type": "backoff", "amount": 5, "unit": "minutes", "backoffAmount": 10, "backoffUnit": "minutes"},
    }
    workflow = await create_workflow(api, steps=[digest, DIGEST_IN_APP])
    first = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"n": 1})
    await worker.run_until_idle()
    assert [j.status for j in await jobs_of(app, first["transactionId"]) if j.kind == "step"] == ["skipped", "completed"]
    second = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"n": 2})
    third = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"n": 3})
    await worker.run_until_idle()
    # The two later events share one digest (whichever ran first opened it).
    statuses = []
    for result in (second, third):
        statuses.append(tuple(j.status for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"))
    statuses.sort()
    assert statuses == [("delayed", "pending"), ("merged", "merged")]
    for result in (second, third):
        await fast_forward(app, result["transactionId"])
    await worker.run_until_idle()
    contents = sorted(m.content for m in await messages_of(app, tenancy.environment_id, subscriber_id=subscriber["_id"]))
    # The event let straight through is a digest of itself for the steps after it (as in Novu).
    assert contents == ["1 events: 1 ", "2 events: 2 3 "]


async def test_timed_digest_waits_for_the_configured_time(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber = await create_subscriber(api, timezone="Europe/Paris")
    digest = {
        "name": "digest",
        "template": {"type": "digest"},
        "metadata": {"type": "timed", "unit": "days", "amount": 1, "timed": {"atTime": "09:30"}},
    }
    workflow = await create_workflow(api, steps=[digest, DIGEST_IN_APP])
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"n": 1})
    await worker.run_until_idle()
    [open_digest, _] = [j for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"]
    assert open_digest.status == "delayed"
    from zoneinfo import ZoneInfo

    local = open_digest.run_at.astimezone(ZoneInfo("Europe/Paris"))
    assert (local.hour, local.minute) == (9, 30)
    later = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"n": 2})
    await worker.run_until_idle()
    assert [j.status for j in await jobs_of(app, later["transactionId"]) if j.kind == "step"] == ["merged", "merged"]
    assert await messages_of(app, tenancy.environment_id, subscriber_id=subscriber["_id"]) == []

    # The configured time comes: the digest closes and delivers both events.
    assert await fast_forward(app, result["transactionId"]) == 1
    await worker.run_until_idle()
    [message] = await messages_of(app, tenancy.environment_id, subscriber_id=subscriber["_id"])
    assert message.content == "2 events: 1 2 "
    assert [j.status for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"] == ["completed", "completed"]


async def test_step_filters_skip_a_step_and_the_next_runs(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    filtered = {
        "name": "vip only",
        "template": {"type": "in_app", "content": "vip"},
        "filters": [{"isNegated": False, "type": "GROUP", "value": "AND", "children": [{"field": "plan", "value": "vip", "operator": "EQUAL", "on": "payload"}]}],
    }
    everyone = {"name": "all", "template": {"type": "in_app", "content": "all"}}
    workflow = await create_workflow(api, steps=[filtered, everyone])
    regular = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"plan": "free"})
    vip = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"plan": "vip"})
    await worker.run_until_idle()
    assert [j.status for j in await jobs_of(app, regular["transactionId"]) if j.kind == "step"] == ["skipped", "completed"]
    assert [m.content for m in await messages_of(app, tenancy.environment_id, transaction_id=regular["transactionId"])] == ["all"]
    assert sorted(m.content for m in await messages_of(app, tenancy.environment_id, transaction_id=vip["transactionId"])) == ["all", "vip"]
    assert any("filtered out" in d.detail for d in await details_of(app, regular["transactionId"]))


async def test_template_error_fails_the_step_not_the_worker(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber = await create_subscriber(api)
    broken = {"name": "broken", "shouldStopOnFail": True, "template": {"type": "in_app", "content": "{% if %}"}}
    workflow = await create_unchecked_workflow(app, api, steps=[broken, IN_APP])  # the API refuses it now
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"])
    await worker.run_until_idle()
    statuses = [j.status for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"]
    assert statuses == ["failed", "canceled"]
    details = [d.detail for d in await details_of(app, result["transactionId"])]
    assert any(d.startswith("Template error") for d in details)
    assert any("Workflow halted" in d for d in details)


async def test_a_job_whose_worker_died_is_taken_by_another(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    from datetime import timedelta

    from herald.kit.time import utcnow

    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[IN_APP])
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"item": "x"})
    worker.runner.batch_size = 0  # expand only: the step is left queued
    await _run_until_expanded(worker, app, result["transactionId"])
    worker.runner.batch_size = worker.batch_size
    [step] = [j for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"]
    assert step.status == "queued"
    # Another worker claimed the step and died: running, its lease in the past, nothing written.
    async with app.state.sessionmaker() as session:
        job = await session.get(Job, step.id)
        job.status, job.locked_by, job.attempts = "running", "dead-worker", 1
        job.locked_until = utcnow() - timedelta(seconds=1)
        await session.commit()

    await worker.run_until_idle()
    # Claims take due jobs only: the dead worker's job waits for the sweep.
    [step] = [j for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"]
    assert (step.status, step.locked_by) == ("running", "dead-worker")

    await worker.runner.take_back_from_dead_workers()  # every worker's periodic sweep
    await worker.run_until_idle()

    [step] = [j for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"]
    assert (step.status, step.attempts, step.locked_by) == ("completed", 2, worker.worker_id)
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.content == "Hello Ada, x"
    assert await session_count(app, subscriber["_id"]) == 1


async def session_count(app: FastAPI, subscriber_id: str) -> int:
    async with app.state.sessionmaker() as session:
        return int(await session.scalar(select(func.count()).select_from(Subscriber).where(Subscriber.id == subscriber_id)) or 0)


# One case per operator: (operator, filter value, payload that passes, payload that does not).
OPERATOR_CASES = [
    ("EQUAL", "gold", {"v": "gold"}, {"v": "silver"}),
    ("NOT_EQUAL", "gold", {"v": "silver"}, {"v": "gold"}),
    ("LARGER", "10", {"v": 11}, {"v": 10}),
    ("SMALLER", "10", {"v": 9}, {"v": 10}),
    ("LARGER_EQUAL", "10", {"v": 10}, {"v": 9}),
    ("SMALLER_EQUAL", "10", {"v": 10}, {"v": 11}),
    ("IN", "a,b,c", {"v": "b"}, {"v": "d"}),
    ("NOT_IN", "a,b,c", {"v": "d"}, {"v": "a"}),
    ("ANY_IN", "x,y", {"v": ["y", "z"]}, {"v": ["z"]}),
    ("ALL_IN", "x,y", {"v": ["x", "y", "z"]}, {"v": ["x", "z"]}),
    ("BETWEEN", "5,10", {"v": 7}, {"v": 11}),
    ("NOT_BETWEEN", "5,10", {"v": 11}, {"v": 7}),
    ("LIKE", "%@example.com", {"v": "ada@example.com"}, {"v": "ada@other.org"}),
    ("NOT_LIKE", "%@example.com", {"v": "ada@other.org"}, {"v": "ada@example.com"}),
]


@pytest.mark.parametrize(("operator", "value", "passing", "failing"), OPERATOR_CASES, ids=[c[0] for c in OPERATOR_CASES])
async def test_every_filter_operator_end_to_end(
    api: httpx.AsyncClient,
    app: FastAPI,
    tenancy: Tenancy,
    worker: Worker,
    operator: str,
    value: str,
    passing: dict[str, Any],
    failing: dict[str, Any],
) -> None:
    subscriber = await create_subscriber(api)
    step = {
        "name": "filtered",
        "template": {"type": "in_app", "content": "passed"},
        "filters": [{"isNegated": False, "type": "GROUP", "value": "AND", "children": [{"field": "v", "value": value, "operator": operator, "on": "payload"}]}],
    }
    workflow = await create_workflow(api, steps=[step])
    yes = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload=passing)
    no = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload=failing)
    await worker.run_until_idle()
    assert [m.content for m in await messages_of(app, tenancy.environment_id, transaction_id=yes["transactionId"])] == ["passed"]
    assert await messages_of(app, tenancy.environment_id, transaction_id=no["transactionId"]) == []
    assert [j.status for j in await jobs_of(app, no["transactionId"]) if j.kind == "step"] == ["skipped"]


async def test_subscriber_filters_and_or_groups(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    vip = await create_subscriber(api, data={"plan": "vip"}, firstName="Ada")
    regular = await create_subscriber(api, data={"plan": "free"}, firstName="Bob")
    step = {
        "name": "vip or Bob",
        "template": {"type": "in_app", "content": "hi"},
        "filters": [
            {"type": "GROUP", "value": "OR", "children": [
                {"field": "data.plan", "value": "vip", "operator": "EQUAL", "on": "subscriber"},
                {"field": "firstName", "value": "Carl", "operator": "EQUAL", "on": "subscriber"},
            ]},
        ],
    }
    workflow = await create_workflow(api, steps=[step])
    result = await trigger(api, workflow_name(workflow), [vip["subscriberId"], regular["subscriberId"]])
    await worker.run_until_idle()
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert [m.subscriber_id for m in messages] == [vip["_id"]]


async def test_bulk_trigger_runs_every_event(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    subscribers = [await create_subscriber(api) for _ in range(3)]
    workflow = await create_workflow(api, steps=[IN_APP])
    response = await api.post(
        "/v1/events/trigger/bulk",
        json={"events": [{"name": workflow_name(workflow), "to": s["subscriberId"], "payload": {"item": str(i)}} for i, s in enumerate(subscribers)]},
    )
    results = response.json()["data"]
    assert [r["status"] for r in results] == ["processed"] * 3
    await worker.run_until_idle()
    for index, (result, subscriber) in enumerate(zip(results, subscribers, strict=True)):
        [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
        assert message.subscriber_id == subscriber["_id"]
        assert message.content.endswith(str(index))


async def test_a_slow_step_keeps_its_lease(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    """A live worker extends the lease of a job it is still running, so no other worker takes it."""
    import asyncio
    from dataclasses import replace

    from herald.app import build_worker
    from herald.engine import queue
    from herald.engine.steps import STEP_RUNNERS

    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[{"name": "slow", "template": {"type": "sms", "content": "x"}}])
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"])
    slow_worker = build_worker(replace(app.state.settings, job_lease_seconds=0.3), app.state.sessionmaker)

    started = asyncio.Event()
    release = asyncio.Event()
    original = STEP_RUNNERS["sms"]

    async def slow_step(ctx):  # type: ignore[no-untyped-def]
        started.set()
        await release.wait()
        return await original(ctx)

    STEP_RUNNERS["sms"] = slow_step
    try:
        running = asyncio.create_task(slow_worker.run_until_idle())
        await asyncio.wait_for(started.wait(), 10)
        await asyncio.sleep(1.0)  # three lease lengths
        async with app.state.sessionmaker() as session, session.begin():
            stolen = await queue.claim_jobs(session, "another-worker", 100, 30)
        assert result["transactionId"] not in [job.transaction_id for job in stolen]
        release.set()
        await asyncio.wait_for(running, 10)
    finally:
        STEP_RUNNERS["sms"] = original
        release.set()
        await slow_worker.http.aclose()
    [job] = [j for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"]
    assert job.status == "skipped"  # no phone number: a warning, and the job is final


async def _run_until_expanded(worker: Worker, app: FastAPI, transaction_id: str) -> None:
    """Worker rounds until the transaction's expansion job is completed (other tests' jobs may share a round)."""
    for _ in range(20):
        await worker.run_once()
        if [job.status for job in await jobs_of(app, transaction_id) if job.kind == "event"] == ["completed"]:
            return
    raise AssertionError("the trigger was not expanded")


async def test_the_round_that_expands_a_trigger_also_runs_its_first_step(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    workflow = await create_workflow(api)
    result = await trigger(api, workflow_name(workflow), unique("handoff"), payload={"name": "Ada"})

    await _run_until_expanded(worker, app, result["transactionId"])

    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.content == "Hello Ada"
    [step] = [job for job in await jobs_of(app, result["transactionId"]) if job.kind == "step"]
    assert (step.status, step.attempts, step.locked_by) == ("completed", 1, worker.worker_id)


async def test_a_fan_out_larger_than_the_batch_has_its_in_app_steps_settled_and_the_others_left_queued(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """More recipients than a worker's batch: the in-app steps need only the store and are written with the
    expansion; the others (a provider's) are left queued for every worker to share, not taken by this one."""
    worker.batch_size = worker.runner.batch_size = 3
    inbox = await create_workflow(api)
    mail = await create_workflow(api, steps=[{"name": "mail", "template": {"type": "email", "subject": "Hi", "content": "Hello"}}])
    audience = [unique("wide") for _ in range(4)]
    await worker.run_until_idle()  # what earlier tests left
    settled = await trigger(api, workflow_name(inbox), audience)
    queued = await trigger(api, workflow_name(mail), audience)

    await worker.run_once()  # both expansions, in one round
    for transaction_id in (settled["transactionId"], queued["transactionId"]):
        assert [job.status for job in await jobs_of(app, transaction_id) if job.kind == "event"] == ["completed"]

    steps = [job for job in await jobs_of(app, settled["transactionId"]) if job.kind == "step"]
    assert [(job.status, job.attempts) for job in steps] == [("completed", 1)] * 4
    assert len(await messages_of(app, tenancy.environment_id, transaction_id=settled["transactionId"])) == 4
    steps = [job for job in await jobs_of(app, queued["transactionId"]) if job.kind == "step"]
    assert [(job.status, job.attempts) for job in steps] == [("queued", 0)] * 4


def _count_wakes(monkeypatch: pytest.MonkeyPatch) -> list[None]:
    """Each call to queue.wake_workers (the NOTIFY that makes every listening worker claim).

    Callers drain what earlier tests left due first (``worker.run_until_idle``
    before their trigger): a leftover job sharing the counted round may wake
    the workers for its own next step.
    """
    wakes: list[None] = []
    wake = queue.wake_workers

    async def counted(session: Any) -> None:
        wakes.append(None)
        await wake(session)

    monkeypatch.setattr(queue, "wake_workers", counted)
    return wakes


async def test_an_expansion_whose_steps_this_worker_takes_wakes_no_other_worker(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    workflow = await create_workflow(api)
    await worker.run_until_idle()
    result = await trigger(api, workflow_name(workflow), unique("quiet"), payload={"name": "Ada"})
    wakes = _count_wakes(monkeypatch)

    await _run_until_expanded(worker, app, result["transactionId"])

    assert len(await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])) == 1
    assert wakes == []


async def test_a_finished_step_wakes_the_workers_only_when_it_released_the_next(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = [IN_APP, {**IN_APP, "name": "again"}]
    workflow = await create_workflow(api, steps=steps)
    await worker.run_until_idle()
    result = await trigger(api, workflow_name(workflow), unique("chain"), payload={"item": "x"})
    wakes = _count_wakes(monkeypatch)

    await _run_until_expanded(worker, app, result["transactionId"])  # and its first step, handed off
    assert len(wakes) == 1  # the second step was released
    await worker.run_until_idle()
    assert len(wakes) == 1  # the second step released nothing
    assert len(await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])) == 2


async def test_an_expansion_that_leaves_steps_queued_wakes_the_workers(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker.batch_size = worker.runner.batch_size = 3
    # A provider's step: an in-app one would be settled in the expansion (the test above).
    workflow = await create_workflow(api, steps=[{"name": "mail", "template": {"type": "email", "subject": "Hi", "content": "Hello"}}])
    await worker.run_until_idle()
    result = await trigger(api, workflow_name(workflow), [unique("wide") for _ in range(4)])
    wakes = _count_wakes(monkeypatch)

    await _run_until_expanded(worker, app, result["transactionId"])

    assert [job.status for job in await jobs_of(app, result["transactionId"]) if job.kind == "step"] == ["queued"] * 4
    assert len(wakes) == 1


async def test_a_stopped_worker_ends_without_waiting_for_its_poll(app: FastAPI) -> None:
    """``stop`` wakes an idle worker at once (a SIGTERM to ``herald worker`` does not wait for the poll)."""
    import asyncio
    from dataclasses import replace

    from herald.app import build_worker

    idle_worker = build_worker(replace(app.state.settings, worker_poll_seconds=600.0), app.state.sessionmaker)
    idle = asyncio.Event()

    async def idle_timeout() -> float:
        idle.set()  # the worker found nothing to do and is about to sleep, for the whole poll
        return 600.0

    idle_worker._idle_timeout = idle_timeout  # type: ignore[method-assign]
    # Due jobs other tests left behind are not this test's business.
    idle_worker.run_once = _nothing_to_run  # type: ignore[method-assign]
    stop = asyncio.Event()
    running = asyncio.create_task(idle_worker.run_forever(stop))
    await asyncio.wait_for(idle.wait(), 10)
    await asyncio.sleep(0.05)  # let it start sleeping
    stop.set()
    # Far less than the 600 s poll (or the next due job) it would otherwise sleep through.
    await asyncio.wait_for(running, 10)


async def _nothing_to_run() -> int:
    return 0


def _steps_run_apart(monkeypatch: pytest.MonkeyPatch) -> list[Job]:
    """Record the step jobs the runner runs on their own (claimed or handed off), not in an expansion."""
    from herald.engine.runner import JobRunner

    ran: list[Job] = []
    run_steps = JobRunner._run_steps

    async def recorded(self: JobRunner, jobs: list[Job], *args: Any, **kwargs: Any) -> None:
        ran.extend(jobs)
        await run_steps(self, jobs, *args, **kwargs)

    monkeypatch.setattr(JobRunner, "_run_steps", recorded)
    return ran


VIP_ONLY = [{"isNegated": False, "type": "GROUP", "value": "AND", "children": [{"field": "plan", "value": "vip", "operator": "EQUAL", "on": "payload"}]}]


@pytest.mark.parametrize("plan", ["vip", "free"])
async def test_an_in_app_first_step_is_written_finished_by_its_expansion(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch, plan: str
) -> None:
    """The expansion's transaction stores the message (or the skip) and queues the next step."""
    subscriber = await create_subscriber(api, firstName="Ada")
    first = {**IN_APP, "filters": VIP_ONLY}
    workflow = await create_workflow(api, steps=[first, {**IN_APP, "name": "again"}])
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"item": "a book", "plan": plan})
    transaction_id = result["transactionId"]
    ran = _steps_run_apart(monkeypatch)

    await _run_until_expanded(worker, app, transaction_id)

    [settled, second] = [job for job in await jobs_of(app, transaction_id) if job.kind == "step"]
    assert settled.id not in {job.id for job in ran}
    assert (settled.status, settled.attempts, settled.locked_by, settled.locked_until) == (
        "completed" if plan == "vip" else "skipped",
        1,
        worker.worker_id,
        None,
    )
    assert second.status == "queued"  # released by the expansion, for the next round
    stored = await messages_of(app, tenancy.environment_id, transaction_id=transaction_id)
    assert [(m.job_id, m.content) for m in stored if m.job_id == settled.id] == (
        [(settled.id, "Hello Ada, a book")] if plan == "vip" else []
    )
    details = [(d.status, d.detail) for d in await details_of(app, transaction_id) if d.job_id == settled.id]
    assert details[0] == ("Queued", "Step inbox queued; attempt 1")
    assert details[1][0] == "Success"
    expected = "In-app message created" if plan == "vip" else "Step filtered out: "
    assert details[1][1].startswith(expected)
    assert len(details) == 2

    await worker.run_until_idle()
    assert [m.job_id for m in await messages_of(app, tenancy.environment_id, transaction_id=transaction_id)].count(second.id) == 1
    assert [job.status for job in await jobs_of(app, transaction_id) if job.kind == "step"][1] == "completed"


async def test_an_in_app_first_step_that_fails_is_run_on_its_own_and_recorded_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template error is not settled in the expansion: the step's own run fails it, as any failed step."""
    subscriber = await create_subscriber(api)
    broken = {"name": "broken", "template": {"type": "in_app", "content": "{% if %}"}}
    workflow = await create_unchecked_workflow(app, api, steps=[broken, IN_APP])  # the API refuses it now
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"], payload={"item": "x"})
    ran = _steps_run_apart(monkeypatch)

    await worker.run_until_idle()

    [failed, after] = [job for job in await jobs_of(app, result["transactionId"]) if job.kind == "step"]
    assert failed.id in {job.id for job in ran}
    assert (failed.status, after.status) == ("failed", "completed")
    details = [d.detail for d in await details_of(app, result["transactionId"]) if d.job_id == failed.id]
    assert sum(d.startswith("Template error") for d in details) == 1


async def test_handed_off_steps_run_on_the_events_their_expansion_read(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    workflow = await create_workflow(api)
    results = [await trigger(api, workflow_name(workflow), unique("once"), payload={"name": f"N{n}"}) for n in range(3)]
    transaction_ids = {result["transactionId"] for result in results}
    reads: list[str] = []
    get_events = EngineRepository.get_events

    async def counted(self: EngineRepository, event_ids: Any) -> Any:
        event_ids = list(event_ids)
        reads.extend(event_ids)
        return await get_events(self, event_ids)

    monkeypatch.setattr(EngineRepository, "get_events", counted)
    for transaction_id in transaction_ids:
        await _run_until_expanded(worker, app, transaction_id)

    ours = {job.event_id for tid in transaction_ids for job in await jobs_of(app, tid)}
    assert len(ours) == 3
    assert sorted(event_id for event_id in reads if event_id in ours) == sorted(ours)  # each read once
    contents = sorted([m.content for tid in transaction_ids for m in await messages_of(app, tenancy.environment_id, transaction_id=tid)])
    assert contents == ["Hello N0", "Hello N1", "Hello N2"]


def test_a_job_built_from_its_row_reads_as_the_row() -> None:
    row = {"id": "j1", "kind": "step", "status": "running", "event_id": "e1", "data": {"phase": "x"}, "attempts": 1}

    job = job_from_row(dict(row))

    assert {name: getattr(job, name) for name in row} == row
    assert job.notification_id is None  # a column the row does not name reads as unset, as on Job(**row)
    job.status = "completed"
    assert job.status == "completed"


async def test_a_trickle_costs_one_claim_a_round_and_released_steps_still_run_at_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a round that emptied the queue the worker sleeps instead of claiming again.

    What wakes it is the process's signal: the API's commits, and its own when
    a round releases a chain's next step (queue.ring_on_commit). The poll
    (600 s here) and PostgreSQL's NOTIFY (no listener here) are out of the
    picture, so a step left to them would not run within the test.
    """
    import asyncio
    from dataclasses import replace

    from herald.app import build_worker

    settings = replace(app.state.settings, worker_poll_seconds=600.0)
    trickle_worker = build_worker(settings, app.state.sessionmaker, signal=app.state.job_signal)
    trickle_worker.database_url = None  # no LISTEN connection: only this process's signal wakes it
    workflow = await create_workflow(api, steps=[IN_APP, {**IN_APP, "name": "again"}])
    # What other tests left due (and the sweep's and purge's first runs) is not
    # this test's business: run it now, and drop the wake-ups it caused.
    await trickle_worker.run_until_idle()
    await app.state.job_signal.wait(0)
    asleep = asyncio.Event()

    async def poll_never() -> float:
        asleep.set()  # the worker found nothing due and waits for its signal
        return 600.0

    trickle_worker._idle_timeout = poll_never  # type: ignore[method-assign]
    claimed: list[int] = []
    claim_jobs = queue.claim_jobs

    async def counted(*args: Any, **kwargs: Any) -> Any:
        jobs = await claim_jobs(*args, **kwargs)
        if asleep.is_set():  # the claim every worker makes when it starts is not counted
            claimed.append(len(jobs))
        return jobs

    monkeypatch.setattr(queue, "claim_jobs", counted)
    stop = asyncio.Event()
    running = asyncio.create_task(trickle_worker.run_forever(stop))
    try:
        await asyncio.wait_for(asleep.wait(), 10)
        for n in range(3):
            result = await trigger(api, workflow_name(workflow), unique("trickle"), payload={"item": str(n)})
            for _ in range(500):
                if len(await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])) == 2:
                    break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError(f"trigger {n}: both steps were not delivered within 10 s")
    finally:
        stop.set()
        await asyncio.wait_for(running, 10)
        if trickle_worker.http is not None:
            await trickle_worker.http.aclose()

    assert claimed and 0 not in claimed  # every claim found work: none followed a round that emptied the queue


async def test_the_last_step_of_a_chain_releases_nothing(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a step with one after it asks the store to release the next (a statement less per message)."""
    workflow = await create_workflow(api, steps=[IN_APP, {**IN_APP, "active": False, "name": "off"}, {**IN_APP, "name": "last"}])
    result = await trigger(api, workflow_name(workflow), unique("chain"), payload={"item": "x"})
    asked: list[int | None] = []
    queue_next_steps = queue.queue_next_steps

    async def recorded(session: Any, jobs: Any) -> None:
        asked.extend(job.step_index for job in jobs if job.transaction_id == result["transactionId"])
        await queue_next_steps(session, jobs)

    monkeypatch.setattr(queue, "queue_next_steps", recorded)
    await worker.run_until_idle()

    assert len(await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])) == 2
    # The first step ran in its expansion, which wrote the next one queued; the
    # last (step 1: the inactive one has no job) asks the store for nothing.
    assert asked == []


async def test_an_idle_worker_asks_again_once_the_due_time_it_was_given_has_passed(empty_database) -> None:
    """A due time read while a job waited for its claim is stale once the job is claimed.

    Kept until the next poll, it ended every sleep at once: the worker claimed
    over and over and found nothing, for up to a poll interval.
    """
    await upgrade_async(empty_database.url)
    engine = create_engine(empty_database.url)
    sessions = create_sessionmaker(engine)
    idle_worker = Worker(sessionmaker=sessions, box=SecretBox("x" * 32), poll_interval=30.0)
    try:
        now = utcnow()
        waiting = {"id": "job-waiting", "environment_id": "env", "organization_id": "org", "kind": "event", "status": "queued"}
        async with sessions() as session, session.begin():
            session.add(Job(**waiting, event_id="event", transaction_id="txn", run_at=now, created_at=now, updated_at=now))
        # Asked while the job waits: it is due, so no sleep at all.
        assert await idle_worker._idle_timeout() == 0.0
        async with sessions() as session, session.begin():
            [claimed] = await queue.claim_jobs(session, idle_worker.worker_id, 10, 60.0)
        assert claimed.id == "job-waiting"
        # Nothing waits any more: the worker sleeps until its poll, not 0 s again.
        assert await idle_worker._idle_timeout() == 30.0
    finally:
        await idle_worker.http.aclose()  # type: ignore[union-attr]
        await engine.dispose()


async def test_the_stores_only_writer_sleeps_long_while_idle_and_not_past_what_is_due(empty_database) -> None:
    """``herald serve`` on SQLite: every job written rings the signal, so an idle worker's look at the store is rare.

    It sleeps SOLE_WRITER_POLL_SECONDS while nothing rang and no round ran since it read the next due time; a
    ring, a round, or a delayed job due sooner bring the sleep back to the poll interval or the due time.
    """
    await upgrade_async(empty_database.url)
    engine = create_engine(empty_database.url)
    sessions = create_sessionmaker(engine)
    idle_worker = Worker(sessionmaker=sessions, box=SecretBox("x" * 32), poll_interval=0.5, sole_writer=True)
    try:
        # Nothing in the store: read once, then the long sleep.
        assert await idle_worker._idle_timeout() == SOLE_WRITER_POLL_SECONDS
        assert await idle_worker._idle_timeout() == SOLE_WRITER_POLL_SECONDS
        # Jobs were written (the commit rang): the next look is within the poll interval.
        idle_worker.signal.ring()
        assert await idle_worker._idle_timeout() == 0.5
        # A delayed job written since: read at that look, its due time bounds the long sleep.
        now = utcnow()
        delayed = {"id": "job-later", "environment_id": "env", "organization_id": "org", "kind": "event", "status": "delayed"}
        async with sessions() as session, session.begin():
            session.add(Job(**delayed, event_id="event", transaction_id="txn", run_at=now + timedelta(seconds=10), created_at=now, updated_at=now))
        idle_worker._next_due_check = 0.0  # the poll interval has passed
        assert 9.0 < await idle_worker._idle_timeout() <= 10.0
        # A worker that is not the only writer keeps looking every poll interval.
        idle_worker.sole_writer = False
        assert await idle_worker._idle_timeout() == 0.5
    finally:
        await idle_worker.http.aclose()  # type: ignore[union-attr]
        await engine.dispose()


async def test_a_worker_stopped_past_its_grace_queues_its_jobs_again(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """SIGTERM while a step never finishes: the round is cancelled and the job is queued again, due now."""
    import asyncio

    from herald.app import build_worker
    from herald.engine.steps import STEP_RUNNERS

    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[{"name": "stuck", "template": {"type": "sms", "content": "x"}}])
    result = await trigger(api, workflow_name(workflow), subscriber["subscriberId"])
    stopping_worker = build_worker(app.state.settings, app.state.sessionmaker)
    started = asyncio.Event()
    original = STEP_RUNNERS["sms"]

    async def stuck_step(ctx):  # type: ignore[no-untyped-def]
        if ctx.job.transaction_id == result["transactionId"]:
            started.set()
            await asyncio.Event().wait()  # a provider that never answers
        return await original(ctx)

    STEP_RUNNERS["sms"] = stuck_step
    stop = asyncio.Event()
    try:
        running = asyncio.create_task(stopping_worker.run_until_stopped(stop, grace=0.2))
        await asyncio.wait_for(started.wait(), 10)
        stop.set()
        await asyncio.wait_for(running, 10)
    finally:
        STEP_RUNNERS["sms"] = original
    [job] = [j for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"]
    assert (job.status, job.locked_by, job.locked_until) == ("queued", None, None)

    # The next worker takes it at once, without waiting for the lease.
    await worker.run_until_idle()
    [job] = [j for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"]
    assert (job.status, job.locked_by) == ("skipped", worker.worker_id)
