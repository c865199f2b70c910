"""The http_request and custom steps (herald/engine/steps/http_request.py, custom.py) against local servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.responses import JSONResponse, Response

from herald.app import build_worker
from herald.engine.worker import Worker
from tests.conftest import Tenancy, assert_error
from tests.engine.conftest import details_of, jobs_of, messages_of, trigger
from tests.fixtures.builders import create_subscriber, unique
from tests.fixtures.peers import HttpPeer, RecordedRequest

IN_APP = {"name": "Inbox", "stepId": "inbox", "type": "in_app", "controlValues": {"body": "Order {{payload.order}}"}}


@pytest.fixture
def peer() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    yield server
    server.stop()


def http_step(url: str, **controls: Any) -> dict[str, Any]:
    return {
        "name": "Call",
        "stepId": "call",
        "type": "http_request",
        "controlValues": {"method": "POST", "url": url, **controls},
    }


async def workflow_with(api: httpx.AsyncClient, *steps: dict[str, Any]) -> str:
    workflow_id = unique("http")
    response = await api.post(
        "/v2/workflows", json={"name": "Calls", "workflowId": workflow_id, "steps": list(steps), "active": True}
    )
    assert response.status_code == 201, response.text
    return workflow_id


def http_job(jobs: list[Any]) -> Any:
    [job] = [job for job in jobs if job.step_type == "http_request"]
    return job


async def test_the_step_sends_the_rendered_request_and_keeps_the_answer(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    peer.route("POST", "/orders/{order}", lambda request: JSONResponse({"accepted": True}, status_code=201))
    step = http_step(
        f"{peer.url}/orders/{{{{payload.order}}}}?token=secret",
        headers=[{"key": "X-Order", "value": "{{payload.order}}"}, {"key": "Host", "value": "evil.example"}],
        body='{"email": "{{subscriber.email}}", "order": "{{payload.order}}"}',
        responseBodySchema={"type": "object", "required": ["accepted"]},
        enforceSchemaValidation=True,
    )
    workflow_id = await workflow_with(api, step, IN_APP)
    subscriber = await create_subscriber(api, email="ada@example.com")
    result = await trigger(api, workflow_id, subscriber["subscriberId"], payload={"order": "A-1"})
    await worker.run_until_idle()

    [sent] = peer.requests_to("/orders/")
    assert (sent.method, sent.path, sent.query) == ("POST", "/orders/A-1", {"token": "secret"})
    assert sent.headers["x-order"] == "A-1" and sent.headers["host"] == f"127.0.0.1:{peer.port}"
    assert sent.headers["content-type"] == "application/json"
    assert json.loads(sent.body) == {"email": "ada@example.com", "order": "A-1"}
    job = http_job(await jobs_of(app, result["transactionId"]))
    assert job.status == "completed"
    assert job.result["statusCode"] == 201 and job.result["body"] == {"accepted": True}
    texts = [d.detail for d in await details_of(app, result["transactionId"]) if d.job_id == job.id]
    assert f"POST {peer.url}/orders/A-1 answered 201" in texts and not any("secret" in text for text in texts)
    # The step after it ran.
    assert [
        m.content for m in await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    ] == ["Order A-1"]


async def test_a_refusal_fails_the_step_and_stops_the_workflow_unless_told_to_go_on(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    peer.route("POST", "/refuse", lambda request: JSONResponse({"error": "no"}, status_code=400))
    failing = await workflow_with(api, http_step(f"{peer.url}/refuse"), IN_APP)
    going_on = await workflow_with(api, http_step(f"{peer.url}/refuse", continueOnFailure=True), IN_APP)
    subscriber = await create_subscriber(api)
    stopped = await trigger(api, failing, subscriber["subscriberId"], payload={"order": "B-2"})
    continued = await trigger(api, going_on, subscriber["subscriberId"], payload={"order": "C-3"})
    await worker.run_until_idle()

    job = http_job(await jobs_of(app, stopped["transactionId"]))
    assert job.status == "failed" and job.attempts == 1  # a 4xx is not tried again
    assert "answered 400" in (job.error_text or "")
    assert await messages_of(app, tenancy.environment_id, transaction_id=stopped["transactionId"]) == []
    job = http_job(await jobs_of(app, continued["transactionId"]))
    assert job.status == "completed"
    warnings = [d for d in await details_of(app, continued["transactionId"]) if d.job_id == job.id]
    assert any(d.status == "Warning" and "continueOnFailure" in d.detail for d in warnings)
    assert len(await messages_of(app, tenancy.environment_id, transaction_id=continued["transactionId"])) == 1


async def test_a_server_error_is_tried_again(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    answers = iter([503, 200])

    def flaky(request: RecordedRequest) -> Response:
        return JSONResponse({"ok": True}, status_code=next(answers))

    peer.route("POST", "/flaky", flaky)
    workflow_id = await workflow_with(api, http_step(f"{peer.url}/flaky"))
    subscriber = await create_subscriber(api)
    result = await trigger(api, workflow_id, subscriber["subscriberId"])
    for _ in range(20):
        await worker.run_until_idle()
        job = http_job(await jobs_of(app, result["transactionId"]))
        if job.status in ("completed", "failed"):
            break
    assert job.status == "completed" and job.attempts == 2
    assert len(peer.requests_to("/flaky")) == 2


async def test_an_address_the_outbound_policy_refuses_is_not_called(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, peer: HttpPeer
) -> None:
    peer.route("POST", "/inside", lambda request: JSONResponse({}))
    workflow_id = await workflow_with(api, http_step(f"{peer.url}/inside"))
    subscriber = await create_subscriber(api)
    result = await trigger(api, workflow_id, subscriber["subscriberId"])
    strict = build_worker(
        replace(app.state.settings, outbound_allow=(), retry_base_seconds=0.01), app.state.sessionmaker
    )
    try:
        await strict.run_until_idle()
    finally:
        if strict.http is not None:
            await strict.http.aclose()
    job = http_job(await jobs_of(app, result["transactionId"]))
    assert job.status == "failed" and peer.requests_to("/inside") == []
    assert "127.0.0.1" in (job.error_text or "")


async def test_controls_are_checked_when_the_workflow_is_saved(api: httpx.AsyncClient) -> None:
    bad = {
        "name": "Call",
        "type": "http_request",
        "controlValues": {"method": "TRACE", "headers": [{"key": "X"}], "responseBodySchema": {"type": 5}},
    }
    response = await api.post("/v2/workflows", json={"name": "Bad", "workflowId": unique("bad"), "steps": [bad]})
    errors = assert_error(response, 422)["errors"]
    for field in ("method", "url", "headers.0", "responseBodySchema"):
        assert f"steps.0.controlValues.{field}" in errors, errors


async def test_a_custom_step_passes_its_controls_on(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """A custom step of a workflow made through the API has no bridge code: its controls are its output, as in Novu."""
    custom = {"name": "Tag", "stepId": "tag", "type": "custom", "controlValues": {"custom": {"segment": "vip"}}}
    workflow_id = await workflow_with(api, custom, IN_APP)
    subscriber = await create_subscriber(api)
    result = await trigger(api, workflow_id, subscriber["subscriberId"], payload={"order": "D-4"})
    await worker.run_until_idle()
    [job] = [job for job in await jobs_of(app, result["transactionId"]) if job.step_type == "custom"]
    assert job.status == "completed" and job.result == {"segment": "vip"}
    assert len(await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])) == 1
    read = (await api.get(f"/v2/workflows/{workflow_id}")).json()["data"]
    assert read["steps"][0]["type"] == "custom" and read["steps"][0]["controlValues"] == {"custom": {"segment": "vip"}}
