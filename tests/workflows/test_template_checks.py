"""Templates that do not parse, or name a filter that does not exist, are caught when they are saved:
v1 (workflows and layouts) answers 422 naming the field, v2 saves the workflow with the step's issues."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from herald.engine.templates import TemplateProblem, check_template
from herald.engine.worker import Worker
from tests.conftest import Tenancy, assert_error
from tests.engine.conftest import details_of, jobs_of, messages_of, trigger
from tests.fixtures.builders import create_subscriber, create_unchecked_workflow, create_workflow, unique

# Renders today (the branch is never taken), yet names a filter that does not exist.
HIDDEN_TYPO = "Hello{% if false %} {{ payload.name | upcas }}{% endif %}"


def test_check_template_names_the_problem_and_where() -> None:
    assert check_template("Hi {{ subscriber.firstName | upcase }}, {{#if payload.x}}yes{{/if}}") == []
    assert check_template("plain text, no tags") == []
    assert check_template("line one\n  {{ payload.name | upcas }}") == [
        TemplateProblem(2, 21, "unknown filter 'upcas'")
    ]
    [syntax] = check_template("{% iff x %}")
    assert (syntax.line, syntax.column, syntax.message) == (1, 4, "unexpected tag 'iff'")
    [unclosed] = check_template("{{#if payload.x}}yes")
    assert "never closed" in unclosed.message
    [too_long] = check_template("{{ x }}" + "x" * 100_001)
    assert "more than 100,000" in too_long.message
    assert str(TemplateProblem(3, 5, "unknown filter 'x'")) == "unknown filter 'x' (line 3, column 5)"


async def test_v1_create_and_update_answer_422_naming_the_step_and_field(api: httpx.AsyncClient) -> None:
    steps = [
        {"name": "inbox", "template": {"type": "in_app", "content": "fine {{payload.name}}"}},
        {"name": "text", "template": {"type": "sms", "content": HIDDEN_TYPO}},
    ]
    response = await api.post("/v1/workflows", json={"name": unique("typo"), "steps": steps})
    body = assert_error(response, 422)
    assert list(body["errors"]) == ["steps.1.template.content"], body
    [message] = body["errors"]["steps.1.template.content"]["messages"]
    assert "unknown filter 'upcas' (line 1, column 39)" in message

    workflow = await create_workflow(api)
    email = {
        "name": "mail",
        "template": {"type": "email", "subject": "{% if %}", "content": [{"type": "text", "content": "{{ x | nope }}"}]},
    }
    refused = await api.put(f"/v1/workflows/{workflow['_id']}", json={"steps": [email]})
    errors = assert_error(refused, 422)["errors"]
    assert set(errors) == {"steps.0.template.subject", "steps.0.template.content.0.content"}, errors
    in_app = {"name": "inbox", "template": {"type": "in_app", "content": "Hi", "avatar": "{{ x | nope }}", "data": {"link": {"url": "{% if %}"}}}}
    errors = assert_error(await api.put(f"/v1/workflows/{workflow['_id']}", json={"steps": [in_app]}), 422)["errors"]
    assert set(errors) == {"steps.0.template.avatar", "steps.0.template.data.link.url"}, errors
    # Nothing was saved.
    kept = (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"]
    assert kept["steps"][0]["template"]["type"] == "in_app"


async def test_v1_layouts_answer_422_for_an_unknown_filter(api: httpx.AsyncClient) -> None:
    content = "<html><body>{{{body}}}<footer>{{ subscriber.firstName | shout }}</footer></body></html>"
    response = await api.post("/v1/layouts", json={"name": "Brand", "identifier": unique("brand"), "content": content})
    body = assert_error(response, 422)
    assert "unknown filter 'shout'" in body["errors"]["content"]["messages"][0]


def v2_body(**controls: Any) -> dict[str, Any]:
    step = {"name": "Inbox", "stepId": "inbox", "type": "in_app", "controlValues": {"body": "Hi", **controls}}
    return {"name": "Typo", "workflowId": unique("typo"), "steps": [step], "active": True}


async def test_v2_saves_the_workflow_with_the_steps_issues_and_error_status(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v2/workflows", json=v2_body(body=HIDDEN_TYPO, primaryAction={"label": "{% iff %}"})
    )
    assert response.status_code == 201, response.text
    workflow = response.json()["data"]
    assert workflow["status"] == "ERROR"
    issues = workflow["steps"][0]["issues"]
    assert issues == {
        "controls": {
            "body": [
                {"issueType": "ILLEGAL_VARIABLE_IN_CONTROL_VALUE", "message": "unknown filter 'upcas' (line 1, column 39)"}
            ],
            "primaryAction.label": [
                {"issueType": "ILLEGAL_VARIABLE_IN_CONTROL_VALUE", "message": "unexpected tag 'iff' (line 1, column 4)"}
            ],
        }
    }
    read = (await api.get(f"/v2/workflows/{workflow['workflowId']}")).json()["data"]
    assert read["status"] == "ERROR" and read["steps"][0]["issues"] == issues
    listed = (await api.get("/v2/workflows", params={"query": "Typo", "limit": 100})).json()["data"]["workflows"]
    assert {item["workflowId"]: item["status"] for item in listed}[workflow["workflowId"]] == "ERROR"
    in_error = (await api.get("/v2/workflows", params={"status": "ERROR", "limit": 100})).json()["data"]["workflows"]
    active = (await api.get("/v2/workflows", params={"status": "ACTIVE", "limit": 100})).json()["data"]["workflows"]
    assert workflow["workflowId"] in {item["workflowId"] for item in in_error}
    assert workflow["workflowId"] not in {item["workflowId"] for item in active}
    # Fixed, the issues are gone.
    fixed = await api.put(
        f"/v2/workflows/{workflow['_id']}", json={**v2_body(body="Hello {{ payload.name | upcase }}"), "workflowId": None}
    )
    assert fixed.status_code == 200, fixed.text
    assert fixed.json()["data"]["status"] == "ACTIVE" and "issues" not in fixed.json()["data"]["steps"][0]


async def test_a_trigger_fails_a_step_with_issues_at_once_saying_why(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    response = await api.post("/v2/workflows", json=v2_body(body=HIDDEN_TYPO))
    assert response.status_code == 201, response.text
    subscriber = await create_subscriber(api)
    result = await trigger(api, response.json()["data"]["workflowId"], subscriber["subscriberId"])
    await worker.run_until_idle()
    assert [job.status for job in await jobs_of(app, result["transactionId"]) if job.kind == "step"] == ["failed"]
    details = [detail.detail for detail in await details_of(app, result["transactionId"])]
    assert "Template error: body: unknown filter 'upcas' (line 1, column 39)" in details, details
    assert await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"]) == []


async def test_a_stored_workflow_with_such_a_template_keeps_working_and_shows_the_error(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    steps = [{"name": "inbox", "template": {"type": "in_app", "content": HIDDEN_TYPO}}]
    made = await create_unchecked_workflow(app, api, steps=steps)
    subscriber = await create_subscriber(api)
    identifier = made["triggers"][0]["identifier"]
    result = await trigger(api, identifier, subscriber["subscriberId"])
    await worker.run_until_idle()
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert [message.content for message in messages] == ["Hello"]
    read = (await api.get(f"/v2/workflows/{identifier}")).json()["data"]
    assert read["status"] == "ERROR"
    assert read["steps"][0]["issues"]["controls"]["body"][0]["message"].startswith("unknown filter 'upcas'")
