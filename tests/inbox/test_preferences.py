"""The Inbox's preferences (/v1/inbox/preferences*) as @novu/js 3.19 calls them, for the token's subscriber.

Shapes are what @novu/js maps into its ``Preference`` objects: ``level``, ``enabled``, ``channels``, ``workflow``
(``id``, ``identifier``, ``name``, ``critical``, ``tags``, ``severity``, ``data``) and, for the global one,
``schedule``. They write the rows the engine reads: a preference set here is obeyed by the next delivery.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.engine.worker import Worker
from tests.conftest import Tenancy, assert_error, make_client
from tests.engine.conftest import details_of, messages_of, trigger
from tests.engine.test_delivery import EMAIL, IN_APP, SMS, name_of, settle
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.inbox.test_routes import application_identifier, start_session, worker  # noqa: F401 (fixture)

PATH = "/v1/inbox/preferences"
SCHEDULE = {
    "isEnabled": True,
    "weeklySchedule": {
        "monday": {"isEnabled": True, "hours": [{"start": "09:00 AM", "end": "05:00 PM"}]},
        "saturday": {"isEnabled": False},
    },
}


async def open_inbox(app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient) -> tuple[httpx.AsyncClient, dict[str, Any]]:
    """A new subscriber's inbox client (authenticated with its session's token), and the subscriber."""
    subscriber = await create_subscriber(api)
    identifier = await application_identifier(app, tenancy.environment_id)
    response = await start_session(app, {"applicationIdentifier": identifier, "subscriber": {"subscriberId": subscriber["subscriberId"]}})
    assert response.status_code == 201, response.text
    return make_client(app, Authorization=f"Bearer {response.json()['data']['token']}"), subscriber


@pytest.fixture
async def inbox(app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    client, _ = await open_inbox(app, tenancy, api)
    async with client:
        yield client


async def listed(client: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    response = await client.get(PATH, params=params)
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def patched(client: httpx.AsyncClient, path: str, body: Any) -> Any:
    response = await client.patch(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def by_workflow(preferences: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {entry["workflow"]["identifier"]: entry for entry in preferences if entry["level"] == "template"}


async def test_the_list_is_the_global_preference_then_each_active_non_critical_workflow_as_novu_js_reads_it(
    inbox: httpx.AsyncClient, api: httpx.AsyncClient
) -> None:
    plain = await create_workflow(api, steps=[IN_APP, EMAIL])
    tagged = await create_workflow(api, severity="high", tags=["billing", "team"], data={"group": "money"})
    critical = await create_workflow(api, critical=True)
    inactive = await create_workflow(api, active=False)
    preferences = await listed(inbox, criticality="nonCritical")
    # The global preference: the channels some active workflow's steps deliver on, as Novu's Inbox answers it.
    assert preferences[0] == {"level": "global", "enabled": True, "channels": {"email": True, "in_app": True}}
    assert [entry["workflow"]["id"] for entry in preferences[1:]] == [plain["_id"], tagged["_id"]]
    assert preferences[1] == {
        "level": "template",
        "enabled": True,
        # The channels of the workflow's steps only, as Novu's Inbox answers them.
        "channels": {"in_app": True, "email": True},
        "overrides": [{"channel": "email", "source": "template"}, {"channel": "in_app", "source": "template"}],
        "workflow": {
            "id": plain["_id"],
            "identifier": name_of(plain),
            "name": plain["name"],
            "critical": False,
            "tags": [],
            "severity": "none",
        },
    }
    assert preferences[2]["workflow"] == {
        "id": tagged["_id"],
        "identifier": name_of(tagged),
        "name": tagged["name"],
        "critical": False,
        "tags": ["billing", "team"],
        "severity": "high",
        "data": {"group": "money"},
    }
    # No query at all lists the same; criticality picks the critical ones or all; never the inactive one.
    assert await listed(inbox) == preferences
    assert [entry["workflow"]["id"] for entry in (await listed(inbox, criticality="critical"))[1:]] == [critical["_id"]]
    every = await listed(inbox, criticality="all")
    assert [entry["workflow"]["id"] for entry in every[1:]] == [plain["_id"], tagged["_id"], critical["_id"]]
    assert inactive["_id"] not in {entry["workflow"]["id"] for entry in every[1:]}
    # The Inbox's filters, as @novu/js sends them: tags[] (any of them) and severity[] (or severity).
    assert list(by_workflow(await listed(inbox, **{"tags[]": ["team", "nothing"]}))) == [name_of(tagged)]
    assert list(by_workflow(await listed(inbox, **{"severity[]": ["high", "low"]}))) == [name_of(tagged)]
    assert list(by_workflow(await listed(inbox, severity="none"))) == [name_of(plain)]
    assert (await listed(inbox, **{"tags[]": "nothing"}))[0]["level"] == "global"
    assert_error(await inbox.get(PATH, params={"severity[]": "urgent"}), 422)
    assert_error(await inbox.get(PATH, params={"criticality": "some"}), 422)


async def test_the_global_preference_takes_channels_and_a_schedule_and_answers_them(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient
) -> None:
    inbox, subscriber = await open_inbox(app, tenancy, api)
    async with inbox:
        await create_workflow(api, steps=[IN_APP, EMAIL])
        await create_workflow(api, steps=[SMS])
        answer = await patched(inbox, PATH, {"email": False, "schedule": SCHEDULE})
        assert answer == {
            "level": "global",
            "enabled": True,
            "channels": {"email": False, "sms": True, "in_app": True},
            "schedule": SCHEDULE,
        }
        # The schedule is kept by a change that does not name it; channels not named keep their value. A channel no
        # workflow uses is kept and not answered (the API-key routes show every channel).
        again = await patched(inbox, PATH, {"sms": False, "push": False})
        assert again["channels"] == {"email": False, "sms": False, "in_app": True}
        assert again["schedule"] == SCHEDULE
        stored = (await api.get(f"/v2/subscribers/{subscriber['subscriberId']}/preferences")).json()["data"]["global"]
        assert stored["channels"] == {"email": False, "sms": False, "in_app": True, "chat": True, "push": False}
        assert stored["schedule"] == SCHEDULE
        # Only the schedule, as @novu/js's schedule.update() sends it.
        turned_off = await patched(inbox, PATH, {"schedule": {"isEnabled": False, "weeklySchedule": SCHEDULE["weeklySchedule"]}})
        assert turned_off["schedule"] == {"isEnabled": False, "weeklySchedule": SCHEDULE["weeklySchedule"]}
        assert turned_off["channels"]["email"] is False
        response = await inbox.get(f"{PATH}/global")
        assert response.status_code == 200, response.text
        assert response.json()["data"] == turned_off
        assert (await listed(inbox))[0] == turned_off


async def test_the_global_preference_without_a_schedule_has_none(inbox: httpx.AsyncClient, api: httpx.AsyncClient) -> None:
    response = await inbox.get(f"{PATH}/global")
    assert response.status_code == 200, response.text
    # No workflow: no channel to show.
    assert response.json()["data"] == {"level": "global", "enabled": True, "channels": {}}
    await create_workflow(api, steps=[IN_APP])
    await create_workflow(api, steps=[SMS], active=False)
    await create_workflow(api, steps=[IN_APP, {**EMAIL, "active": False}])
    response = await inbox.get(f"{PATH}/global")
    assert response.json()["data"] == {"level": "global", "enabled": True, "channels": {"in_app": True}}


async def test_a_workflow_preference_is_changed_by_its_id_or_its_identifier(
    inbox: httpx.AsyncClient, api: httpx.AsyncClient, production_api: httpx.AsyncClient
) -> None:
    workflow = await create_workflow(api, steps=[IN_APP, EMAIL], preferenceSettings={"email": False})
    other = await create_workflow(api)
    # What @novu/js sends: the workflow's id, the channels flat.
    answer = await patched(inbox, f"{PATH}/{workflow['_id']}", {"email": True})
    assert answer["level"] == "template"
    assert answer["enabled"] is True
    assert answer["channels"] == {"in_app": True, "email": True}
    assert answer["overrides"] == [{"channel": "email", "source": "subscriber"}, {"channel": "in_app", "source": "template"}]
    assert answer["workflow"]["id"] == workflow["_id"] and answer["workflow"]["identifier"] == name_of(workflow)
    answer = await patched(inbox, f"{PATH}/{name_of(workflow)}", {"in_app": False})
    assert answer["channels"] == {"in_app": False, "email": True}
    listing = by_workflow(await listed(inbox))
    assert listing[name_of(workflow)] == answer
    assert listing[name_of(other)]["channels"] == {"in_app": True}
    # The global preference is untouched.
    assert (await listed(inbox))[0]["channels"]["in_app"] is True
    assert_error(await inbox.patch(f"{PATH}/no-such-workflow", json={"email": False}), 404)
    # Another environment's workflow is not found either.
    elsewhere = await create_workflow(production_api)
    assert_error(await inbox.patch(f"{PATH}/{elsewhere['_id']}", json={"email": False}), 404)


async def test_a_critical_workflow_preference_is_refused_with_novus_error(
    inbox: httpx.AsyncClient, api: httpx.AsyncClient
) -> None:
    critical = await create_workflow(api, critical=True)
    plain = await create_workflow(api)
    assert_error(
        await inbox.patch(f"{PATH}/{critical['_id']}", json={"in_app": False}),
        400,
        f"Critical workflow with id: {critical['_id']} can not be updated",
    )
    assert_error(
        await inbox.patch(f"{PATH}/{name_of(critical)}", json={"in_app": False}),
        400,
        f"Critical workflow with id: {name_of(critical)} can not be updated",
    )
    assert_error(
        await inbox.patch(
            f"{PATH}/bulk",
            json={"preferences": [{"workflowId": plain["_id"], "in_app": False}, {"workflowId": name_of(critical), "in_app": False}]},
        ),
        400,
        f"Critical workflows with ids: {critical['_id']} cannot be updated",
    )
    # Nothing changed, not even the other workflow of the refused bulk.
    every = by_workflow(await listed(inbox, criticality="all"))
    assert every[name_of(critical)]["channels"] == {"in_app": True}
    assert every[name_of(plain)]["channels"] == {"in_app": True}


async def test_bulk_changes_several_workflows_and_answers_each(inbox: httpx.AsyncClient, api: httpx.AsyncClient) -> None:
    first = await create_workflow(api, steps=[IN_APP, EMAIL])
    second = await create_workflow(api)
    # What @novu/js sends: {preferences: [{workflowId, ...channels}]}, workflowId the id (or identifier).
    answer = await patched(
        inbox,
        f"{PATH}/bulk",
        {"preferences": [{"workflowId": first["_id"], "email": False}, {"workflowId": name_of(second), "in_app": False}]},
    )
    assert [entry["level"] for entry in answer] == ["template", "template"]
    assert [entry["workflow"]["id"] for entry in answer] == [first["_id"], second["_id"]]
    assert answer[0]["channels"] == {"in_app": True, "email": False}
    assert answer[1]["channels"] == {"in_app": False}
    listing = by_workflow(await listed(inbox))
    assert listing[name_of(first)] == answer[0] and listing[name_of(second)] == answer[1]
    # An unknown workflow: 404, and nothing of the bulk changes.
    response = await inbox.patch(
        f"{PATH}/bulk",
        json={"preferences": [{"workflowId": first["_id"], "email": True}, {"workflowId": "no-such-workflow", "email": True}]},
    )
    assert_error(response, 404)
    assert by_workflow(await listed(inbox))[name_of(first)]["channels"]["email"] is False
    assert_error(await inbox.patch(f"{PATH}/bulk", json={"preferences": []}), 400, "No preferences provided for bulk update")
    too_many = [{"workflowId": f"w{i}", "email": True} for i in range(101)]
    assert_error(await inbox.patch(f"{PATH}/bulk", json={"preferences": too_many}), 422)


async def test_a_preference_set_in_the_inbox_is_obeyed_by_the_engine(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient, worker: Worker  # noqa: F811
) -> None:
    client, subscriber = await open_inbox(app, tenancy, api)
    workflow = await create_workflow(api, steps=[IN_APP, EMAIL])
    async with client:
        await patched(client, PATH, {"email": False})
        await patched(client, f"{PATH}/{workflow['_id']}", {"in_app": False})
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "A-1"})
    jobs = await settle(worker, app, result["transactionId"])
    assert {job.step_type: job.status for job in jobs} == {"in_app": "canceled", "email": "canceled"}
    assert await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"]) == []
    details = [detail.detail for detail in await details_of(app, result["transactionId"])]
    assert f"preferences: channel in_app disabled by the subscriber for workflow {name_of(workflow)}" in details
    assert "preferences: channel email disabled by the subscriber's global preference" in details


async def test_a_token_sees_and_changes_its_own_subscriber_only(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient
) -> None:
    workflow = await create_workflow(api, steps=[IN_APP, EMAIL])
    first, first_subscriber = await open_inbox(app, tenancy, api)
    second, second_subscriber = await open_inbox(app, tenancy, api)
    async with first, second:
        await patched(first, PATH, {"email": False, "schedule": SCHEDULE})
        await patched(first, f"{PATH}/{workflow['_id']}", {"in_app": False})
        await patched(first, f"{PATH}/bulk", {"preferences": [{"workflowId": workflow["_id"], "email": False}]})
        theirs = await listed(second)
        assert theirs[0] == {"level": "global", "enabled": True, "channels": {"email": True, "in_app": True}}
        assert by_workflow(theirs)[name_of(workflow)]["channels"] == {"in_app": True, "email": True}
        await patched(second, PATH, {"email": True, "sms": False})
        mine = await listed(first)
        assert mine[0]["channels"] == {"email": False, "in_app": True}
        assert mine[0]["schedule"] == SCHEDULE
        assert by_workflow(mine)[name_of(workflow)]["channels"] == {"in_app": False, "email": False}
        # The API-key routes read the same rows: each subscriber's own.
        v2 = (await api.get(f"/v2/subscribers/{first_subscriber['subscriberId']}/preferences")).json()["data"]
        assert v2["global"]["channels"]["email"] is False and v2["global"]["schedule"] == SCHEDULE
        v2 = (await api.get(f"/v2/subscribers/{second_subscriber['subscriberId']}/preferences")).json()["data"]
        assert v2["global"]["channels"]["sms"] is False and v2["global"]["channels"]["email"] is True
        # A token whose subscriber has been deleted since finds nothing.
        assert (await api.delete(f"/v1/subscribers/{second_subscriber['subscriberId']}")).status_code == 200
        assert_error(await second.get(PATH), 404)
        assert_error(await second.patch(PATH, json={"email": False}), 404)


async def test_every_preference_route_wants_a_subscriber_token(app: FastAPI, api: httpx.AsyncClient) -> None:
    workflow = await create_workflow(api)
    calls = [
        ("GET", PATH, None),
        ("GET", f"{PATH}/global", None),
        ("PATCH", PATH, {"email": False}),
        ("PATCH", f"{PATH}/{workflow['_id']}", {"email": False}),
        ("PATCH", f"{PATH}/bulk", {"preferences": [{"workflowId": workflow["_id"], "email": False}]}),
    ]
    async with make_client(app) as anonymous, make_client(app, Authorization="Bearer not-a-token") as forged:
        for method, path, body in calls:
            assert_error(await anonymous.request(method, path, json=body), 401, "Missing authorization header")
            assert_error(await forged.request(method, path, json=body), 401, "Invalid token")
    # Nor does an API key open them.
    assert_error(await api.get(PATH), 401)


async def test_invalid_preference_bodies_answer_novus_422(inbox: httpx.AsyncClient, api: httpx.AsyncClient) -> None:
    workflow = await create_workflow(api)
    workflow_path = f"{PATH}/{workflow['_id']}"
    for path in (PATH, workflow_path):
        body = assert_error(await inbox.patch(path, json={"fax": False}), 422, "Validation Error")
        assert "fax" in str(body["errors"])
        assert_error(await inbox.patch(path, json={"email": "no"}), 422, "Validation Error")
    assert_error(await inbox.patch(PATH, json={"schedule": {"weeklySchedule": {}}}), 422)  # isEnabled is required
    bad_hours = {"isEnabled": True, "weeklySchedule": {"monday": {"isEnabled": True, "hours": [{"start": "25:00", "end": "26:00"}]}}}
    assert_error(await inbox.patch(PATH, json={"schedule": bad_hours}), 422)
    assert_error(await inbox.patch(PATH, json={"schedule": {"isEnabled": True, "weeklySchedule": {"someday": {"isEnabled": True}}}}), 422)
    assert_error(await inbox.patch(f"{PATH}/bulk", json={"preferences": [{"email": False}]}), 422)  # no workflowId
    assert_error(await inbox.patch(f"{PATH}/bulk", json={"preferences": [{"workflowId": workflow["_id"], "fax": False}]}), 422)
    assert_error(await inbox.patch(f"{PATH}/bulk", json={}), 422)
    # Nothing was stored by the refused changes.
    preferences = await listed(inbox)
    assert preferences[0] == {"level": "global", "enabled": True, "channels": {"in_app": True}}
    assert by_workflow(preferences)[name_of(workflow)]["channels"] == {"in_app": True}
