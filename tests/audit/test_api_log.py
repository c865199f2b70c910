"""The audit log of API and console changes, and GET /v1/audit-logs, on both stores."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from herald.audit.middleware import EXCLUDED_TEMPLATES, action_of
from tests.conftest import Tenancy, assert_error
from tests.fixtures.console import ConsoleAs, unique_email


async def _log(api: httpx.AsyncClient, **params: object) -> dict:
    response = await api.get("/v1/audit-logs", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_actions_come_from_the_routes_template() -> None:
    assert action_of("POST", "/v1/subscribers") == ("subscriber.created", "subscriber")
    assert action_of("PUT", "/v1/integrations/{integrationId}") == ("integration.updated", "integration")
    assert action_of("DELETE", "/v2/workflows/{workflowId}") == ("workflow.deleted", "workflow")
    assert action_of("POST", "/v1/topics/{topicKey}/subscribers") == ("topic.subscribers.created", "topic")
    assert action_of("POST", "/v1/environment-variables") == ("environment_variable.created", "environment_variable")
    for per_event in (
        "/v1/subscribers/{subscriberId}/messages/mark-as",
        "/v1/subscribers/{subscriberId}/messages/{messageId}/actions/{type}",
        "/v2/subscribers/{subscriberId}/notifications/{notificationId}/read",
        "/v2/subscribers/{subscriberId}/notifications/seen",
        "/v1/subscribers/{subscriberId}/online-status",
        "/v2/workflows/{workflowId}/step/{stepId}/preview",
        "/v2/environments/{targetEnvironmentId}/diff",
    ):
        assert EXCLUDED_TEMPLATES.search(per_event), per_event
    for change in ("/v1/subscribers/{subscriberId}", "/v2/subscribers/{subscriberId}/preferences", "/v1/messages/{messageId}"):
        assert not EXCLUDED_TEMPLATES.search(change), change


async def test_an_api_change_is_recorded_with_its_key_resource_and_masked_secrets(
    api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    created = await api.post(
        "/v1/integrations",
        json={
            "providerId": "sendgrid",
            "channel": "email",
            "name": "Mail",
            "credentials": {"apiKey": "SG.the-real-secret-key-value", "from": "a@example.com"},
        },
    )
    assert created.status_code == 201, created.text
    integration_id = created.json()["data"]["_id"]
    subscriber = await api.post("/v1/subscribers", json={"subscriberId": "audited-1", "email": "s@example.com"})
    assert subscriber.status_code == 201
    subscriber_id = subscriber.json()["data"]["_id"]
    updated = await api.put("/v1/subscribers/audited-1", json={"firstName": "Ann"})
    assert updated.status_code == 200

    log = await _log(api, limit=10)
    assert list(log) == ["data", "next", "previous", "totalCount", "totalCountCapped"]
    newest, middle, oldest = log["data"][:3]
    # Newest first.
    assert [newest["action"], middle["action"], oldest["action"]] == ["subscriber.updated", "subscriber.created", "integration.created"]
    # The id in the path, or the answer's _id for what was made.
    assert newest["resource"] == {"type": "subscriber", "id": "audited-1"}
    assert middle["resource"] == {"type": "subscriber", "id": subscriber_id}
    assert oldest["resource"] == {"type": "integration", "id": integration_id}
    for entry in (newest, middle, oldest):
        assert entry["actor"]["type"] == "api_key" and entry["actor"]["email"] is None
        assert entry["actor"]["environmentId"] == tenancy.environment_id
        assert entry["environmentId"] == tenancy.environment_id
        assert entry["createdAt"].endswith("Z")
    assert oldest["changes"]["credentials"] == {"apiKey": "****", "from": "a@example.com"}
    assert "the-real-secret" not in str(log)
    assert newest["changes"] == {"firstName": "Ann"}


async def test_hot_paths_reads_and_refusals_are_not_recorded(api: httpx.AsyncClient) -> None:
    before = (await _log(api))["totalCount"]
    await api.post("/v1/subscribers", json={"subscriberId": "hot"})
    after_create = (await _log(api))["totalCount"]
    assert after_create == before + 1
    # A trigger (the hot path), a read, a refused change, a mark-as: none is an entry.
    await api.post("/v1/events/trigger", json={"name": "no-such-workflow", "to": "hot"})
    await api.get("/v1/subscribers/hot")
    assert (await api.post("/v1/subscribers", json={})).status_code == 422
    await api.post("/v1/subscribers/hot/messages/mark-all", json={"markAs": "read"})
    assert (await _log(api))["totalCount"] == after_create


async def test_each_key_reads_its_environment_and_the_organizations_entries(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    dev_only = (await api.post("/v1/subscribers", json={"subscriberId": "dev-only"})).json()["data"]["_id"]
    prod_only = (await production_api.post("/v1/subscribers", json={"subscriberId": "prod-only"})).json()["data"]["_id"]
    # An organization-wide change, made in the console: an invite.
    owner = await console_as("owner")
    invited = unique_email("invited")
    assert (await owner.post_form("/console/members/invite", {"email": invited, "role": "viewer"})).status_code == 200

    development = {(entry["action"], entry["resource"]["id"]) for entry in (await _log(api, limit=100))["data"]}
    production = {(entry["action"], entry["resource"]["id"]) for entry in (await _log(production_api, limit=100))["data"]}
    assert ("subscriber.created", dev_only) in development and ("subscriber.created", dev_only) not in production
    assert ("subscriber.created", prod_only) in production and ("subscriber.created", prod_only) not in development
    invite = next(entry for entry in (await _log(production_api, limit=100))["data"] if entry["action"] == "member.invited")
    assert invite["environmentId"] is None
    assert invite["actor"] == {"type": "member", "email": owner.member.email, "id": owner.member.id, "environmentId": None}  # type: ignore[union-attr]
    assert invite["changes"] == {"email": invited, "role": "viewer"}
    assert any(entry["action"] == "member.invited" for entry in (await _log(api, limit=100))["data"])
    # Another organization sees none of it.
    assert not any(entry["action"] == "member.invited" for entry in (await _log(other_org_api, limit=100))["data"])


async def test_the_log_pages_with_a_cursor(api: httpx.AsyncClient) -> None:
    for index in range(5):
        assert (await api.post("/v1/subscribers", json={"subscriberId": f"paged-{index}"})).status_code == 201
    for index in range(5):
        assert (await api.put(f"/v1/subscribers/paged-{index}", json={"firstName": "P"})).status_code == 200
    first = await _log(api, limit=2)
    assert [entry["resource"]["id"] for entry in first["data"]] == ["paged-4", "paged-3"]
    assert first["previous"] is None and first["next"] == first["data"][-1]["_id"]
    second = await _log(api, limit=2, after=first["next"])
    assert [entry["resource"]["id"] for entry in second["data"]] == ["paged-2", "paged-1"]
    assert second["previous"] == second["data"][0]["_id"]
    back = await _log(api, limit=2, before=second["previous"])
    assert back["data"] == first["data"]
    assert_error(await api.get("/v1/audit-logs", params={"limit": 1000}), 422)
    assert_error(await api.get("/v1/audit-logs", headers={"Authorization": "ApiKey nope"}), 401)


async def test_console_changes_are_recorded_in_their_transaction(app: FastAPI, console_as: ConsoleAs, api: httpx.AsyncClient) -> None:
    owner = await console_as("owner")
    author = await console_as("author")
    assert author.member is not None and owner.member is not None
    await owner.get("/console/members")
    assert (await owner.post_form(f"/console/members/{author.member.id}/role", {"role": "admin"})).status_code == 303
    # A refused change records nothing.
    assert (await author.post_form("/console/members/invite", {"email": unique_email(), "role": "viewer"}, csrf="")).status_code == 403
    entries = (await _log(api, limit=100))["data"]
    changed = next(entry for entry in entries if entry["action"] == "member.role_changed")
    assert changed["resource"] == {"type": "member", "id": author.member.id}
    assert changed["actor"]["email"] == owner.member.email
    assert changed["changes"]["role"] == ["author", "admin"]
    signed_in = [entry for entry in entries if entry["action"] == "member.signed_in"]
    assert {entry["actor"]["email"] for entry in signed_in} >= {owner.member.email, author.member.email}
    # The Audit log page shows the same entries, filterable.
    page = await owner.get("/console/audit", params={"action": "member.role"})
    assert "member.role_changed" in page.text and "member.signed_in" not in page.text
    by_actor = await owner.get("/console/audit", params={"actor": author.member.email})
    assert "member.signed_in" in by_actor.text and "member.role_changed" not in by_actor.text
    by_resource = await owner.get("/console/audit", params={"resource": f"member:{author.member.id}"})
    assert "member.role_changed" in by_resource.text
    future = await owner.get("/console/audit", params={"from": "2999-01-01"})
    assert "No entries match these filters" in future.text
    bad = await owner.get("/console/audit", params={"from": "yesterday"})
    assert bad.status_code == 422 and "Enter a date like" in bad.text
