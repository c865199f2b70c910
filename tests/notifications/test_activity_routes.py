"""What Novu's dashboard reads: GET /v1/activity/workflow-runs (+ /{id}) and GET /v1/activity/charts.

Runs are written to the store as the engine writes them (tests/notifications/test_routes.py record_run);
the charts' messages by the real worker.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from herald.app import build_worker
from herald.kit.time import isoformat, utcnow
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.notifications.test_routes import TWO_CHANNEL_STEPS, record_run

IN_APP = [{"name": "inbox", "template": {"type": "in_app", "content": "Hello {{payload.name}}"}}]


async def runs(api: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await api.get("/v1/activity/workflow-runs", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def test_workflow_runs_are_listed_newest_first_with_keyset_pages_and_filters(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    workflow = await create_workflow(api, steps=TWO_CHANNEL_STEPS)
    ada, bob = await create_subscriber(api), await create_subscriber(api)
    now = utcnow()
    oldest = await record_run(app, workflow, ada, created_at=now - timedelta(minutes=3))
    failed = await record_run(
        app, workflow, bob, created_at=now - timedelta(minutes=2), statuses=["completed", "failed"]
    )
    pending = await record_run(
        app, workflow, ada, created_at=now - timedelta(minutes=1), statuses=["completed", "queued"]
    )

    first = await runs(api, limit=2)
    assert [run["id"] for run in first["data"]] == [pending["notification_id"], failed["notification_id"]]
    assert first["hasMore"] is True and first["pageSize"] == 2 and first["previousCursor"] is None
    newest = first["data"][0]
    assert newest["status"] == "pending" and newest["deliveryLifecycleStatus"] == "pending"
    assert newest["workflowId"] == workflow["_id"] and newest["workflowName"] == workflow["name"]
    assert newest["triggerIdentifier"] == workflow["triggers"][0]["identifier"]
    assert newest["externalSubscriberId"] == ada["subscriberId"] and newest["internalSubscriberId"] == ada["_id"]
    assert newest["channels"] == ["email", "in_app"] and newest["isDigest"] is False
    assert first["data"][1]["status"] == "error" and first["data"][1]["deliveryLifecycleStatus"] == "errored"
    second = await runs(api, limit=2, cursor=first["nextCursor"])
    assert [run["id"] for run in second["data"]] == [oldest["notification_id"]]
    assert second["hasMore"] is False and second["nextCursor"] is None
    assert second["data"][0]["status"] == "success" and second["data"][0]["deliveryLifecycleStatus"] == "sent"

    errors = await runs(api, statuses="error")
    assert [run["id"] for run in errors["data"]] == [failed["notification_id"]]
    of_bob = await runs(api, **{"subscriberIds[]": bob["subscriberId"]})
    assert [run["id"] for run in of_bob["data"]] == [failed["notification_id"]]
    by_transaction = await runs(api, transactionIds=oldest["transaction_id"])
    assert [run["id"] for run in by_transaction["data"]] == [oldest["notification_id"]]
    since = await runs(api, createdGte=isoformat(now - timedelta(seconds=90)))
    assert [run["id"] for run in since["data"]] == [pending["notification_id"]]
    assert_error(await api.get("/v1/activity/workflow-runs", params={"statuses": "exploded"}), 422)
    assert_error(await api.get("/v1/activity/workflow-runs", params={"limit": 101}), 422)


async def test_a_workflow_run_has_its_steps_and_their_execution_details(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    workflow = await create_workflow(api, steps=TWO_CHANNEL_STEPS)
    ada = await create_subscriber(api)
    details = {1: [{"status": "Failed", "detail": "Provider refused", "source": "Internal", "provider_id": "sendgrid"}]}
    recorded = await record_run(app, workflow, ada, statuses=["completed", "failed"], details=details)
    response = await api.get(f"/v1/activity/workflow-runs/{recorded['notification_id']}")
    assert response.status_code == 200, response.text
    run = response.json()["data"]
    assert run["id"] == recorded["notification_id"] and run["status"] == "error"
    assert run["payload"] == {"name": "Ada"} and run["overrides"] == {"email": {"replyTo": "help@example.com"}}
    assert [(step["stepRunId"], step["stepType"], step["status"]) for step in run["steps"]] == [
        (recorded["job_ids"][0], "in_app", "completed"),
        (recorded["job_ids"][1], "email", "failed"),
    ]
    [detail] = run["steps"][1]["executionDetails"]
    assert (detail["_id"], detail["status"], detail["detail"]) == (
        recorded["detail_ids"][0],
        "Failed",
        "Provider refused",
    )
    assert_error(await api.get("/v1/activity/workflow-runs/000000000000000000000000"), 404)
    # Another environment's key does not see it.
    assert_error(await production_api.get(f"/v1/activity/workflow-runs/{recorded['notification_id']}"), 404)


async def test_charts_answer_each_report_type_from_the_same_counts(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    workflow = await create_workflow(api, steps=IN_APP)
    ada, bob = await create_subscriber(api), await create_subscriber(api)
    for subscriber in (ada, bob, ada):
        response = await api.post(
            "/v1/events/trigger",
            json={
                "name": workflow["triggers"][0]["identifier"],
                "to": subscriber["subscriberId"],
                "payload": {"name": "x"},
            },
        )
        assert response.status_code == 201, response.text
    worker = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    try:
        await worker.run_until_idle()
    finally:
        if worker.http is not None:
            await worker.http.aclose()
    messages = (await api.get("/v1/messages", params={"subscriberId": ada["subscriberId"]})).json()["data"]
    seen = await api.post(
        f"/v1/subscribers/{ada['subscriberId']}/messages/mark-as",
        json={"messageId": messages[0]["_id"], "markAs": "seen"},
    )
    assert seen.status_code == 201, seen.text

    report_types = [
        "delivery-trend",
        "interaction-trend",
        "workflow-by-volume",
        "provider-by-volume",
        "messages-delivered",
        "active-subscribers",
        "avg-messages-per-subscriber",
        "workflow-runs-metric",
        "total-interactions",
        "workflow-runs-trend",
        "active-subscribers-trend",
        "workflow-runs-count",
    ]
    response = await api.get("/v1/activity/charts", params={"reportType": report_types})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert sorted(data) == sorted(report_types)
    today = utcnow().date().isoformat()
    assert len(data["delivery-trend"]) == 8 and data["delivery-trend"][-1] == {
        "timestamp": today,
        "inApp": 3,
        "email": 0,
        "sms": 0,
        "chat": 0,
        "push": 0,
    }
    assert data["interaction-trend"][-1]["messageSent"] == 3 and data["interaction-trend"][-1]["messageSeen"] == 1
    assert data["workflow-by-volume"] == [{"workflowName": workflow["name"], "count": 3}]
    assert data["provider-by-volume"] == [{"providerId": "novu", "count": 3}]
    assert data["messages-delivered"] == {"currentPeriod": 3, "previousPeriod": 0}
    assert data["active-subscribers"] == {"currentPeriod": 2, "previousPeriod": 0}
    assert data["avg-messages-per-subscriber"] == {"currentPeriod": 1.5, "previousPeriod": 0}
    assert data["workflow-runs-metric"] == {"currentPeriod": 3, "previousPeriod": 0}
    assert data["total-interactions"] == {"currentPeriod": 1, "previousPeriod": 0}
    assert data["workflow-runs-trend"][-1] == {"timestamp": today, "pending": 0, "success": 3, "error": 0}
    assert data["workflow-runs-count"] == {"count": 3}
    assert data["active-subscribers-trend"][-1]["timestamp"] == today

    one = await api.get("/v1/activity/charts", params={"reportType[]": "messages-delivered"})
    assert one.status_code == 200 and list(one.json()["data"]) == ["messages-delivered"]
    assert_error(await api.get("/v1/activity/charts"), 422)
    assert_error(await api.get("/v1/activity/charts", params={"reportType": "pie"}), 422)
    backwards = {
        "reportType": "messages-delivered",
        "createdAtGte": isoformat(utcnow()),
        "createdAtLte": "2020-01-01T00:00:00Z",
    }
    assert_error(await api.get("/v1/activity/charts", params=backwards), 400)
