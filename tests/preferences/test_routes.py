"""The subscriber preference routes: v1 (Novu's shapes) and v2 (as novu-py 3.19 parses them)."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from novu_py import models
from sqlalchemy import func, select

from herald.models import SubscriberPreference
from tests.conftest import assert_error
from tests.fixtures.builders import create_subscriber, create_workflow, unique

SMS = {"name": "text", "template": {"type": "sms", "content": "hi"}}
IN_APP = {"name": "inbox", "template": {"type": "in_app", "content": "hi"}}


def unwrap(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["data"], body
    return body["data"]


def by_workflow(entries: list[dict[str, Any]], workflow: dict[str, Any]) -> dict[str, Any]:
    [entry] = [entry for entry in entries if entry["template"]["_id"] == workflow["_id"]]
    return entry


# v1 -----------------------------------------------------------------------------


async def test_v1_lists_every_active_workflow_with_its_merged_channels(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[IN_APP, SMS], preferenceSettings={"sms": False})
    critical = await create_workflow(api, critical=True)
    inactive = await create_workflow(api, active=False)
    entries = unwrap(await api.get(f"/v1/subscribers/{subscriber['subscriberId']}/preferences"))
    assert inactive["_id"] not in {entry["template"]["_id"] for entry in entries}
    entry = by_workflow(entries, workflow)
    assert entry["template"] == {
        "_id": workflow["_id"],
        "name": workflow["name"],
        "critical": False,
        "triggers": workflow["triggers"],
    }
    assert entry["preference"]["enabled"] is True
    assert entry["preference"]["channels"] == {"email": True, "sms": False, "in_app": True, "chat": True, "push": True}
    assert {o["channel"]: o["source"] for o in entry["preference"]["overrides"]} == dict.fromkeys(
        ["email", "sms", "in_app", "chat", "push"], "template"
    )
    assert by_workflow(entries, critical)["template"]["critical"] is True

    # Only the channels of the workflow's active steps, when asked.
    entries = unwrap(await api.get(f"/v1/subscribers/{subscriber['subscriberId']}/preferences?includeInactiveChannels=false"))
    assert by_workflow(entries, workflow)["preference"]["channels"] == {"sms": False, "in_app": True}


async def test_v1_patch_a_workflow_by_id_or_identifier(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[IN_APP, SMS], preferenceSettings={"sms": False})
    path = f"/v1/subscribers/{subscriber['subscriberId']}/preferences"

    updated = unwrap(await api.patch(f"{path}/{workflow['_id']}", json={"channel": {"type": "sms", "enabled": True}}))
    assert updated["template"]["_id"] == workflow["_id"]
    assert updated["preference"]["enabled"] is True
    assert updated["preference"]["channels"]["sms"] is True
    assert {"channel": "sms", "source": "subscriber"} in updated["preference"]["overrides"]
    assert {"channel": "email", "source": "template"} in updated["preference"]["overrides"]

    identifier = workflow["triggers"][0]["identifier"]
    updated = unwrap(await api.patch(f"{path}/{identifier}", json={"enabled": False}))
    assert updated["preference"]["enabled"] is False
    assert updated["preference"]["channels"]["sms"] is True  # the channel set before is kept

    entry = by_workflow(unwrap(await api.get(path)), workflow)
    assert entry["preference"] == updated["preference"]
    [level] = [e for e in unwrap(await api.get(f"{path}/template")) if e["template"]["_id"] == workflow["_id"]]
    assert level["level"] == "template" and level["preference"] == updated["preference"]


async def test_v1_global_preference(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/preferences"
    everything_on = {"email": True, "sms": True, "in_app": True, "chat": True, "push": True}
    assert unwrap(await api.get(f"{path}/global")) == [{"level": "global", "preference": {"enabled": True, "channels": everything_on}}]

    updated = unwrap(await api.patch(path, json={"preferences": [{"type": "email", "enabled": False}]}))
    assert updated == {"preference": {"enabled": True, "channels": {**everything_on, "email": False}}}
    updated = unwrap(await api.patch(path, json={"enabled": False, "preferences": [{"type": "push", "enabled": False}]}))
    assert updated == {"preference": {"enabled": False, "channels": {**everything_on, "email": False, "push": False}}}
    assert unwrap(await api.get(f"{path}/global"))[0]["preference"] == updated["preference"]


async def test_v1_refuses_what_it_cannot_use(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/preferences"
    assert_error(await api.patch(f"{path}/{workflow['_id']}", json={"channel": {"type": "fax", "enabled": False}}), 422)
    assert_error(await api.patch(f"{path}/{workflow['_id']}", json={"enabled": "maybe"}), 422)
    assert_error(await api.patch(path, json={"preferences": [{"type": "pigeon", "enabled": False}]}), 422)
    assert_error(await api.get(f"{path}/everything"), 422)
    assert_error(await api.get("/v1/subscribers/nobody/preferences"), 404, "Subscriber: nobody was not found")
    assert_error(await api.get("/v1/subscribers/nobody/preferences/global"), 404)
    assert_error(await api.patch("/v1/subscribers/nobody/preferences", json={"enabled": False}), 404)
    assert_error(await api.patch(f"/v1/subscribers/nobody/preferences/{workflow['_id']}", json={"enabled": False}), 404)
    assert_error(await api.patch(f"{path}/no-such-workflow", json={"enabled": False}), 404, "Workflow with id no-such-workflow not found")


# v2 -----------------------------------------------------------------------------


async def test_v2_reads_what_v1_set_in_the_sdk_shape(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[IN_APP, SMS], preferenceSettings={"sms": False})
    critical = await create_workflow(api, critical=True)
    await api.patch(f"/v1/subscribers/{subscriber['subscriberId']}/preferences/{workflow['_id']}", json={"channel": {"type": "in_app", "enabled": False}})

    data = unwrap(await api.get(f"/v2/subscribers/{subscriber['subscriberId']}/preferences"))
    parsed = models.GetSubscriberPreferencesDto.model_validate(data)
    assert parsed.global_.enabled is True
    assert parsed.global_.schedule is None
    identifier = workflow["triggers"][0]["identifier"]
    [mine] = [w for w in parsed.workflows if w.workflow.identifier == identifier]
    assert critical["triggers"][0]["identifier"] not in {w.workflow.identifier for w in parsed.workflows}
    assert mine.workflow.name == workflow["name"] and mine.workflow.slug == identifier
    assert mine.enabled is True
    assert mine.channels.model_dump(exclude_none=True) == {"in_app": False, "sms": False}
    assert {(o.channel.value, o.source.value) for o in mine.overrides} == {("in_app", "subscriber"), ("sms", "template")}
    assert mine.updated_at is not None

    every = unwrap(await api.get(f"/v2/subscribers/{subscriber['subscriberId']}/preferences?criticality=all"))
    assert critical["triggers"][0]["identifier"] in {w["workflow"]["identifier"] for w in every["workflows"]}
    only = unwrap(await api.get(f"/v2/subscribers/{subscriber['subscriberId']}/preferences?criticality=critical"))
    assert [w["workflow"]["identifier"] for w in only["workflows"]] == [critical["triggers"][0]["identifier"]]


async def test_v2_patch_global_with_a_schedule_and_one_workflow(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[IN_APP, SMS])
    path = f"/v2/subscribers/{subscriber['subscriberId']}/preferences"
    schedule = {
        "isEnabled": True,
        "weeklySchedule": {
            "monday": {"isEnabled": True, "hours": [{"start": "09:00 AM", "end": "05:00 PM"}]},
            "sunday": {"isEnabled": False},
        },
    }
    data = unwrap(await api.patch(path, json={"channels": {"email": False}, "schedule": schedule}))
    parsed = models.GetSubscriberPreferencesDto.model_validate(data)
    assert parsed.global_.channels.email is False and parsed.global_.channels.sms is True
    assert data["global"]["schedule"] == schedule
    # A later change of channels keeps the schedule.
    data = unwrap(await api.patch(path, json={"channels": {"sms": False}}))
    assert data["global"]["schedule"] == schedule
    assert data["global"]["channels"]["email"] is False and data["global"]["channels"]["sms"] is False

    data = unwrap(await api.patch(path, json={"workflowId": workflow["_id"], "channels": {"sms": False}}))
    parsed = models.GetSubscriberPreferencesDto.model_validate(data)
    [mine] = [w for w in parsed.workflows if w.workflow.identifier == workflow["triggers"][0]["identifier"]]
    assert mine.channels.sms is False and mine.channels.in_app is True

    # What v2 set, v1 reads.
    level = unwrap(await api.get(f"/v1/subscribers/{subscriber['subscriberId']}/preferences/global"))
    assert level[0]["preference"]["channels"]["email"] is False


async def test_v2_bulk_update(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    first = await create_workflow(api, steps=[IN_APP, SMS])
    second = await create_workflow(api, steps=[IN_APP], tags=["billing"])
    path = f"/v2/subscribers/{subscriber['subscriberId']}/preferences/bulk"
    data = unwrap(
        await api.patch(
            path,
            json={
                "preferences": [
                    {"workflowId": first["_id"], "channels": {"sms": False}},
                    {"workflowId": second["triggers"][0]["identifier"], "channels": {"in_app": False}},
                ]
            },
        )
    )
    parsed = [models.GetPreferencesResponseDto.model_validate(entry) for entry in data]
    assert [p.level.value for p in parsed] == ["template", "template"]
    assert parsed[0].workflow.id == first["_id"] and parsed[0].channels.sms is False and parsed[0].channels.in_app is True
    assert parsed[1].workflow.identifier == second["triggers"][0]["identifier"]
    assert parsed[1].workflow.tags == ["billing"] and parsed[1].channels.in_app is False

    # One unknown workflow: 404, and nothing changes.
    response = await api.patch(
        path,
        json={"preferences": [{"workflowId": first["_id"], "channels": {"sms": True}}, {"workflowId": "nope", "channels": {}}]},
    )
    assert_error(response, 404, "Workflow with id nope not found")
    entries = unwrap(await api.get(f"/v1/subscribers/{subscriber['subscriberId']}/preferences"))
    assert by_workflow(entries, first)["preference"]["channels"]["sms"] is False


async def test_v2_answers_name_the_workflows_severity(api: httpx.AsyncClient) -> None:
    """The bulk update answers each workflow with its severity (it answered none for every workflow)."""
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, severity="high")
    path = f"/v2/subscribers/{subscriber['subscriberId']}/preferences"
    change = {"workflowId": workflow["_id"], "channels": {"in_app": False}}
    [bulk] = unwrap(await api.patch(f"{path}/bulk", json={"preferences": [change]}))
    assert models.GetPreferencesResponseDto.model_validate(bulk).workflow.severity.value == "high"


async def test_v2_refuses_what_it_cannot_use(api: httpx.AsyncClient) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api)
    path = f"/v2/subscribers/{subscriber['subscriberId']}/preferences"
    assert_error(await api.patch(path, json={"channels": {"fax": True}}), 422)
    assert_error(await api.patch(path, json={"channels": {"email": "no"}}), 422)
    assert_error(await api.patch(path, json={"schedule": {"weeklySchedule": {}}}), 422)  # isEnabled is required
    assert_error(
        await api.patch(path, json={"schedule": {"isEnabled": True, "weeklySchedule": {"monday": {"isEnabled": True, "hours": [{"start": "soon", "end": "later"}]}}}}),
        422,
    )
    assert_error(await api.patch(path, json={"workflowId": workflow["_id"], "schedule": {"isEnabled": True}}), 422)
    assert_error(await api.patch(path, json={"workflowId": "nope", "channels": {"email": False}}), 404)
    assert_error(await api.patch(f"{path}/bulk", json={"preferences": []}), 422)
    assert_error(await api.patch(f"{path}/bulk", json={"preferences": [{"workflowId": workflow["_id"], "channels": {"tool": True}}]}), 422)
    assert_error(await api.get(f"{path}?criticality=some"), 422)
    assert_error(await api.get("/v2/subscribers/nobody/preferences"), 404)
    assert_error(await api.patch("/v2/subscribers/nobody/preferences", json={"channels": {"email": False}}), 404)
    assert_error(await api.patch("/v2/subscribers/nobody/preferences/bulk", json={"preferences": [{"workflowId": workflow["_id"], "channels": {}}]}), 404)


# Scope and lifetime ------------------------------------------------------------------


async def test_another_environment_can_neither_read_nor_change_them(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api)
    subscriber_id = subscriber["subscriberId"]
    await api.patch(f"/v1/subscribers/{subscriber_id}/preferences", json={"enabled": False})
    for other in (production_api, other_org_api):
        assert_error(await other.get(f"/v1/subscribers/{subscriber_id}/preferences"), 404)
        assert_error(await other.get(f"/v1/subscribers/{subscriber_id}/preferences/global"), 404)
        assert_error(await other.patch(f"/v1/subscribers/{subscriber_id}/preferences", json={"enabled": True}), 404)
        assert_error(await other.get(f"/v2/subscribers/{subscriber_id}/preferences"), 404)
        assert_error(await other.patch(f"/v2/subscribers/{subscriber_id}/preferences", json={"channels": {"email": True}}), 404)
        # Their own subscriber of the same subscriberId cannot reach our workflow either.
        await create_subscriber(other, subscriberId=subscriber_id)
        assert_error(await other.patch(f"/v1/subscribers/{subscriber_id}/preferences/{workflow['_id']}", json={"enabled": False}), 404)
        assert_error(
            await other.patch(f"/v2/subscribers/{subscriber_id}/preferences/bulk", json={"preferences": [{"workflowId": workflow["_id"], "channels": {}}]}),
            404,
        )
        # Theirs is a subscriber of its own, with preferences of its own.
        assert unwrap(await other.get(f"/v1/subscribers/{subscriber_id}/preferences/global"))[0]["preference"]["enabled"] is True
    assert unwrap(await api.get(f"/v1/subscribers/{subscriber_id}/preferences/global"))[0]["preference"]["enabled"] is False


async def test_preferences_go_with_their_subscriber(api: httpx.AsyncClient, app: FastAPI) -> None:
    subscriber = await create_subscriber(api, subscriberId=unique("leaving"))
    workflow = await create_workflow(api)
    path = f"/v1/subscribers/{subscriber['subscriberId']}/preferences"
    await api.patch(path, json={"enabled": False})
    await api.patch(f"{path}/{workflow['_id']}", json={"enabled": False})

    async def stored() -> int:
        async with app.state.sessionmaker() as session:
            return int(
                await session.scalar(
                    select(func.count()).select_from(SubscriberPreference).where(SubscriberPreference.subscriber_id == subscriber["_id"])
                )
                or 0
            )

    assert await stored() == 2
    assert (await api.delete(f"/v1/subscribers/{subscriber['subscriberId']}")).status_code == 200
    assert await stored() == 0
    # A subscriber made again under the same subscriberId starts afresh.
    await create_subscriber(api, subscriberId=subscriber["subscriberId"])
    assert unwrap(await api.get(f"{path}/global"))[0]["preference"]["enabled"] is True
