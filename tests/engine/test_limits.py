"""A workflow whose template or filter goes past a limit (docs/templates.md and docs/filters.md, "Limits")
fails that step for good, at its first attempt, with the limit named in the job's error and execution details;
the workflow goes on as after any failed step."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from herald.engine.worker import Worker
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, messages_of, trigger
from tests.engine.test_failures import name_of, settle
from tests.fixtures.builders import create_subscriber, create_workflow

BOMB = '{% assign s = "aa" %}{% for i in (1..31) %}{% assign s = s | append: s %}{% endfor %}{{ s }}'
CPU = "{% for i in (1..9000) %}{% assign u = payload.big | upcase %}{% endfor %}done"
LOOPS = "{% for i in (1..6000) %}{% endfor %}{% for i in (1..6000) %}{% endfor %}"
AFTER = {"name": "after", "template": {"type": "in_app", "content": "still delivered"}}


def like_filter(pattern: str) -> list[dict[str, Any]]:
    return [{"isNegated": False, "type": "GROUP", "value": "AND",
             "children": [{"on": "payload", "field": "text", "operator": "LIKE", "value": pattern}]}]


async def test_steps_past_a_limit_fail_for_good_with_the_limit_named(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber = await create_subscriber(api, phone="+15550004")
    workflow = await create_workflow(
        api,
        steps=[
            {"name": "bomb", "template": {"type": "in_app", "content": BOMB}},
            {"name": "cpu", "template": {"type": "in_app", "content": CPU}},
            {"name": "loops", "template": {"type": "sms", "content": LOOPS}},
            {"name": "like", "template": {"type": "in_app", "content": "x"}, "filters": like_filter("{{payload.pattern}}")},
            AFTER,
        ],
    )
    payload = {"big": "x" * 1_000_000, "text": "a" * 200, "pattern": "%a" * 600 + "%b"}
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload=payload)

    bomb, cpu, loops, like, after = await settle(worker, app, result["transactionId"])

    expected = {
        bomb: "append would make a string of 1,048,576 characters, more than 1,000,000 (render limit)",
        cpu: "render took more than 250 ms of CPU (render limit)",
        loops: "loop iteration limit of 10,000 reached (render limit)",
        like: "LIKE pattern has 1,202 characters, more than 1,000 (filter limit)",
    }
    details = await details_of(app, result["transactionId"])
    for job, limit in expected.items():
        assert (job.status, job.attempts) == ("failed", 1), (job.step_type, job.status, job.attempts, job.error_text)
        assert limit in job.error_text
        assert any(d.job_id == job.id and d.status == "Failed" and limit in d.detail for d in details), limit
    assert after.status == "completed"
    [inbox] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"], channel="in_app")
    assert inbox.content == "still delivered"


async def test_a_pathological_like_from_the_payload_is_answered_and_the_step_runs(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    # '%a%a%a%a%a%a%b' against 200 'a' held the worker 11 s to 82 s, past its lease.
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(
        api,
        steps=[
            {"name": "like", "template": {"type": "in_app", "content": "like"}, "filters": like_filter("{{payload.pattern}}")},
            {"name": "unlike", "template": {"type": "in_app", "content": "unlike"},
             "filters": [{**like_filter("{{payload.pattern}}")[0], "isNegated": True}]},
        ],
    )
    payload = {"text": "a" * 200, "pattern": "%a%a%a%a%a%a%b"}
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload=payload)

    like, unlike = await settle(worker, app, result["transactionId"])

    assert (like.status, unlike.status) == ("skipped", "completed")
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"], channel="in_app")
    assert message.content == "unlike"
