"""The API keys page: masked keys, reveal for admins and owners (audited), regenerate after a confirmation."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from herald.kit.crypto import mask_secret
from herald.models import AuditEntry
from tests.conftest import Tenancy, make_client
from tests.fixtures.console import ConsoleAs


async def _audit(app: FastAPI, action: str, environment_id: str) -> list[AuditEntry]:
    async with app.state.sessionmaker() as session:
        rows = await session.execute(
            select(AuditEntry).where(AuditEntry.action == action, AuditEntry.environment_id == environment_id)
        )
        return list(rows.scalars())


def _key_id(page: str) -> str:
    found = re.search(r'action="/console/api-keys/([^/"]+)/reveal"', page)
    assert found is not None
    return found.group(1)


async def test_keys_are_masked_and_only_admins_and_owners_reveal_them_each_reveal_audited(
    app: FastAPI, console_as: ConsoleAs, tenancy: Tenancy
) -> None:
    for role in ("viewer", "author"):
        member = await console_as(role)
        page = await member.get("/console/api-keys")
        assert page.status_code == 200
        assert mask_secret(tenancy.api_key) in page.text and tenancy.api_key not in page.text
        assert "Reveal" not in page.text and "Regenerate" not in page.text
    admin = await console_as("admin")
    page = await admin.get("/console/api-keys")
    assert tenancy.api_key not in page.text and "Reveal" in page.text
    key_id = _key_id(page.text)
    viewer = await console_as("viewer")
    refused = await viewer.post_form(f"/console/api-keys/{key_id}/reveal")
    assert refused.status_code == 403 and tenancy.api_key not in refused.text
    assert (await admin.post_form(f"/console/api-keys/{key_id}/reveal", csrf="")).status_code == 403
    assert await _audit(app, "api_key.revealed", tenancy.environment_id) == []
    revealed = await admin.post_form(f"/console/api-keys/{key_id}/reveal")
    assert revealed.status_code == 200 and tenancy.api_key in revealed.text
    owner = await console_as("owner")
    assert tenancy.api_key in (await owner.post_form(f"/console/api-keys/{key_id}/reveal")).text
    entries = await _audit(app, "api_key.revealed", tenancy.environment_id)
    assert sorted(entry.actor_email or "" for entry in entries) == sorted([admin.member.email, owner.member.email])  # type: ignore[union-attr]
    assert all(entry.resource_id == key_id for entry in entries)
    # Production's key is never on Development's page.
    assert tenancy.production_api_key not in revealed.text


async def test_regenerate_asks_first_then_the_old_key_stops_working(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs, tenancy: Tenancy
) -> None:
    assert (await api.get("/v1/integrations")).status_code == 200
    author = await console_as("author")
    assert (await author.get("/console/api-keys/regenerate")).status_code == 403
    assert (await author.post_form("/console/api-keys/regenerate")).status_code == 403
    admin = await console_as("admin")
    asked = await admin.get("/console/api-keys/regenerate")
    assert asked.status_code == 200
    assert "Yes, regenerate the key" in asked.text and "stops working" in asked.text
    # Asking changed nothing.
    assert (await api.get("/v1/integrations")).status_code == 200
    done = await admin.post_form("/console/api-keys/regenerate")
    assert done.status_code == 200
    [new_key] = re.findall(r'<code class="secret-value" id="new-key">([0-9a-f]+)</code>', done.text)
    assert new_key != tenancy.api_key
    assert (await api.get("/v1/integrations")).status_code == 401
    async with make_client(app, new_key) as renewed:
        assert (await renewed.get("/v1/integrations")).status_code == 200
    page = await admin.get("/console/api-keys")
    assert mask_secret(new_key) in page.text and mask_secret(tenancy.api_key) not in page.text and new_key not in page.text
    [entry] = await _audit(app, "api_key.regenerated", tenancy.environment_id)
    assert entry.actor_email == admin.member.email and entry.changes == {"revoked": 1}  # type: ignore[union-attr]
    # Production's key still works.
    async with make_client(app, tenancy.production_api_key) as production:
        assert (await production.get("/v1/integrations")).status_code == 200
