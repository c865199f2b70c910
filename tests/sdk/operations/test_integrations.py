"""novu.integrations.list, create, update, delete, set_as_primary, list_active."""

from __future__ import annotations

import httpx
from novu_py import Novu

from tests.fixtures.builders import create_integration
from tests.sdk.operations.conftest import call


async def test_integrations_list(novu: Novu, api: httpx.AsyncClient) -> None:
    made = await create_integration(api, name="Mail")
    listed = await call(lambda: novu.integrations.list().result)
    [mine] = [item for item in listed if item.id == made["_id"]]
    assert (mine.provider_id, mine.channel.value, mine.name) == ("sendgrid", "email", "Mail")


async def test_integrations_create(novu: Novu, api: httpx.AsyncClient) -> None:
    created = await call(
        lambda: (
            novu.integrations.create(
                create_integration_request_dto={
                    "provider_id": "mailgun",
                    "channel": "email",
                    "name": "Mailgun",
                    "credentials": {"api_key": "key-test", "domain": "mg.example.com"},
                    "active": True,
                }
            ).result
        )
    )
    assert (created.provider_id, created.active, created.name) == ("mailgun", True, "Mailgun")
    stored = {item["_id"]: item for item in (await api.get("/v1/integrations")).json()["data"]}
    assert stored[created.id]["credentials"]["domain"] == "mg.example.com"


async def test_integrations_update(novu: Novu, api: httpx.AsyncClient) -> None:
    made = await create_integration(api, active=True)
    updated = await call(
        lambda: (
            novu.integrations.update(
                integration_id=made["_id"], update_integration_request_dto={"name": "Renamed", "active": False}
            ).result
        )
    )
    assert (updated.id, updated.name, updated.active) == (made["_id"], "Renamed", False)
    stored = {item["_id"]: item for item in (await api.get("/v1/integrations")).json()["data"]}
    assert (stored[made["_id"]]["name"], stored[made["_id"]]["active"]) == ("Renamed", False)


async def test_integrations_delete(novu: Novu, api: httpx.AsyncClient) -> None:
    kept, gone = await create_integration(api), await create_integration(api, providerId="postmark")
    remaining = await call(lambda: novu.integrations.delete(integration_id=gone["_id"]).result)
    ids = {item.id for item in remaining}
    assert kept["_id"] in ids and gone["_id"] not in ids
    assert gone["_id"] not in {item["_id"] for item in (await api.get("/v1/integrations")).json()["data"]}


async def test_integrations_set_as_primary(novu: Novu, api: httpx.AsyncClient) -> None:
    first = await create_integration(api, active=True)
    second = await create_integration(api, providerId="postmark", active=True)
    primary = await call(lambda: novu.integrations.set_as_primary(integration_id=second["_id"]).result)
    assert primary.id == second["_id"] and primary.primary is True
    stored = {item["_id"]: item for item in (await api.get("/v1/integrations")).json()["data"]}
    assert (stored[first["_id"]]["primary"], stored[second["_id"]]["primary"]) == (False, True)


async def test_integrations_list_active(novu: Novu, api: httpx.AsyncClient) -> None:
    active = await create_integration(api, active=True)
    inactive = await create_integration(api, providerId="postmark", active=False)
    listed = {item.id for item in await call(lambda: novu.integrations.list_active().result)}
    assert active["_id"] in listed and inactive["_id"] not in listed
