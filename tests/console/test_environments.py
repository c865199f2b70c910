"""The Environments page: the list with protection, creating one (the limit as a form error), protect and unprotect."""

from __future__ import annotations

import html
import re
import secrets

from fastapi import FastAPI
from sqlalchemy import select

from herald.models import AuditEntry, Environment
from tests.conftest import Tenancy, make_client
from tests.fixtures.console import ConsoleAs


async def _environment(app: FastAPI, environment_id: str) -> Environment:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Environment).where(Environment.id == environment_id))).scalar_one()


async def _actions(app: FastAPI, organization_id: str) -> list[str]:
    async with app.state.sessionmaker() as session:
        rows = await session.execute(
            select(AuditEntry.action)
            .where(AuditEntry.organization_id == organization_id, AuditEntry.action.like("environment.%"))
            .order_by(AuditEntry.created_at)
        )
        return list(rows.scalars())


def _row(page: str, name: str) -> str:
    return page.split(f'<th scope="row">{name}', 1)[1].split("</tr>", 1)[0]


async def test_the_list_shows_which_environments_are_protected_and_only_admins_may_create(app: FastAPI, console_as: ConsoleAs) -> None:
    viewer = await console_as("viewer")
    page = await viewer.get("/console/environments")
    assert page.status_code == 200
    assert "Protected" in _row(page.text, "Production") and ">No<" in _row(page.text, "Development")
    assert "Create environment" not in page.text and "Protect" not in _row(page.text, "Development")
    for role in ("viewer", "author"):
        member = await console_as(role)
        refused = await member.post_form("/console/environments", {"name": "Staging"})
        assert refused.status_code == 403
    admin = await console_as("admin")
    assert (await admin.post_form("/console/environments", {"name": "Staging"}, csrf="")).status_code == 403
    assert "Staging" not in (await admin.get("/console/environments")).text


async def test_an_admin_creates_an_environment_until_the_limit_which_the_form_says(
    app: FastAPI, console_as: ConsoleAs, tenancy: Tenancy
) -> None:
    admin = await console_as("admin")
    created = await admin.post_form("/console/environments", {"name": "Staging"})
    assert created.status_code == 200 and "Environment Staging created" in created.text
    [key] = re.findall(r'<code class="secret-value" id="created-key">([0-9a-f]+)</code>', created.text)
    async with make_client(app, key) as staging:
        assert (await staging.get("/v1/integrations")).status_code == 200
    # The Environment select has it at once.
    assert re.search(r"<option [^>]*>Staging</option>", created.text)
    taken = await admin.post_form("/console/environments", {"name": "Staging"})
    assert taken.status_code == 409 and "Environment with name Staging already exists" in taken.text
    assert 'class="error-summary"' in taken.text and 'aria-invalid="true"' in taken.text
    blank = await admin.post_form("/console/environments", {"name": "  "})
    assert blank.status_code in (400, 422) and 'class="error-summary"' in blank.text
    limit = app.state.settings.max_environments
    for number in range(limit - 3):
        assert (await admin.post_form("/console/environments", {"name": f"Env {number}"})).status_code == 200
    full = await admin.post_form("/console/environments", {"name": f"One too many {secrets.token_hex(2)}"})
    assert full.status_code == 400
    assert f"at most {limit} environments (HERALD_MAX_ENVIRONMENTS)" in html.unescape(full.text)
    assert 'class="error-summary"' in full.text and "One too many" in full.text  # the typed name is kept
    actions = await _actions(app, tenancy.organization_id)
    assert actions == ["environment.created"] * (limit - 2)


async def test_admins_protect_and_unprotect_environments_recorded_in_the_audit_log(
    app: FastAPI, console_as: ConsoleAs, tenancy: Tenancy
) -> None:
    author = await console_as("author")
    refused = await author.post_form(f"/console/environments/{tenancy.environment_id}/protection", {"protected": "true"})
    assert refused.status_code == 403
    assert (await _environment(app, tenancy.environment_id)).protected is False
    admin = await console_as("admin")
    page = await admin.get("/console/environments")
    assert "Unprotect<span" in _row(page.text, "Production") and "Protect<span" in _row(page.text, "Development")
    done = await admin.post_form(f"/console/environments/{tenancy.environment_id}/protection", {"protected": "true"})
    assert done.status_code == 303
    assert (await _environment(app, tenancy.environment_id)).protected is True
    lifted = await admin.post_form(f"/console/environments/{tenancy.production_environment_id}/protection", {"protected": "false"})
    assert lifted.status_code == 303
    assert (await _environment(app, tenancy.production_environment_id)).protected is False
    assert await _actions(app, tenancy.organization_id) == ["environment.protected", "environment.unprotected"]
    # Another organization's environment is not found.
    other = await admin.post_form("/console/environments/not-an-environment/protection", {"protected": "true"})
    assert other.status_code == 404
