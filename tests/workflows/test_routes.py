from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from herald.models import ApiKey, Workflow
from herald.organizations.service import hash_api_key
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_workflow

OBJECT_ID = re.compile(r"^[0-9a-f]{24}$")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
UNKNOWN_ID = "000000000000000000000000"

# Fields the spec (§2.4) marks as present in every response.
SPEC_REQUIRED = {
    "name",
    "description",
    "active",
    "draft",
    "preferenceSettings",
    "critical",
    "tags",
    "steps",
    "_organizationId",
    "_creatorId",
    "_environmentId",
    "_notificationGroupId",
    "triggers",
    "deleted",
    "deletedAt",
    "deletedBy",
}

IN_APP_STEP = {"name": "inbox", "template": {"type": "in_app", "content": "Hello {{payload.name}}"}}


async def post_workflow(api: httpx.AsyncClient, **fields: Any) -> httpx.Response:
    body: dict[str, Any] = {"name": "Welcome", "steps": [IN_APP_STEP], **fields}
    return await api.post("/v1/workflows", json=body)


async def created(api: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await post_workflow(api, **fields)
    assert response.status_code == 201, response.text
    return response.json()["data"]


def step_with(template_type: str, metadata: Any = None, **template: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"name": template_type, "template": {"type": template_type, **template}}
    if metadata is not None:
        step["metadata"] = metadata
    return step


def assert_validation(response: httpx.Response, field: str, fragment: str | None = None) -> dict[str, Any]:
    body = assert_error(response, 422, "Validation Error")
    assert field in body["errors"], body["errors"]
    if fragment is not None:
        messages = " ".join(body["errors"][field]["messages"])
        assert fragment in messages, messages
    return body["errors"][field]


async def general_group(api: httpx.AsyncClient) -> dict[str, Any]:
    response = await api.get("/v1/notification-groups")
    assert response.status_code == 200, response.text
    [group] = [g for g in response.json()["data"] if g["name"] == "General"]
    return group


# --- create -----------------------------------------------------------------


async def test_create_defaults_and_shape(api: httpx.AsyncClient, tenancy: Tenancy, app: FastAPI) -> None:
    workflow = await created(api, name="Welcome Email!")
    assert SPEC_REQUIRED <= workflow.keys()
    assert OBJECT_ID.match(workflow["_id"])
    assert workflow["name"] == "Welcome Email!"
    assert workflow["description"] == ""
    assert workflow["active"] is False
    assert workflow["draft"] is True
    assert workflow["critical"] is False
    assert workflow["tags"] == []
    assert workflow["preferenceSettings"] == {"email": True, "sms": True, "in_app": True, "chat": True, "push": True}
    assert workflow["_environmentId"] == tenancy.environment_id
    assert workflow["_organizationId"] == tenancy.organization_id
    assert workflow["deleted"] is False
    assert workflow["deletedAt"] == ""
    assert workflow["deletedBy"] == ""
    assert "data" not in workflow
    assert ISO.match(workflow["createdAt"]) and ISO.match(workflow["updatedAt"])
    assert workflow["triggers"] == [
        {
            "type": "event",
            "identifier": "welcome-email",
            "variables": [{"name": "name"}],
            "subscriberVariables": [],
        }
    ]
    group = await general_group(api)
    assert workflow["_notificationGroupId"] == group["_id"]
    assert workflow["notificationGroup"] == {
        "_id": group["_id"],
        "name": "General",
        "_environmentId": tenancy.environment_id,
        "_organizationId": tenancy.organization_id,
    }
    [step] = workflow["steps"]
    assert OBJECT_ID.match(step["_id"]) and OBJECT_ID.match(step["_templateId"])
    assert step["_id"] != step["_templateId"]
    assert uuid.UUID(step["uuid"]).version == 4
    assert step["name"] == "inbox"
    assert step["active"] is True
    assert step["shouldStopOnFail"] is False
    assert step["template"] == {"type": "in_app", "content": "Hello {{payload.name}}"}
    assert step["filters"] == []
    assert step["variants"] == []
    assert "metadata" not in step and "_parentId" not in step and "replyCallback" not in step
    # The creator is the API key that made it.
    async with app.state.sessionmaker() as session:
        key = (await session.execute(select(ApiKey).where(ApiKey.key_hash == hash_api_key(tenancy.api_key)))).scalar_one()
    assert workflow["_creatorId"] == key.id


async def test_create_with_every_field(api: httpx.AsyncClient) -> None:
    group = await general_group(api)
    filters = [
        {
            "isNegated": False,
            "type": "GROUP",
            "value": "AND",
            "children": [{"field": "plan", "value": "pro", "operator": "EQUAL", "on": "payload"}],
        }
    ]
    email = {
        "_id": "5f0c4a1b2c3d4e5f6a7b8c9d",
        "uuid": "my-own-uuid",
        "_templateId": "5f0c4a1b2c3d4e5f6a7b8c9e",
        "name": "mail",
        "active": False,
        "shouldStopOnFail": True,
        "filters": filters,
        "replyCallback": {"active": True, "url": "https://example.com/reply"},
        "template": {
            "type": "email",
            "subject": "Hi {{subscriber.firstName}}",
            "content": [
                {"type": "text", "content": "Order {{payload.order.id}}"},
                {"type": "button", "content": "Open", "url": "https://x.test/{{payload.slug}}", "styles": {"textAlign": "center"}},
            ],
            "contentType": "editor",
            "preheader": "Your order",
            "senderName": "Shop",
            "layoutId": None,
            "customKey": {"kept": True},
        },
        "variants": [
            {
                "name": "mail for pros",
                "filters": filters,
                "template": {"type": "email", "subject": "Pro {{payload.tier}}", "content": "<b>hi</b>", "contentType": "customHtml"},
            }
        ],
    }
    workflow = await created(
        api,
        name="Orders",
        description="Order updates",
        active=True,
        critical=True,
        tags=["orders", "billing"],
        preferenceSettings={"email": False, "sms": False},
        data={"team": "shop"},
        notificationGroupId=group["_id"],
        triggerIdentifier="order_updates.v2",
        steps=[IN_APP_STEP, email],
    )
    assert workflow["description"] == "Order updates"
    assert workflow["active"] is True and workflow["draft"] is False
    assert workflow["critical"] is True
    assert workflow["tags"] == ["orders", "billing"]
    assert workflow["preferenceSettings"] == {"email": False, "sms": False, "in_app": True, "chat": True, "push": True}
    assert workflow["data"] == {"team": "shop"}
    assert workflow["triggers"][0]["identifier"] == "order_updates.v2"
    first, second = workflow["steps"]
    assert second["_id"] == email["_id"] and second["uuid"] == "my-own-uuid"
    assert second["_templateId"] == email["_templateId"]
    assert second["_parentId"] == first["_id"]
    assert second["active"] is False and second["shouldStopOnFail"] is True
    assert second["filters"] == filters
    assert second["replyCallback"] == {"active": True, "url": "https://example.com/reply"}
    assert second["template"]["customKey"] == {"kept": True}
    # An email's layoutId: null is kept: it opts the step out of the environment's default layout.
    assert second["template"]["layoutId"] is None
    assert second["template"]["content"][1]["styles"] == {"textAlign": "center"}
    [variant] = second["variants"]
    assert OBJECT_ID.match(variant["_id"]) and OBJECT_ID.match(variant["_templateId"])
    assert variant["name"] == "mail for pros"
    assert variant["template"]["contentType"] == "customHtml"
    assert workflow["triggers"][0]["variables"] == [{"name": "name"}, {"name": "order.id"}, {"name": "slug"}, {"name": "tier"}]
    assert workflow["triggers"][0]["subscriberVariables"] == [{"name": "firstName"}]


async def test_step_name_defaults_to_template_name_or_type(api: httpx.AsyncClient) -> None:
    workflow = await created(
        api,
        steps=[
            {"template": {"type": "in_app", "content": "Hi {{subscriber.firstName}}"}, "active": True},
            {"template": {"type": "sms", "name": "Text", "content": "Hi"}},
        ],
    )
    assert [step["name"] for step in workflow["steps"]] == ["in_app", "Text"]


async def test_response_parses_with_novu_sdk_model(api: httpx.AsyncClient) -> None:
    novu_models = pytest.importorskip("novu_py.models")
    workflow = await created(
        api,
        steps=[
            step_with("digest", {"type": "regular", "amount": 5, "unit": "minutes", "digestKey": "postId"}),
            step_with("delay", {"type": "scheduled", "delayPath": "sendAt"}),
            IN_APP_STEP,
        ],
    )
    parsed = novu_models.WorkflowResponse.model_validate(workflow)
    assert parsed.triggers[0].identifier == "welcome"
    assert parsed.deleted_at == ""


async def test_get_returns_what_create_returned(api: httpx.AsyncClient) -> None:
    workflow = await create_workflow(api)
    response = await api.get(f"/v1/workflows/{workflow['_id']}")
    assert response.status_code == 200
    assert response.json()["data"] == workflow


# --- notification group -----------------------------------------------------------


async def test_notification_groups_list_the_environment_general_group(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    response = await api.get("/v1/notification-groups")
    assert response.status_code == 200
    [group] = response.json()["data"]
    assert OBJECT_ID.match(group["_id"])
    assert group == {
        "_id": group["_id"],
        "name": "General",
        "_environmentId": tenancy.environment_id,
        "_organizationId": tenancy.organization_id,
    }
    [production_group] = (await production_api.get("/v1/notification-groups")).json()["data"]
    assert production_group["_id"] != group["_id"]
    assert production_group["_environmentId"] == tenancy.production_environment_id


async def test_unknown_or_foreign_notification_group_is_404(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient
) -> None:
    response = await post_workflow(api, notificationGroupId=UNKNOWN_ID)
    assert_error(response, 404, f"Notification group with id {UNKNOWN_ID} not found")
    foreign = await general_group(production_api)
    response = await post_workflow(api, notificationGroupId=foreign["_id"])
    assert_error(response, 404, f"Notification group with id {foreign['_id']} not found")
    workflow = await created(api)
    response = await api.put(f"/v1/workflows/{workflow['_id']}", json={"notificationGroupId": foreign["_id"]})
    assert_error(response, 404, f"Notification group with id {foreign['_id']} not found")


# --- trigger identifier -------------------------------------------------------------


async def test_trigger_identifier_is_unique_per_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient
) -> None:
    await created(api, name="Password reset")
    message = "Workflow with trigger identifier password-reset already exists in this environment"
    # The same name slugifies to the same identifier.
    assert_error(await post_workflow(api, name="Password Reset"), 409, message)
    assert_error(await post_workflow(api, name="Other", triggerIdentifier="password-reset"), 409, message)
    # Another environment may use it.
    other = await created(production_api, name="Password reset")
    assert other["triggers"][0]["identifier"] == "password-reset"


async def test_trigger_identifier_must_be_derivable_or_valid(api: httpx.AsyncClient) -> None:
    assert_validation(await post_workflow(api, name="!!!"), "triggerIdentifier", "must be sent when the name")
    assert_validation(await post_workflow(api, triggerIdentifier="has space"), "triggerIdentifier", "must start with")
    assert_validation(await post_workflow(api, triggerIdentifier="-lead"), "triggerIdentifier")
    workflow = await created(api, name="!!!", triggerIdentifier="symbols")
    assert workflow["triggers"][0]["identifier"] == "symbols"


async def test_name_is_required_and_not_blank(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/workflows", json={"steps": []})
    error = assert_validation(response, "name")
    assert error["messages"] == ["name should not be null or undefined"]
    assert_validation(await post_workflow(api, name="   "), "name", "must not be empty")
    assert_validation(await post_workflow(api, name="x" * 301), "name")


async def test_malformed_body_fields_are_422(api: httpx.AsyncClient) -> None:
    assert_validation(await post_workflow(api, tags="one"), "tags")
    assert_validation(await post_workflow(api, preferenceSettings={"email": "maybe"}), "preferenceSettings.email")
    assert_validation(await post_workflow(api, steps=[{"name": "no template"}]), "steps.0.template")
    bad_filter = {**IN_APP_STEP, "filters": [{"children": [{"field": "a", "value": "b", "operator": "ROUGHLY", "on": "payload"}]}]}
    assert_validation(await post_workflow(api, steps=[bad_filter]), "steps.0.filters.0.children.0.operator")


# --- step types and metadata ---------------------------------------------------------


@pytest.mark.parametrize("step_type", ["trigger"])
async def test_step_types_herald_does_not_run_are_refused(api: httpx.AsyncClient, step_type: str) -> None:
    response = await post_workflow(api, steps=[step_with(step_type)])
    error = assert_validation(response, "steps.0.template.type", f"{step_type} steps are not supported by Herald")
    assert error["value"] == step_type


async def test_unknown_step_type_is_refused(api: httpx.AsyncClient) -> None:
    response = await post_workflow(api, steps=[IN_APP_STEP, step_with("fax")])
    assert_validation(response, "steps.1.template.type", "must be one of in_app, email, sms, chat, push, digest, delay, throttle")


async def test_digest_and_delay_metadata_are_stored(api: httpx.AsyncClient) -> None:
    regular = {"type": "regular", "amount": 5, "unit": "minutes", "digestKey": "postId", "updateMode": False}
    backoff = {"type": "backoff", "amount": 1.5, "unit": "hours", "backoffAmount": 10, "backoffUnit": "seconds"}
    timed = {
        "type": "timed",
        "unit": "months",
        "amount": 1,
        "timed": {"atTime": "09:30", "monthDays": [1, "15"], "monthlyType": "each", "weekDays": ["monday"]},
    }
    timed_on = {"type": "timed", "amount": 2.0, "unit": "weeks", "timed": {"monthlyType": "on", "ordinal": 2, "ordinalValue": "weekday"}}
    last_day = {"type": "timed", "unit": "months", "timed": {"monthDays": ["-1"], "atTime": "18:00"}}
    delay = {"type": "regular", "amount": 2, "unit": "days"}
    scheduled = {"type": "scheduled", "delayPath": "sendAt"}
    workflow = await created(
        api,
        steps=[
            step_with("digest", regular),
            step_with("digest", backoff),
            step_with("digest", timed),
            step_with("digest", timed_on),
            step_with("digest", last_day),
            step_with("delay", delay),
            step_with("delay", scheduled),
            IN_APP_STEP,
        ],
    )
    metadata = [step.get("metadata") for step in workflow["steps"]]
    assert metadata[0] == regular
    assert metadata[1] == backoff
    # Month days and ordinals are strings, as the spec types them.
    assert metadata[2]["timed"] == {"atTime": "09:30", "monthDays": ["1", "15"], "monthlyType": "each", "weekDays": ["monday"]}
    assert metadata[3]["timed"] == {"monthlyType": "on", "ordinal": "2", "ordinalValue": "weekday"}
    assert metadata[3]["amount"] == 2 and isinstance(metadata[3]["amount"], int)  # every 2 weeks, a whole number
    assert metadata[4] == last_day
    assert metadata[5] == delay
    assert metadata[6] == scheduled
    assert metadata[7] is None
    # The payload keys the steps read are trigger variables.
    names = [v["name"] for v in workflow["triggers"][0]["variables"]]
    assert names == ["postId", "sendAt", "name"]


@pytest.mark.parametrize(
    ("metadata", "field", "fragment"),
    [
        (None, "steps.0.metadata", "should not be null or undefined"),
        ({"amount": 5, "unit": "minutes"}, "steps.0.metadata.type", "should not be null or undefined"),
        ({"type": "weekly", "amount": 5, "unit": "minutes"}, "steps.0.metadata.type", "must be one of regular, backoff, timed"),
        ({"type": "scheduled", "delayPath": "x"}, "steps.0.metadata.type", "must be one of regular, backoff, timed"),
        ({"type": "regular", "unit": "minutes"}, "steps.0.metadata.amount", "should not be null or undefined"),
        ({"type": "regular", "amount": 5}, "steps.0.metadata.unit", "should not be null or undefined"),
        ({"type": "regular", "amount": 0, "unit": "minutes"}, "steps.0.metadata.amount", "must be greater than 0"),
        ({"type": "regular", "amount": -1, "unit": "minutes"}, "steps.0.metadata.amount", "must be greater than 0"),
        ({"type": "regular", "amount": "5", "unit": "minutes"}, "steps.0.metadata.amount", "must be a number"),
        ({"type": "regular", "amount": True, "unit": "minutes"}, "steps.0.metadata.amount", "must be a number"),
        ({"type": "regular", "amount": 5, "unit": "years"}, "steps.0.metadata.unit", "input should be"),
        ({"type": "regular", "amount": 5, "unit": "minutes", "digestKey": 7}, "steps.0.metadata.digestKey", None),
        ({"type": "regular", "amount": 5, "unit": "minutes", "cron": "* * * * *"}, "steps.0.metadata.cron", "extra inputs"),
        ({"type": "backoff", "amount": 5, "unit": "minutes", "backoffUnit": "minutes"}, "steps.0.metadata.backoffAmount", "should not be null"),
        ({"type": "backoff", "amount": 5, "unit": "minutes", "backoffAmount": 1}, "steps.0.metadata.backoffUnit", "should not be null"),
        ({"type": "regular", "amount": 5, "unit": "minutes", "backoff": True}, "steps.0.metadata.backoffAmount", "should not be null"),
        ({"type": "regular", "amount": 5, "unit": "minutes", "backoffAmount": 0, "backoffUnit": "minutes"}, "steps.0.metadata.backoffAmount", "greater than 0"),
        ({"type": "backoff", "amount": 5, "unit": "minutes", "backoffAmount": 1, "backoffUnit": "decades"}, "steps.0.metadata.backoffUnit", None),
        ({"type": "timed", "amount": -1}, "steps.0.metadata.amount", "greater than or equal to 0"),
        ({"type": "timed", "amount": 1.5, "unit": "days"}, "steps.0.metadata.amount", "must be a whole number of at least 1"),
        ({"type": "timed", "amount": 0, "unit": "days"}, "steps.0.metadata.amount", "must be a whole number of at least 1"),
        ({"type": "regular", "amount": 1.5, "unit": "months"}, "steps.0.metadata.amount", "whole number when the unit is months"),
        ({"type": "backoff", "amount": 1, "unit": "days", "backoffAmount": 0.5, "backoffUnit": "months"}, "steps.0.metadata.backoffAmount", "whole number when the unit is months"),
        ({"type": "timed", "timed": {"monthDays": ["-2"]}}, "steps.0.metadata.timed.monthDays", '"-1" for the last day'),
        ({"type": "timed", "timed": {"atTime": "25:00"}}, "steps.0.metadata.timed.atTime", '"HH:MM"'),
        ({"type": "timed", "timed": {"atTime": "9am"}}, "steps.0.metadata.timed.atTime", '"HH:MM"'),
        ({"type": "timed", "timed": {"weekDays": ["funday"]}}, "steps.0.metadata.timed.weekDays.0", None),
        ({"type": "timed", "timed": {"monthDays": ["32"]}}, "steps.0.metadata.timed.monthDays", '"1" to "31"'),
        ({"type": "timed", "timed": {"monthDays": [0]}}, "steps.0.metadata.timed.monthDays", '"1" to "31"'),
        ({"type": "timed", "timed": {"ordinal": 6}}, "steps.0.metadata.timed.ordinal", None),
        ({"type": "timed", "timed": {"ordinalValue": "someday"}}, "steps.0.metadata.timed.ordinalValue", None),
        ({"type": "timed", "timed": {"monthlyType": "sometimes"}}, "steps.0.metadata.timed.monthlyType", None),
        ({"type": "timed", "timed": {"monthlyType": "on", "ordinalValue": "day"}}, "steps.0.metadata.timed.ordinal", "should not be null"),
        ({"type": "timed", "timed": {"monthlyType": "on", "ordinal": "last"}}, "steps.0.metadata.timed.ordinalValue", "should not be null"),
        ({"type": "timed", "timed": {"cron": "0 9 * * *"}}, "steps.0.metadata.timed.cron", "extra inputs"),
        ("every hour", "steps.0.metadata", None),
    ],
)
async def test_invalid_digest_metadata_is_422(
    api: httpx.AsyncClient, metadata: Any, field: str, fragment: str | None
) -> None:
    step = step_with("digest")
    if metadata is not None:
        step["metadata"] = metadata
    response = await post_workflow(api, steps=[step, IN_APP_STEP])
    assert_validation(response, field, fragment)


@pytest.mark.parametrize(
    ("metadata", "field", "fragment"),
    [
        (None, "steps.0.metadata", "should not be null or undefined"),
        ({"type": "backoff", "amount": 1, "unit": "minutes"}, "steps.0.metadata.type", "must be one of regular, scheduled"),
        ({"type": "timed"}, "steps.0.metadata.type", "must be one of regular, scheduled for delay steps"),
        ({"type": "regular", "unit": "minutes"}, "steps.0.metadata.amount", "should not be null"),
        ({"type": "regular", "amount": 1}, "steps.0.metadata.unit", "should not be null"),
        ({"type": "regular", "amount": 0, "unit": "minutes"}, "steps.0.metadata.amount", "greater than 0"),
        ({"type": "regular", "amount": 1, "unit": "fortnights"}, "steps.0.metadata.unit", None),
        ({"type": "regular", "amount": 2.5, "unit": "months"}, "steps.0.metadata.amount", "whole number when the unit is months"),
        ({"type": "regular", "amount": 1, "unit": "minutes", "digestKey": "x"}, "steps.0.metadata.digestKey", "extra inputs"),
        ({"type": "scheduled"}, "steps.0.metadata.delayPath", "should not be null"),
        ({"type": "scheduled", "delayPath": ""}, "steps.0.metadata.delayPath", None),
    ],
)
async def test_invalid_delay_metadata_is_422(api: httpx.AsyncClient, metadata: Any, field: str, fragment: str | None) -> None:
    response = await post_workflow(api, steps=[step_with("delay", metadata), IN_APP_STEP])
    assert_validation(response, field, fragment)


async def test_metadata_errors_name_every_bad_step(api: httpx.AsyncClient) -> None:
    response = await post_workflow(
        api,
        steps=[
            IN_APP_STEP,
            step_with("delay", {"type": "regular", "amount": 1}),
            {**step_with("email"), "variants": [step_with("email", {"type": "regular"})]},
        ],
    )
    body = assert_error(response, 422, "Validation Error")
    assert set(body["errors"]) == {"steps.1.metadata.unit", "steps.2.variants.0.metadata"}
    assert body["errors"]["steps.2.variants.0.metadata"]["messages"] == [
        "steps.2.variants.0.metadata: metadata applies to digest, delay and throttle steps only"
    ]


async def test_channel_steps_take_no_metadata(api: httpx.AsyncClient) -> None:
    response = await post_workflow(api, steps=[{**IN_APP_STEP, "metadata": {"type": "regular", "amount": 1, "unit": "days"}}])
    assert_validation(response, "steps.0.metadata", "metadata applies to digest, delay and throttle steps only")
    # An empty object says nothing, and is not stored.
    workflow = await created(api, steps=[{**IN_APP_STEP, "metadata": {}}])
    assert "metadata" not in workflow["steps"][0]


async def test_step_content_shape(api: httpx.AsyncClient) -> None:
    blocks = [{"type": "text", "content": "Hi"}]
    assert_validation(await post_workflow(api, steps=[step_with("in_app", content=blocks)]), "steps.0.template.content", "must be a string for in_app steps")
    assert_validation(await post_workflow(api, steps=[step_with("sms", content=blocks)]), "steps.0.template.content")
    assert_validation(
        await post_workflow(api, steps=[step_with("email", content=[{"type": "video", "content": "x"}])]),
        "steps.0.template.content.0.type",
    )
    assert_validation(
        await post_workflow(api, steps=[step_with("email", content="x", contentType="markdown")]),
        "steps.0.template.contentType",
    )


async def test_variants_share_their_step_type(api: httpx.AsyncClient) -> None:
    step = {**step_with("email", content="x"), "variants": [step_with("sms", content="y")]}
    assert_validation(await post_workflow(api, steps=[step]), "steps.0.variants.0.template.type", "must be email")


async def test_step_ids_are_unique_within_a_workflow(api: httpx.AsyncClient) -> None:
    first = {**IN_APP_STEP, "_id": "aaaaaaaaaaaaaaaaaaaaaaaa"}
    second = {**IN_APP_STEP, "_id": "aaaaaaaaaaaaaaaaaaaaaaaa", "uuid": "u1"}
    third = {**IN_APP_STEP, "uuid": "u1"}
    body = assert_error(await post_workflow(api, steps=[first, second, third]), 422, "Validation Error")
    assert set(body["errors"]) == {"steps.1._id", "steps.2.uuid"}


# --- variables ----------------------------------------------------------------------


async def test_trigger_variables_come_from_every_template_text(api: httpx.AsyncClient) -> None:
    in_app = step_with(
        "in_app",
        content="Hello {{payload.name}} {{ payload.order.id }} and {{firstName}} from {{actor.firstName}}",
        cta={"type": "redirect", "data": {"url": "https://x.test/{{payload.path}}"}},
    )
    push = step_with("push", title="{{subscriber.lastName}} {{tenant.name}} {{step.total_count}}", content="{{#each payload.items}}{{title}}{{/each}}")
    workflow = await created(api, steps=[in_app, push])
    trigger = workflow["triggers"][0]
    assert trigger["variables"] == [
        {"name": "name"},
        {"name": "order.id"},
        {"name": "firstName"},
        {"name": "path"},
        {"name": "items"},
    ]
    assert trigger["subscriberVariables"] == [{"name": "lastName"}]


# --- list -----------------------------------------------------------------------------


async def test_list_is_paginated_newest_first(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    names = ["First", "Second", "Third"]
    for name in names:
        await created(api, name=name)
    await created(production_api, name="Elsewhere")
    response = await api.get("/v1/workflows", params={"page": 0, "limit": 2})
    assert response.status_code == 200
    body = response.json()
    assert [w["name"] for w in body["data"]] == ["Third", "Second"]
    assert (body["page"], body["pageSize"], body["totalCount"], body["hasMore"]) == (0, 2, 3, True)
    assert SPEC_REQUIRED <= body["data"][0].keys()
    assert body["data"][0]["notificationGroup"]["name"] == "General"
    body = (await api.get("/v1/workflows", params={"page": 1, "limit": 2})).json()
    assert [w["name"] for w in body["data"]] == ["First"]
    assert (body["page"], body["totalCount"], body["hasMore"]) == (1, 3, False)
    body = (await api.get("/v1/workflows")).json()
    assert body["pageSize"] == 10 and body["totalCount"] == 3


async def test_list_filters_by_query(api: httpx.AsyncClient) -> None:
    await created(api, name="Order shipped")
    await created(api, name="Password reset")
    await created(api, name="Weekly digest", triggerIdentifier="orders-digest")
    body = (await api.get("/v1/workflows", params={"query": "ORDER"})).json()
    assert sorted(w["name"] for w in body["data"]) == ["Order shipped", "Weekly digest"]
    assert body["totalCount"] == 2
    # Wildcards are literal characters.
    assert (await api.get("/v1/workflows", params={"query": "%"})).json()["totalCount"] == 0


async def test_list_rejects_bad_page_params(api: httpx.AsyncClient) -> None:
    assert_validation(await api.get("/v1/workflows", params={"limit": 101}), "limit")
    assert_validation(await api.get("/v1/workflows", params={"limit": 0}), "limit")
    assert_validation(await api.get("/v1/workflows", params={"page": -1}), "page")


# --- update -----------------------------------------------------------------------------


async def test_update_changes_only_what_is_sent(api: httpx.AsyncClient) -> None:
    workflow = await created(api, name="Welcome", tags=["a"], description="d", data={"k": 1})
    response = await api.put(f"/v1/workflows/{workflow['_id']}", json={"name": "Welcome v2", "critical": True})
    assert response.status_code == 200, response.text
    updated = response.json()["data"]
    assert updated["name"] == "Welcome v2"
    # Renaming keeps the identifier callers trigger by.
    assert updated["triggers"][0]["identifier"] == "welcome"
    assert updated["critical"] is True
    assert updated["tags"] == ["a"] and updated["description"] == "d" and updated["data"] == {"k": 1}
    assert updated["steps"] == workflow["steps"]
    assert updated["createdAt"] == workflow["createdAt"]
    assert SPEC_REQUIRED <= updated.keys()
    updated = (
        await api.put(
            f"/v1/workflows/{workflow['_id']}",
            json={"active": True, "tags": [], "description": None, "data": None, "preferenceSettings": {"push": False}},
        )
    ).json()["data"]
    assert updated["active"] is True and updated["draft"] is False
    assert updated["tags"] == [] and updated["description"] == "" and "data" not in updated
    assert updated["preferenceSettings"]["push"] is False and updated["preferenceSettings"]["email"] is True
    assert (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"] == updated


async def test_update_steps_keeps_ids_sent_back_and_recomputes_variables(api: httpx.AsyncClient) -> None:
    workflow = await created(api)
    [kept] = workflow["steps"]
    new_steps = [
        {"_id": kept["_id"], "name": "inbox", "template": {"type": "in_app", "content": "Bye {{payload.farewell}}"}},
        {"name": "sms", "template": {"type": "sms", "content": "{{subscriber.phone}}"}},
    ]
    response = await api.put(f"/v1/workflows/{workflow['_id']}", json={"steps": new_steps})
    assert response.status_code == 200, response.text
    first, second = response.json()["data"]["steps"]
    assert (first["_id"], first["uuid"], first["_templateId"]) == (kept["_id"], kept["uuid"], kept["_templateId"])
    assert first["template"]["content"] == "Bye {{payload.farewell}}"
    assert second["_id"] != kept["_id"] and second["_parentId"] == kept["_id"]
    trigger = response.json()["data"]["triggers"][0]
    assert trigger["variables"] == [{"name": "farewell"}]
    assert trigger["subscriberVariables"] == [{"name": "phone"}]
    # Steps can be cleared.
    cleared = (await api.put(f"/v1/workflows/{workflow['_id']}", json={"steps": []})).json()["data"]
    assert cleared["steps"] == [] and cleared["triggers"][0]["variables"] == []


async def test_update_validates_like_create(api: httpx.AsyncClient) -> None:
    workflow = await created(api)
    path = f"/v1/workflows/{workflow['_id']}"
    assert_validation(await api.put(path, json={"steps": [step_with("digest", {"type": "regular"})]}), "steps.0.metadata.amount")
    assert_validation(await api.put(path, json={"steps": [step_with("throttle")]}), "steps.0.metadata")
    assert_validation(await api.put(path, json={"steps": [step_with("trigger")]}), "steps.0.template.type")
    assert_validation(await api.put(path, json={"name": ""}), "name")
    # The error names the field as the caller sent it.
    assert_validation(await api.put(path, json={"identifier": "no spaces allowed"}), "identifier")
    assert (await api.get(path)).json()["data"] == workflow


async def test_update_trigger_identifier(api: httpx.AsyncClient) -> None:
    await created(api, name="Taken")
    workflow = await created(api, name="Mine")
    path = f"/v1/workflows/{workflow['_id']}"
    response = await api.put(path, json={"triggerIdentifier": "taken"})
    assert_error(response, 409, "Workflow with trigger identifier taken already exists in this environment")
    # Novu's update body calls it identifier.
    response = await api.put(path, json={"identifier": "mine-renamed"})
    assert response.json()["data"]["triggers"][0]["identifier"] == "mine-renamed"
    # Sending its own identifier back is no clash.
    response = await api.put(path, json={"triggerIdentifier": "mine-renamed", "name": "Mine"})
    assert response.status_code == 200, response.text


async def test_status_route_activates_and_deactivates(api: httpx.AsyncClient) -> None:
    workflow = await created(api)
    path = f"/v1/workflows/{workflow['_id']}/status"
    response = await api.put(path, json={"active": True})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert (data["active"], data["draft"]) == (True, False)
    assert SPEC_REQUIRED <= data.keys()
    data = (await api.put(path, json={"active": False})).json()["data"]
    assert (data["active"], data["draft"]) == (False, True)
    assert_validation(await api.put(path, json={}), "active", "should not be null or undefined")
    assert_validation(await api.put(path, json={"active": "sometimes"}), "active")


# --- delete ---------------------------------------------------------------------------------


async def test_delete_is_soft_and_frees_the_identifier(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    workflow = await created(api, name="Goodbye")
    path = f"/v1/workflows/{workflow['_id']}"
    response = await api.delete(path)
    assert response.status_code == 200
    assert response.json() == {"data": True}
    assert_error(await api.get(path), 404, f"Workflow with id {workflow['_id']} not found")
    assert (await api.get("/v1/workflows")).json()["totalCount"] == 0
    assert_error(await api.delete(path), 404)
    assert_error(await api.put(path, json={"name": "x"}), 404)
    async with app.state.sessionmaker() as session:
        stored = (await session.execute(select(Workflow).where(Workflow.id == workflow["_id"]))).scalar_one()
        key = (await session.execute(select(ApiKey).where(ApiKey.key_hash == hash_api_key(tenancy.api_key)))).scalar_one()
    assert stored.deleted is True
    assert stored.deleted_at is not None
    assert stored.deleted_by == key.id
    again = await created(api, name="Goodbye")
    assert again["triggers"][0]["identifier"] == "goodbye"
    assert again["_id"] != workflow["_id"]


# --- isolation and auth ----------------------------------------------------------------------


async def test_unknown_and_foreign_ids_are_404(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    workflow = await created(api)
    for client, workflow_id in ((api, UNKNOWN_ID), (production_api, workflow["_id"]), (other_org_api, workflow["_id"])):
        path = f"/v1/workflows/{workflow_id}"
        message = f"Workflow with id {workflow_id} not found"
        assert_error(await client.get(path), 404, message)
        assert_error(await client.put(path, json={"name": "x"}), 404, message)
        assert_error(await client.put(f"{path}/status", json={"active": True}), 404, message)
        assert_error(await client.delete(path), 404, message)
    assert (await other_org_api.get("/v1/workflows")).json()["totalCount"] == 0
    # Still there, unchanged.
    assert (await api.get(f"/v1/workflows/{workflow['_id']}")).json()["data"] == workflow


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/workflows"),
        ("GET", "/v1/workflows"),
        ("GET", f"/v1/workflows/{UNKNOWN_ID}"),
        ("PUT", f"/v1/workflows/{UNKNOWN_ID}"),
        ("PUT", f"/v1/workflows/{UNKNOWN_ID}/status"),
        ("DELETE", f"/v1/workflows/{UNKNOWN_ID}"),
        ("GET", "/v1/notification-groups"),
    ],
)
async def test_routes_require_auth(anonymous: httpx.AsyncClient, method: str, path: str) -> None:
    body = {"name": "x", "active": True} if method in ("POST", "PUT") else None
    response = await anonymous.request(method, path, json=body)
    assert_error(response, 401, "Missing authorization header")
    response = await anonymous.request(method, path, json=body, headers={"Authorization": "ApiKey nope"})
    assert_error(response, 401, "API Key not found")


async def test_nul_characters_are_refused_not_a_server_error(api: httpx.AsyncClient) -> None:
    # PostgreSQL cannot store U+0000; the request guard refuses it on every store alike.
    def refused(response: httpx.Response, where: str) -> None:
        body = assert_error(response, 422, "Validation Error")
        assert "NUL" in body["errors"][where]["messages"][0]

    refused(await post_workflow(api, name="a\u0000b", triggerIdentifier="nul"), "body")
    step = {"name": "inbox", "template": {"type": "in_app", "content": "x", "extra": {"k": "\u0000"}}}
    refused(await post_workflow(api, steps=[step]), "body")
    refused(await api.get("/v1/workflows", params={"query": "a\u0000"}), "url")
    refused(await api.get("/v1/workflows/a%00b"), "url")
    workflow = await created(api)
    refused(await api.put(f"/v1/workflows/{workflow['_id']}", json={"data": {"x": "\u0000"}}), "body")


async def test_concurrent_creates_of_one_identifier_make_one_workflow(api: httpx.AsyncClient) -> None:
    responses = await asyncio.gather(*(post_workflow(api, name="Race") for _ in range(5)))
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [201, 409, 409, 409, 409], [r.text for r in responses]
    for response in responses:
        if response.status_code == 409:
            assert_error(response, 409, "Workflow with trigger identifier race already exists in this environment")
    assert (await api.get("/v1/workflows")).json()["totalCount"] == 1


async def test_severity_defaults_to_none_and_takes_novus_levels(api: httpx.AsyncClient) -> None:
    plain = await create_workflow(api)
    assert plain["severity"] == "none"
    high = await create_workflow(api, severity="high")
    assert high["severity"] == "high"
    updated = await api.put(f"/v1/workflows/{high['_id']}", json={"severity": "low"})
    assert updated.status_code == 200, updated.text
    assert updated.json()["data"]["severity"] == "low"
    assert (await api.get(f"/v1/workflows/{high['_id']}")).json()["data"]["severity"] == "low"
    assert_error(await api.post("/v1/workflows", json={"name": "bad", "severity": "urgent"}), 422)


async def test_throttle_metadata_is_checked_and_stored(api: httpx.AsyncClient) -> None:
    fixed = {"type": "fixed", "amount": 1, "unit": "hours", "threshold": 3, "throttleKey": "orderId"}
    dynamic = {"type": "dynamic", "dynamicKey": "window"}
    workflow = await created(api, steps=[step_with("throttle", fixed), step_with("throttle", dynamic), IN_APP_STEP])
    assert [step.get("metadata") for step in workflow["steps"][:2]] == [fixed, {**dynamic, "threshold": 1}]
    # The payload keys it reads are the trigger's variables, as a digest's digestKey is.
    assert {"name": "orderId"} in workflow["triggers"][0]["variables"]
    missing_amount = {"type": "fixed", "unit": "hours"}
    assert_validation(await post_workflow(api, steps=[step_with("throttle", missing_amount)]), "steps.0.metadata.amount")
    no_threshold = {"type": "fixed", "amount": 1, "unit": "hours", "threshold": 0}
    assert_validation(await post_workflow(api, steps=[step_with("throttle", no_threshold)]), "steps.0.metadata.threshold")
    assert_validation(await post_workflow(api, steps=[step_with("throttle", {"type": "sliding"})]), "steps.0.metadata.type")
    assert_validation(await post_workflow(api, steps=[step_with("throttle", {"type": "dynamic"})]), "steps.0.metadata.dynamicKey")
