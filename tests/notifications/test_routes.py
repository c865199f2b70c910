"""The activity feed: GET /v1/notifications, /{notificationId}, /stats and /graph/stats.

Runs are written straight to the store (the engine makes them in production),
except in the end-to-end test, which runs the real worker.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from novu_py import Novu
from novu_py.models import ActivitiesResponseDto, ActivityNotificationResponseDto
from sqlalchemy import event

from herald.kit import pagination
from herald.kit.ids import new_id
from herald.kit.time import isoformat, utcnow
from herald.models import Event, ExecutionDetail, Job, Notification
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_subscriber, create_workflow, unique
from tests.fixtures.server import running_server

TWO_CHANNEL_STEPS = [
    {"name": "inbox", "template": {"type": "in_app", "content": "Hello {{payload.name}}"}},
    {"name": "mail", "template": {"type": "email", "subject": "Hi", "content": "Hello {{payload.name}}"}},
]


async def record_run(
    app: FastAPI,
    workflow: dict[str, Any],
    subscriber: dict[str, Any],
    *,
    created_at: datetime | None = None,
    transaction_id: str | None = None,
    payload: dict[str, Any] | None = None,
    statuses: list[str] | None = None,
    details: dict[int, list[dict[str, Any]]] | None = None,
    merged_into: str | None = None,
) -> dict[str, Any]:
    """An accepted event of ``workflow`` for ``subscriber``, with its notification, one job per
    step and the given execution details (by step index). Returns the ids written."""
    created_at = created_at or utcnow()
    transaction_id = transaction_id or unique("txn")
    payload = {"name": "Ada"} if payload is None else payload
    scope = {"environment_id": subscriber["_environmentId"], "organization_id": subscriber["_organizationId"]}
    steps = workflow["steps"]
    channels = sorted({step["template"]["type"] for step in steps} & {"in_app", "email", "sms", "chat", "push"})
    event_row = Event(
        id=new_id(),
        **scope,
        transaction_id=transaction_id,
        workflow_id=workflow["_id"],
        trigger_identifier=workflow["triggers"][0]["identifier"],
        steps=steps,
        recipients=[{"type": "Subscriber", "subscriberId": subscriber["subscriberId"]}],
        payload=payload,
        overrides={"email": {"replyTo": "help@example.com"}},
        status="processed",
        created_at=created_at,
    )
    notification = Notification(
        id=new_id(),
        **scope,
        event_id=event_row.id,
        workflow_id=workflow["_id"],
        subscriber_id=subscriber["_id"],
        transaction_id=transaction_id,
        channels=channels,
        to={"subscriberId": subscriber["subscriberId"]},
        payload=payload,
        created_at=created_at,
    )
    jobs = [
        Job(
            id=new_id(),
            **scope,
            kind="step",
            status=(statuses or ["completed"] * len(steps))[index],
            event_id=event_row.id,
            transaction_id=transaction_id,
            workflow_id=workflow["_id"],
            notification_id=notification.id,
            subscriber_id=subscriber["_id"],
            step_id=step["_id"],
            step_type=step["template"]["type"],
            step_index=index,
            merged_into=merged_into if step["template"]["type"] == "digest" else None,
            created_at=created_at,
            updated_at=created_at + timedelta(seconds=index + 1),
        )
        for index, step in enumerate(steps)
    ]
    detail_rows = [
        ExecutionDetail(
            id=new_id(),
            **scope,
            job_id=jobs[index].id,
            notification_id=notification.id,
            subscriber_id=subscriber["_id"],
            transaction_id=transaction_id,
            channel=jobs[index].step_type,
            created_at=created_at + timedelta(milliseconds=position),
            **fields,
        )
        for index, entries in (details or {}).items()
        for position, fields in enumerate(entries)
    ]
    async with app.state.sessionmaker() as session:
        session.add_all([event_row, notification, *jobs, *detail_rows])
        await session.commit()
    return {
        "notification_id": notification.id,
        "transaction_id": transaction_id,
        "job_ids": [job.id for job in jobs],
        "detail_ids": [row.id for row in detail_rows],
    }


async def list_activity(api: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await api.get("/v1/notifications", params=params)
    assert response.status_code == 200, response.text
    body = response.json()
    ActivitiesResponseDto.model_validate(body)
    for item in body["data"]:
        ActivityNotificationResponseDto.model_validate(item)
    return body


def ids(body: dict[str, Any]) -> list[str]:
    return [item["_id"] for item in body["data"]]


async def test_item_shape_parses_with_the_sdk_models(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    workflow = await create_workflow(api, steps=TWO_CHANNEL_STEPS)
    subscriber = await create_subscriber(api, lastName="Lovelace", phone="+15555550100")
    run = await record_run(
        app,
        workflow,
        subscriber,
        statuses=["completed", "failed"],
        details={
            0: [{"status": "Queued", "detail": "Step inbox queued"}, {"status": "Success", "detail": "Message created", "provider_id": "novu"}],
            1: [
                {"status": "Queued", "detail": "Step mail queued"},
                {
                    "status": "Failed",
                    "detail": "Delivery failed: bad key",
                    "provider_id": "sendgrid",
                    "raw": {"errors": [{"message": "bad key"}]},
                    "is_retry": True,
                },
            ],
        },
    )

    body = await list_activity(api)
    assert body["totalCount"] == 1 and body["pageSize"] == 10 and body["page"] == 0 and body["hasMore"] is False
    [item] = body["data"]
    assert item["_id"] == run["notification_id"]
    assert item["_environmentId"] == tenancy.environment_id
    assert item["_organizationId"] == tenancy.organization_id
    assert item["_subscriberId"] == subscriber["_id"]
    assert item["_templateId"] == workflow["_id"]
    assert item["transactionId"] == run["transaction_id"]
    assert item["channels"] == ["email", "in_app"]
    assert item["payload"] == {"name": "Ada"}
    assert item["to"] == {"subscriberId": subscriber["subscriberId"]}
    assert item["createdAt"].endswith("Z")
    assert "_digestedNotificationId" not in item
    assert item["subscriber"] == {
        "_id": subscriber["_id"],
        "subscriberId": subscriber["subscriberId"],
        "firstName": "Ada",
        "lastName": "Lovelace",
        "email": "ada@example.com",
        "phone": "+15555550100",
    }
    assert item["template"] == {
        "_id": workflow["_id"],
        "name": workflow["name"],
        "triggers": [
            {"type": "event", "identifier": workflow["triggers"][0]["identifier"], "variables": [{"name": "name"}]}
        ],
    }

    inbox, mail = item["jobs"]
    assert [inbox["_id"], mail["_id"]] == run["job_ids"]
    assert (inbox["type"], inbox["status"], inbox["providerId"]) == ("in_app", "completed", "novu")
    assert (mail["type"], mail["status"], mail["providerId"]) == ("email", "failed", "sendgrid")
    assert mail["overrides"] == {"email": {"replyTo": "help@example.com"}}
    assert mail["payload"] == {"name": "Ada"}
    assert mail["updatedAt"].endswith("Z")
    # The step is the snapshot the event took of the workflow.
    assert mail["step"]["_id"] == workflow["steps"][1]["_id"]
    assert mail["step"]["_templateId"] == workflow["steps"][1]["_templateId"]
    assert mail["step"]["template"]["type"] == "email"
    assert mail["step"]["active"] is True and mail["step"]["filters"] == []

    queued, failed = mail["executionDetails"]
    assert [queued["_id"], failed["_id"]] == run["detail_ids"][2:]
    assert queued == {
        "_id": queued["_id"],
        "_jobId": mail["_id"],
        "_notificationId": run["notification_id"],
        "_subscriberId": subscriber["_id"],
        "status": "Queued",
        "detail": "Step mail queued",
        "isRetry": False,
        "isTest": False,
        "source": "Internal",
        "createdAt": queued["createdAt"],
    }
    assert failed["providerId"] == "sendgrid"
    assert failed["isRetry"] is True
    assert json.loads(failed["raw"]) == {"errors": [{"message": "bad key"}]}

    parsed = ActivityNotificationResponseDto.model_validate(item)
    assert parsed.jobs is not None and parsed.jobs[1].execution_details[1].status.value == "Failed"

    one = await api.get(f"/v1/notifications/{run['notification_id']}")
    assert one.status_code == 200, one.text
    assert one.json() == {"data": item}


async def test_pagination_newest_first(api: httpx.AsyncClient, app: FastAPI) -> None:
    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    start = utcnow() - timedelta(hours=1)
    runs = [await record_run(app, workflow, subscriber, created_at=start + timedelta(minutes=i)) for i in range(5)]
    newest_first = [run["notification_id"] for run in reversed(runs)]

    first = await list_activity(api, limit=2)
    assert (first["page"], first["pageSize"], first["totalCount"], first["hasMore"]) == (0, 2, 5, True)
    assert ids(first) == newest_first[:2]
    second = await list_activity(api, limit=2, page=1)
    assert ids(second) == newest_first[2:4] and second["hasMore"] is True
    last = await list_activity(api, limit=2, page=2)
    assert ids(last) == newest_first[4:] and last["hasMore"] is False
    beyond = await list_activity(api, limit=2, page=3)
    assert (beyond["data"], beyond["totalCount"], beyond["hasMore"]) == ([], 5, False)

    assert_error(await api.get("/v1/notifications", params={"limit": 101}), 422)
    assert_error(await api.get("/v1/notifications", params={"page": -1}), 422)


async def test_total_count_stops_a_bound_past_the_page(
    api: httpx.AsyncClient, app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """totalCount counts at most COUNT_AHEAD notifications past the page; hasMore stays exact."""
    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    start = utcnow() - timedelta(hours=1)
    for minute in range(9):
        await record_run(app, workflow, subscriber, created_at=start + timedelta(minutes=minute))
    monkeypatch.setattr(pagination, "COUNT_AHEAD", 2)
    first = await list_activity(api, limit=3)
    assert (len(first["data"]), first["totalCount"], first["hasMore"]) == (3, 5, True)
    last = await list_activity(api, limit=3, page=2)
    assert (len(last["data"]), last["totalCount"], last["hasMore"]) == (3, 9, False)
    # Narrowed to the subscriber, the runs are counted whole.
    narrowed = await list_activity(api, limit=3, subscriberIds=subscriber["subscriberId"])
    assert (narrowed["totalCount"], narrowed["hasMore"]) == (9, True)
    monkeypatch.undo()
    assert (await list_activity(api, limit=3))["totalCount"] == 9


async def test_filters(api: httpx.AsyncClient, app: FastAPI) -> None:
    in_app = await create_workflow(api)
    email = await create_workflow(api, steps=[{"name": "mail", "template": {"type": "email", "subject": "Hi", "content": "Hello"}}])
    ada = await create_subscriber(api)
    grace = await create_subscriber(api, email="grace@example.com", firstName="Grace")
    now = utcnow()
    old = await record_run(app, in_app, ada, created_at=now - timedelta(days=3))
    mail = await record_run(app, email, ada, created_at=now - timedelta(days=2))
    grace_run = await record_run(app, in_app, grace, created_at=now - timedelta(days=1))

    assert ids(await list_activity(api, channels="email")) == [mail["notification_id"]]
    assert set(ids(await list_activity(api, channels=["email", "in_app"]))) == {
        old["notification_id"], mail["notification_id"], grace_run["notification_id"]
    }
    assert ids(await list_activity(api, channels="sms")) == []

    assert ids(await list_activity(api, subscriberIds=grace["subscriberId"])) == [grace_run["notification_id"]]
    assert ids(await list_activity(api, subscriberIds=[ada["subscriberId"], "nobody"])) == [
        mail["notification_id"], old["notification_id"]
    ]
    assert ids(await list_activity(api, subscriberIds="nobody")) == []
    assert ids(await list_activity(api, emails="grace@example.com")) == [grace_run["notification_id"]]

    assert ids(await list_activity(api, transactionId=old["transaction_id"])) == [old["notification_id"]]
    assert ids(await list_activity(api, transactionId=[old["transaction_id"], mail["transaction_id"]])) == [
        mail["notification_id"], old["notification_id"]
    ]

    assert ids(await list_activity(api, templates=email["_id"])) == [mail["notification_id"]]
    by_workflow = await list_activity(api, templates=in_app["_id"])
    assert ids(by_workflow) == [grace_run["notification_id"], old["notification_id"]] and by_workflow["totalCount"] == 2

    window = await list_activity(
        api, after=isoformat(now - timedelta(days=2, hours=1)), before=isoformat(now - timedelta(hours=12))
    )
    assert ids(window) == [grace_run["notification_id"], mail["notification_id"]]
    # A date alone means its midnight, UTC.
    assert ids(await list_activity(api, after=(now - timedelta(days=1)).date().isoformat())) == [
        grace_run["notification_id"]
    ]

    # Filters combine with AND.
    assert ids(await list_activity(api, templates=in_app["_id"], subscriberIds=ada["subscriberId"])) == [
        old["notification_id"]
    ]

    body = assert_error(await api.get("/v1/notifications", params={"after": "yesterday"}), 422)
    assert body["errors"]["after"]["value"] == "yesterday"
    body = assert_error(await api.get("/v1/notifications", params={"channels": "fax"}), 422)
    assert body["errors"]["channels.0"]["value"] == "fax"


async def test_array_forms_filter_and_unknown_parameters_are_refused(api: httpx.AsyncClient, app: FastAPI) -> None:
    """``channels[]=``/``subscriberIds[]=`` (as qs-based clients send lists) filter; ``channel=`` is a 422, not ignored."""
    in_app = await create_workflow(api)
    email = await create_workflow(api, steps=[{"name": "mail", "template": {"type": "email", "subject": "Hi", "content": "Hello"}}])
    ada = await create_subscriber(api)
    grace = await create_subscriber(api)
    mail = await record_run(app, email, ada)
    grace_run = await record_run(app, in_app, grace)

    assert ids(await list_activity(api, **{"channels[]": "email"})) == [mail["notification_id"]]
    assert ids(await list_activity(api, **{"subscriberIds[]": [grace["subscriberId"]]})) == [grace_run["notification_id"]]
    assert ids(await list_activity(api, **{"transactionId[]": mail["transaction_id"], "templates[]": email["_id"]})) == [
        mail["notification_id"]
    ]
    # Both spellings of one filter add up (OR), as repeated values do.
    assert set(ids(await list_activity(api, **{"channels": "email", "channels[]": "in_app"}))) == {
        mail["notification_id"], grace_run["notification_id"]
    }
    body = assert_error(await api.get("/v1/notifications", params={"channels[]": "fax"}), 422)
    assert body["errors"]["channels[]"] == {
        "messages": ["channels[] must be one of in_app, email, sms, chat, push"],
        "value": "fax",
    }

    for name, hint in (("channel", "channels"), ("subscriberId", "subscriberIds"), ("topicKey", None)):
        body = assert_error(await api.get("/v1/notifications", params={name: "x"}), 422)
        [message] = body["errors"][name]["messages"]
        assert message.startswith(f"{name} is not a query parameter of this endpoint")
        assert (f"did you mean {hint}?" in message) if hint else "did you mean" not in message


async def test_scoped_to_the_callers_environment(
    api: httpx.AsyncClient,
    production_api: httpx.AsyncClient,
    other_org_api: httpx.AsyncClient,
    app: FastAPI,
) -> None:
    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    ours = await record_run(app, workflow, subscriber)
    production_workflow = await create_workflow(production_api)
    production_subscriber = await create_subscriber(production_api, subscriberId=subscriber["subscriberId"])
    theirs = await record_run(app, production_workflow, production_subscriber)

    assert ids(await list_activity(api)) == [ours["notification_id"]]
    assert ids(await list_activity(production_api)) == [theirs["notification_id"]]
    assert ids(await list_activity(other_org_api)) == []
    # The same subscriberId in another environment names another subscriber.
    assert ids(await list_activity(api, subscriberIds=subscriber["subscriberId"])) == [ours["notification_id"]]

    missing = f"Notification with id {theirs['notification_id']} not found"
    assert_error(await api.get(f"/v1/notifications/{theirs['notification_id']}"), 404, missing)
    assert_error(
        await other_org_api.get(f"/v1/notifications/{ours['notification_id']}"),
        404,
        f"Notification with id {ours['notification_id']} not found",
    )
    assert_error(await api.get("/v1/notifications/unknown"), 404, "Notification with id unknown not found")

    stats = (await api.get("/v1/notifications/stats")).json()["data"]
    assert stats == {"weeklySent": 1, "monthlySent": 1}


async def test_requires_an_api_key(anonymous: httpx.AsyncClient) -> None:
    for path in ("/v1/notifications", f"/v1/notifications/{new_id()}", "/v1/notifications/stats", "/v1/notifications/graph/stats"):
        assert_error(await anonymous.get(path), 401)


async def test_merged_digest_names_the_notification_it_joined(api: httpx.AsyncClient, app: FastAPI) -> None:
    workflow = await create_workflow(
        api,
        steps=[
            {"name": "collect", "template": {"type": "digest"}, "metadata": {"type": "regular", "amount": 5, "unit": "minutes"}},
            {"name": "inbox", "template": {"type": "in_app", "content": "{{step.total_count}} events"}},
        ],
    )
    subscriber = await create_subscriber(api)
    first = await record_run(app, workflow, subscriber, statuses=["delayed", "pending"], created_at=utcnow() - timedelta(seconds=5))
    second = await record_run(app, workflow, subscriber, statuses=["merged", "merged"], merged_into=first["job_ids"][0])

    newest, oldest = (await list_activity(api))["data"]
    assert newest["_id"] == second["notification_id"]
    assert newest["_digestedNotificationId"] == first["notification_id"]
    assert "_digestedNotificationId" not in oldest
    digest_job = oldest["jobs"][0]
    assert digest_job["type"] == "digest" and digest_job["status"] == "delayed"
    assert digest_job["digest"] == {"type": "regular", "amount": 5, "unit": "minutes"}
    assert [job["status"] for job in newest["jobs"]] == ["merged", "merged"]
    assert newest["channels"] == ["in_app"]


async def test_stats_and_graph(api: httpx.AsyncClient, app: FastAPI) -> None:
    first = await create_workflow(api)
    second = await create_workflow(api, steps=[{"name": "mail", "template": {"type": "email", "subject": "Hi", "content": "Hello"}}])
    subscriber = await create_subscriber(api)
    now = utcnow()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    await record_run(app, first, subscriber, created_at=today + timedelta(seconds=1))
    await record_run(app, second, subscriber, created_at=today + timedelta(seconds=2))
    await record_run(app, first, subscriber, created_at=now - timedelta(days=10))
    await record_run(app, first, subscriber, created_at=now - timedelta(days=40))

    stats = await api.get("/v1/notifications/stats")
    assert stats.status_code == 200, stats.text
    assert stats.json() == {"data": {"weeklySent": 2, "monthlySent": 3}}

    graph = await api.get("/v1/notifications/graph/stats", params={"days": 20})
    assert graph.status_code == 200, graph.text
    days = graph.json()["data"]
    older_day = (now - timedelta(days=10)).strftime("%Y-%m-%d")
    assert [day["_id"] for day in days] == [today.strftime("%Y-%m-%d"), older_day]
    assert days[0] == {
        "_id": today.strftime("%Y-%m-%d"),
        "count": 2,
        "templates": sorted([first["_id"], second["_id"]]),
        "channels": ["email", "in_app"],
    }
    assert days[1] == {"_id": older_day, "count": 1, "templates": [first["_id"]], "channels": ["in_app"]}
    assert_error(await api.get("/v1/notifications/graph/stats", params={"days": 0}), 422)


async def test_a_page_costs_the_same_queries_whatever_its_size(api: httpx.AsyncClient, app: FastAPI) -> None:
    workflow = await create_workflow(api, steps=TWO_CHANNEL_STEPS)
    subscribers = [await create_subscriber(api) for _ in range(2)]
    for index in range(6):
        await record_run(
            app,
            workflow,
            subscribers[index % 2],
            details={0: [{"status": "Success", "detail": "ok"}], 1: [{"status": "Success", "detail": "ok"}]},
        )
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    await list_activity(api, limit=1)  # the API key is resolved (and cached) here
    engine = app.state.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        await list_activity(api, limit=1)
        one = len(statements)
        statements.clear()
        body = await list_activity(api, limit=6)
        six = len(statements)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(body["data"]) == 6 and all(len(item["jobs"]) == 2 for item in body["data"])
    assert six == one


@pytest.fixture
def server_url(app: FastAPI) -> Iterator[str]:
    with running_server(app.state.settings) as url:
        yield url


async def test_the_sdk_reads_what_the_engine_recorded(
    server_url: str, api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    from herald.app import build_worker

    workflow = await create_workflow(api, steps=TWO_CHANNEL_STEPS)
    subscriber = await create_subscriber(api)
    response = await api.post(
        "/v1/events/trigger",
        json={"name": workflow["triggers"][0]["identifier"], "to": subscriber["subscriberId"], "payload": {"name": "Ada"}},
    )
    assert response.status_code == 201, response.text
    transaction_id = response.json()["data"]["transactionId"]
    worker = build_worker(replace(app.state.settings), app.state.sessionmaker)
    try:
        await worker.run_until_idle()
    finally:
        await worker.http.aclose()

    novu = Novu(secret_key=tenancy.api_key, server_url=server_url)

    def read() -> tuple[Any, Any]:
        listed = novu.notifications.list(request={"transaction_id": transaction_id, "limit": 5}).result
        one = novu.notifications.retrieve(notification_id=listed.data[0].id).result
        return listed, one

    listed, one = await asyncio.to_thread(read)
    [item] = listed.data
    assert one.id == item.id and item.transaction_id == transaction_id
    assert item.subscriber is not None and item.subscriber.subscriber_id == subscriber["subscriberId"]
    assert item.jobs is not None
    inbox, mail = item.jobs
    assert inbox.type.value == "in_app" and inbox.status == "completed"
    assert inbox.execution_details and all(detail.status.value in {"Queued", "Success"} for detail in inbox.execution_details)
    # No email integration: the engine records the failure, and the feed shows it.
    assert mail.type.value == "email" and mail.execution_details
