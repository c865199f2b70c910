from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from herald.models import Event, Job
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_subscriber, create_workflow, unique


async def trigger(api: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await api.post("/v1/events/trigger", json=body)
    assert response.status_code == 201, response.text
    return response.json()["data"]


async def events_for(app: FastAPI, environment_id: str, transaction_id: str) -> list[Event]:
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            select(Event).where(Event.environment_id == environment_id, Event.transaction_id == transaction_id)
        )
        return list(result.scalars())


async def test_trigger_records_event_and_job(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    workflow = await create_workflow(api)
    identifier = workflow["triggers"][0]["identifier"]
    result = await trigger(api, name=identifier, to="ada", payload={"name": "Ada"})
    assert result["acknowledged"] is True
    assert result["status"] == "processed"
    assert result["transactionId"].startswith("txn_")
    assert "error" not in result
    [event] = await events_for(app, tenancy.environment_id, result["transactionId"])
    assert event.payload == {"name": "Ada"}
    assert event.recipients == [{"type": "Subscriber", "subscriberId": "ada"}]
    async with app.state.sessionmaker() as session:
        jobs = (await session.execute(select(Job).where(Job.event_id == event.id))).scalars().all()
    assert [(job.kind, job.status) for job in jobs] == [("event", "queued")]


async def test_unknown_workflow_is_422(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/events/trigger", json={"name": "nope", "to": "ada"})
    body = assert_error(response, 422, "workflow_not_found")
    assert body["error"] == "Unprocessable Entity"
    # Novu's message and errors.general, for the SDKs; errors.name says which identifier was not found.
    assert body["errors"] == {
        "general": {"messages": ["workflow_not_found"], "value": None},
        "name": {"messages": ["No workflow with the trigger identifier 'nope' in this environment"], "value": "nope"},
    }


async def test_unknown_workflow_suggests_the_closest_identifier(api: httpx.AsyncClient) -> None:
    workflow = await create_workflow(api)
    identifier = workflow["triggers"][0]["identifier"]
    response = await api.post("/v1/events/trigger", json={"name": identifier[:-1] + "x", "to": "ada"})
    body = assert_error(response, 422, "workflow_not_found")
    assert body["errors"]["general"] == {"messages": ["workflow_not_found"], "value": None}
    assert body["errors"]["name"]["messages"] == [
        f"No workflow with the trigger identifier {identifier[:-1] + 'x'!r} in this environment; did you mean {identifier!r}?"
    ]


async def test_workflow_of_another_environment_is_not_found(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    workflow = await create_workflow(api)
    response = await production_api.post(
        "/v1/events/trigger", json={"name": workflow["triggers"][0]["identifier"], "to": "ada"}
    )
    assert_error(response, 422, "workflow_not_found")


@pytest.mark.parametrize(
    ("workflow_fields", "status"),
    [
        ({"active": False}, "trigger_not_active"),
        ({"steps": []}, "no_workflow_steps_defined"),
        (
            {"steps": [{"name": "off", "active": False, "template": {"type": "in_app", "content": "x"}}]},
            "no_workflow_active_steps_defined",
        ),
    ],
)
async def test_workflow_state_statuses(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, workflow_fields: dict[str, Any], status: str
) -> None:
    workflow = await create_workflow(api, **workflow_fields)
    result = await trigger(api, name=workflow["triggers"][0]["identifier"], to="ada")
    assert result["status"] == status
    assert result["acknowledged"] is True
    assert await events_for(app, tenancy.environment_id, result["transactionId"]) == []


async def test_unknown_tenant(api: httpx.AsyncClient) -> None:
    workflow = await create_workflow(api)
    name = workflow["triggers"][0]["identifier"]
    result = await trigger(api, name=name, to="ada", tenant="acme")
    assert result["status"] == "no_tenant_found"
    response = await api.post("/v1/tenants", json={"identifier": "acme", "name": "Acme"})
    assert response.status_code == 201, response.text
    assert (await trigger(api, name=name, to="ada", tenant={"identifier": "acme"}))["status"] == "processed"


async def test_every_recipient_form(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    workflow = await create_workflow(api)
    topic_key = unique("topic")
    assert (await api.post("/v1/topics", json={"key": topic_key, "name": "T"})).status_code == 201
    to = [
        "ada",
        {"subscriberId": "grace", "email": "grace@example.com", "unknownField": 1},
        {"type": "Topic", "topicKey": topic_key},
        "someone@example.com",
    ]
    result = await trigger(api, name=workflow["triggers"][0]["identifier"], to=to)
    assert result["status"] == "processed"
    [event] = await events_for(app, tenancy.environment_id, result["transactionId"])
    assert event.recipients == [
        {"type": "Subscriber", "subscriberId": "ada"},
        {"type": "Subscriber", "subscriberId": "grace", "email": "grace@example.com"},
        {"type": "Topic", "topicKey": topic_key, "exclude": []},
        {"type": "Subscriber", "subscriberId": "someone@example.com"},
    ]
    single = await trigger(api, name=workflow["triggers"][0]["identifier"], to={"subscriberId": "ada", "firstName": "A"})
    assert single["status"] == "processed"


async def test_all_invalid_recipients(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    workflow = await create_workflow(api)
    result = await trigger(
        api,
        name=workflow["triggers"][0]["identifier"],
        to=["not valid!", {"email": "x@example.com"}, {"type": "Topic", "topicKey": "missing-topic"}],
    )
    assert result["status"] == "invalid_recipients"
    assert len(result["error"]) == 3
    assert any("subscriberId under property to is not configured" in e for e in result["error"])
    # Each reason names the recipient's place in ``to``, the topic's too.
    assert [reason.split(":", 1)[0] for reason in result["error"]] == ["to[0]", "to[1]", "to[2]"]
    assert result["error"][2] == "to[2]: Topic with key missing-topic not found in current environment"
    assert await events_for(app, tenancy.environment_id, result["transactionId"]) == []


async def test_some_invalid_recipients_are_reported_not_dropped(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    workflow = await create_workflow(api)
    result = await trigger(api, name=workflow["triggers"][0]["identifier"], to=["ada", "bad id"])
    assert result["status"] == "processed"
    assert result["error"] == [
        "to[1]: subscriberId 'bad id' is not valid: use letters, digits, _ : . - or an email address"
    ]
    [event] = await events_for(app, tenancy.environment_id, result["transactionId"])
    assert event.recipients == [{"type": "Subscriber", "subscriberId": "ada"}]
    assert event.rejected_recipients[0]["recipient"] == "bad id"


async def test_inline_subscribers_with_fields_of_the_wrong_shape_are_refused_with_why(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    workflow = await create_workflow(api)
    result = await trigger(
        api,
        name=workflow["triggers"][0]["identifier"],
        to=[
            {"subscriberId": "ada", "firstName": "Ada", "data": {"plan": "pro"}},
            {"subscriberId": "bob", "email": ["bob@example.com"]},
            {"subscriberId": "cy", "channels": [{"providerId": "slack"}]},
            {"type": "Topic", "topicKey": "news", "exclude": 3},
        ],
    )
    assert result["status"] == "processed"
    assert result["error"] == [
        "to[1]: email: input should be a valid string",
        "to[2]: channels.0.credentials should not be null or undefined",
        "to[3]: exclude must be an array of subscriberIds",
    ]
    [event] = await events_for(app, tenancy.environment_id, result["transactionId"])
    assert event.recipients == [{"type": "Subscriber", "subscriberId": "ada", "firstName": "Ada", "data": {"plan": "pro"}}]
    assert [item["index"] for item in event.rejected_recipients] == [1, 2, 3]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("actor", {"subscriberId": "ada", "phone": 5551234}, "actor: phone: input should be a valid string"),
        ("tenant", {"identifier": "acme", "name": ["Acme"]}, "tenant: name: input should be a valid string"),
    ],
)
async def test_actor_and_tenant_objects_of_the_wrong_shape_are_422(
    api: httpx.AsyncClient, field: str, value: dict[str, Any], message: str
) -> None:
    workflow = await create_workflow(api)
    response = await api.post("/v1/events/trigger", json={"name": workflow["triggers"][0]["identifier"], "to": "ada", field: value})
    body = assert_error(response, 422, "Validation Error")
    assert body["errors"][field]["messages"] == [message]


async def test_repeated_transaction_id_runs_once(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    workflow = await create_workflow(api)
    body = {"name": workflow["triggers"][0]["identifier"], "to": "ada", "transactionId": unique("tx")}
    first = await trigger(api, **body)
    assert first == {"acknowledged": True, "status": "processed", "transactionId": body["transactionId"]}
    again = await trigger(api, **body)
    assert again["status"] == "error"
    assert again["transactionId"] == body["transactionId"]
    assert "transactionId property is not unique" in again["error"][0]
    assert len(await events_for(app, tenancy.environment_id, body["transactionId"])) == 1


async def test_repeated_transaction_id_racing_runs_once(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    workflow = await create_workflow(api)
    body = {"name": workflow["triggers"][0]["identifier"], "to": "ada", "transactionId": unique("race")}
    responses = await asyncio.gather(*(api.post("/v1/events/trigger", json=body) for _ in range(8)))
    statuses = sorted(r.json()["data"]["status"] for r in responses)
    assert statuses == ["error"] * 7 + ["processed"]
    assert len(await events_for(app, tenancy.environment_id, body["transactionId"])) == 1


async def test_same_transaction_id_in_another_environment_is_independent(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient
) -> None:
    transaction_id = unique("tx")
    for client in (api, production_api):
        workflow = await create_workflow(client)
        result = await trigger(client, name=workflow["triggers"][0]["identifier"], to="ada", transactionId=transaction_id)
        assert result["status"] == "processed"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"to": "ada"}, "name"),
        ({"name": "x"}, "to"),
        ({"name": "x", "to": "ada", "payload": []}, "payload"),
        ({"name": "x", "to": ["ada", 5]}, "to.1"),
        ({"name": "x", "to": "ada", "transactionId": ""}, "transactionId"),
        ({"name": "x", "to": "ada", "context": {str(i): "v" for i in range(6)}}, "context"),
    ],
)
async def test_trigger_validation(api: httpx.AsyncClient, body: dict[str, Any], field: str) -> None:
    response = await api.post("/v1/events/trigger", json=body)
    errors = assert_error(response, 422, "Validation Error")["errors"]
    assert field in errors, errors
    assert errors[field]["messages"]


async def test_invalid_actor_is_422(api: httpx.AsyncClient) -> None:
    workflow = await create_workflow(api)
    response = await api.post(
        "/v1/events/trigger", json={"name": workflow["triggers"][0]["identifier"], "to": "ada", "actor": {"x": 1}}
    )
    assert "actor.subscriberId" in assert_error(response, 422)["errors"]


async def test_malformed_json_is_400(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v1/events/trigger", content=b'{"name": "x", ', headers={"content-type": "application/json"}
    )
    assert_error(response, 400)
    assert "not valid JSON" in response.json()["message"]


@pytest.mark.parametrize(
    ("content_type", "sent"),
    [
        ("text/plain", "it was sent as text/plain"),
        ("application/x-www-form-urlencoded", "it was sent as application/x-www-form-urlencoded"),
        (None, "it was sent without a Content-Type"),
    ],
)
async def test_a_body_not_sent_as_json_is_415(api: httpx.AsyncClient, content_type: str | None, sent: str) -> None:
    workflow = await create_workflow(api)
    transaction_id = unique("refused")
    body = orjson.dumps({"name": workflow["triggers"][0]["identifier"], "to": "ada", "transactionId": transaction_id})
    headers = {"content-type": content_type} if content_type else {}
    response = await api.post("/v1/events/trigger", content=body, headers=headers)
    assert_error(response, 415, f"Request body must be JSON, sent with Content-Type: application/json; {sent}")
    listed = await api.get("/v1/notifications", params={"transactionId": transaction_id})
    assert listed.json()["data"] == []
    # JSON with a charset is JSON.
    response = await api.post("/v1/events/trigger", content=body, headers={"content-type": "application/json; charset=utf-8"})
    assert response.status_code == 201, response.text


async def test_trigger_accepts_large_bodies_up_to_the_max_body(api: httpx.AsyncClient) -> None:
    workflow = await create_workflow(api)
    body = {"name": workflow["triggers"][0]["identifier"], "to": "ada", "payload": {"blob": "x" * 1_000_000}}
    assert (await api.post("/v1/events/trigger", json=body)).status_code == 201
    # HERALD_MAX_BODY's default, 1 MB: a larger body is not parsed on the event loop (it held every other request).
    huge = b'{"name": "x", "to": "ada", "payload": {"blob": "' + b"x" * (1024 * 1024) + b'"}}'
    response = await api.post("/v1/events/trigger", content=huge, headers={"content-type": "application/json"})
    assert_error(response, 413)


async def test_other_routes_refuse_bodies_over_100_kb(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/subscribers", json={"subscriberId": "big", "data": {"blob": "x" * 110_000}})
    assert_error(response, 413)


async def test_bulk_trigger_answers_each_event_in_order(api: httpx.AsyncClient) -> None:
    workflow = await create_workflow(api)
    name = workflow["triggers"][0]["identifier"]
    response = await api.post(
        "/v1/events/trigger/bulk",
        json={"events": [{"name": name, "to": "ada"}, {"name": "missing", "to": "ada"}, {"name": name, "to": "bad id"}]},
    )
    assert response.status_code == 201, response.text
    results = response.json()["data"]
    assert [r["status"] for r in results] == ["processed", "error", "invalid_recipients"]
    assert results[1]["error"] == ["workflow_not_found"]


@pytest.mark.parametrize("events", [[], [{"name": "x", "to": "a"}] * 101])
async def test_bulk_trigger_size_limits(api: httpx.AsyncClient, events: list[dict[str, Any]]) -> None:
    response = await api.post("/v1/events/trigger/bulk", json={"events": events})
    assert "events" in assert_error(response, 422)["errors"]


async def test_broadcast_records_a_broadcast_event(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    workflow = await create_workflow(api)
    response = await api.post(
        "/v1/events/trigger/broadcast", json={"name": workflow["triggers"][0]["identifier"], "payload": {"a": 1}}
    )
    assert response.status_code == 201, response.text
    result = response.json()["data"]
    assert result["status"] == "processed"
    [event] = await events_for(app, tenancy.environment_id, result["transactionId"])
    assert event.kind == "broadcast"
    assert_error(await api.post("/v1/events/trigger/broadcast", json={"name": "x"}), 422)


async def test_cancel_without_pending_jobs_is_false(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    response = await api.delete("/v1/events/trigger/unknown-transaction")
    assert response.status_code == 200
    assert response.json() == {"data": False}


async def test_cancel_delayed_jobs(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    await create_subscriber(api, subscriberId="ada")
    workflow = await create_workflow(api)
    result = await trigger(api, name=workflow["triggers"][0]["identifier"], to="ada")
    async with app.state.sessionmaker() as session:
        job = (await session.execute(select(Job).where(Job.transaction_id == result["transactionId"]))).scalar_one()
        job.status = "delayed"
        await session.commit()
    response = await api.delete(f"/v1/events/trigger/{result['transactionId']}")
    assert response.json() == {"data": True}
    async with app.state.sessionmaker() as session:
        count = await session.scalar(
            select(func.count()).select_from(Job).where(Job.transaction_id == result["transactionId"], Job.status == "canceled")
        )
    assert count == 1


async def test_the_trigger_route_is_documented_as_declared(anonymous: httpx.AsyncClient) -> None:
    # The route answers with its own handler (kit.schemas.RequestRoute); its
    # OpenAPI operation still comes from the declaration.
    document = (await anonymous.get("/openapi.json")).json()
    operation = document["paths"]["/v1/events/trigger"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TriggerEventRequest"
    }
    created = operation["responses"]["201"]["content"]["application/json"]["schema"]["$ref"]
    assert document["components"]["schemas"][created.rsplit("/", 1)[1]]["properties"]["data"] == {
        "$ref": "#/components/schemas/TriggerEventResponse"
    }
    assert {"401", "422"} <= set(operation["responses"])
    assert operation["security"]


async def test_a_trigger_wakes_listening_workers_once_and_a_repeat_wakes_none(
    api: httpx.AsyncClient, app: FastAPI
) -> None:
    if app.state.settings.is_sqlite:
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's; on SQLite the wake-up is the in-process bell")
    import asyncpg
    from sqlalchemy.engine import make_url

    from herald.engine.queue import WAKE_CHANNEL

    url = make_url(app.state.settings.database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    listener, marker = await asyncpg.connect(url), await asyncpg.connect(url)
    heard: asyncio.Queue[str] = asyncio.Queue()
    try:
        await listener.add_listener(WAKE_CHANNEL, lambda *_: heard.put_nowait("wake"))
        await listener.add_listener("test_marker", lambda *_: heard.put_nowait("marker"))

        async def heard_until_marker() -> list[str]:
            # Notifications arrive in commit order: all the wake-ups before the marker are in.
            await marker.execute("SELECT pg_notify('test_marker', '')")
            seen = []
            while (item := await asyncio.wait_for(heard.get(), 10)) != "marker":
                seen.append(item)
            return seen

        workflow = await create_workflow(api)
        body = {"name": workflow["triggers"][0]["identifier"], "to": "ada", "transactionId": unique("wake")}
        assert (await trigger(api, **body))["status"] == "processed"
        assert await heard_until_marker() == ["wake"]
        # The repeated transactionId writes no event and no job: nobody is woken for nothing.
        assert (await trigger(api, **body))["status"] == "error"
        assert await heard_until_marker() == []
    finally:
        await listener.close()
        await marker.close()


async def test_a_trigger_listing_more_recipients_than_the_cap_is_422(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    """HERALD_MAX_RECIPIENTS (1,000): a list past it is refused whole, naming the limit and the setting."""
    workflow = await create_workflow(api)
    name = workflow["triggers"][0]["identifier"]
    limit = app.state.settings.max_recipients
    assert limit == 1000
    too_many = [f"r-{number}" for number in range(limit + 1)]
    body = assert_error(await api.post("/v1/events/trigger", json={"name": name, "to": too_many}), 422)
    [message] = body["errors"]["to"]["messages"]
    assert "1,001" in message and "at most 1,000" in message and "HERALD_MAX_RECIPIENTS" in message, message
    assert body["errors"]["to"]["value"] == limit + 1
    # In a bulk trigger one event over the cap refuses the request, as an invalid event does.
    fine = {"name": name, "to": "ada"}
    body = assert_error(await api.post("/v1/events/trigger/bulk", json={"events": [fine, {"name": name, "to": too_many}]}), 422)
    assert "HERALD_MAX_RECIPIENTS" in body["errors"]["events.1.to"]["messages"][0]
    # Exactly the cap is taken; a topic counts as one entry, however many it reaches.
    at_cap = [*too_many[: limit - 1], {"type": "Topic", "topicKey": "everyone"}]
    result = await trigger(api, name=name, to=at_cap, transactionId=unique("cap"))
    assert result["status"] == "processed"
    [event] = await events_for(app, tenancy.environment_id, result["transactionId"])
    assert len(event.recipients) == limit - 1  # the unknown topic is reported, not dropped
    assert result["error"] == ["to[999]: Topic with key everyone not found in current environment"]
