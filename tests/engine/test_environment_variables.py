"""{{env.KEY}} in step templates: the variable's value for the environment of the run."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from herald.engine.worker import Worker
from tests.conftest import Tenancy
from tests.engine.conftest import jobs_of, messages_of, set_aside_other_jobs, statements_while, trigger
from tests.fixtures.builders import create_subscriber, create_workflow


async def _variable(api: httpx.AsyncClient, key: str, values: dict[str, str], *, secret: bool = False) -> None:
    body = {
        "key": key,
        "isSecret": secret,
        "values": [{"_environmentId": env, "value": v} for env, v in values.items()],
    }
    response = await api.post("/v1/environment-variables", json=body)
    assert response.status_code == 200, response.text


async def test_env_variables_render_with_the_value_of_the_runs_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    # Production is protected: its own key sets its value (Development's too, which is not).
    await _variable(
        production_api,
        "BASE_URL",
        {tenancy.environment_id: "https://dev.test", tenancy.production_environment_id: "https://prod.test"},
    )
    await _variable(api, "TOKEN", {tenancy.environment_id: "dev-token-123"}, secret=True)
    # The first in-app step runs within the expansion, the second as a step job of its own: both read env.
    steps = [
        {"name": "first", "template": {"type": "in_app", "content": "Open {{env.BASE_URL}}/a?t={{ env.TOKEN }}"}},
        {"name": "second", "template": {"type": "in_app", "content": "{{env.BASE_URL}}/b [{{env.MISSING}}]"}},
    ]
    workflow = await create_workflow(api, steps=steps)
    identifier = workflow["triggers"][0]["identifier"]
    # env.* are not payload variables the trigger must send.
    assert [v["name"] for v in workflow["triggers"][0]["variables"]] == []
    subscriber = await create_subscriber(api)
    result = await trigger(api, identifier, subscriber["subscriberId"])
    for _ in range(5):
        await worker.run_until_idle()
    assert {job.status for job in await jobs_of(app, result["transactionId"])} == {"completed"}
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert sorted(m.content for m in messages) == ["Open https://dev.test/a?t=dev-token-123", "https://dev.test/b []"]

    # Published to Production, the same workflow renders Production's values (and none for TOKEN there).
    published = await production_api.post(
        f"/v2/environments/{tenancy.production_environment_id}/publish", json={"sourceEnvironmentId": tenancy.environment_id}
    )
    assert published.status_code == 200, published.text
    prod_subscriber = await create_subscriber(production_api)
    result = await trigger(production_api, identifier, prod_subscriber["subscriberId"])
    for _ in range(5):
        await worker.run_until_idle()
    messages = await messages_of(app, tenancy.production_environment_id, transaction_id=result["transactionId"])
    assert sorted(m.content for m in messages) == ["Open https://prod.test/a?t=", "https://prod.test/b []"]


async def test_steps_that_do_not_name_env_read_no_variables(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    await _variable(api, "BASE_URL", {tenancy.environment_id: "https://dev.test"})
    plain = await create_workflow(api, steps=[{"name": "inbox", "template": {"type": "in_app", "content": "Hello"}}])
    subscriber = await create_subscriber(api)
    result = await trigger(api, plain["triggers"][0]["identifier"], subscriber["subscriberId"])
    await set_aside_other_jobs(app, tenancy.environment_id)
    reads = await statements_while(app, worker.run_until_idle(), lambda sql: "environment_variables" in sql)
    assert reads == []
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert [m.content for m in messages] == ["Hello"]


async def test_env_variables_count_toward_the_steps_output_limit(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    # Each render stayed within 1,000,000 bytes, but a step renders several parts: their sum had no bound.
    await _variable(api, "TEN_THOUSAND", {tenancy.environment_id: "x" * 10_000})
    six_hundred_kb = "{% for i in (1..60) %}{{env.TEN_THOUSAND}}{% endfor %}"
    steps = [
        {"name": "parts", "template": {"type": "in_app", "content": six_hundred_kb, "data": {"more": six_hundred_kb}}},
        {"name": "one", "template": {"type": "in_app", "content": six_hundred_kb, "data": {"less": "{{env.TEN_THOUSAND}}"}}},
    ]
    workflow = await create_workflow(api, steps=steps)
    subscriber = await create_subscriber(api)
    result = await trigger(api, workflow["triggers"][0]["identifier"], subscriber["subscriberId"])
    for _ in range(5):
        await worker.run_until_idle()
    parts, one = [job for job in await jobs_of(app, result["transactionId"]) if job.step_type == "in_app"]
    assert (parts.status, parts.attempts) == ("failed", 1), (parts.status, parts.error_text)
    assert "the step's output exceeds 1,000,000 bytes, all its parts together (render limit)" in (parts.error_text or "")
    assert one.status == "completed"
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert len(message.content) == 600_000
