"""Every role against every kind of action, through the console and through the API, driven by the policy table.

The actions come from herald/members/policy.py (``ACTIONS``): a new action
is in this matrix the day it is added. What each role may do is written here
from the roles' description, by the action's resource and verb, not read from the
table under test:

- owner and admin: everything but reading a secret;
- author: reads everything; writes workflows, layouts, translations,
  subscribers (and imports), topics and test sends;
- viewer: reads everything; changes nothing;
- nobody reads a secret (``secrets.read``); revealing API keys is a write of
  ``api_keys``, so an author's or viewer's reading "everything" leaves it out.

Through the console, an action that has a route answers 403 exactly when the
role may not (``CONSOLE``); the rest are asked of ``policy.allows`` as the
console's pages ask it before showing a control. Through the API, another
environment's key changes nothing in a protected one (Production), and the
environment's own key may: over HTTP where a route crosses environments
(``API``), by ``policy.allows`` on the stored environments for the rest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from herald.members.policy import ACTIONS, ORGANIZATION_WIDE, ROLES, ApiKeyActor, MemberActor, allows
from herald.members.repository import MemberRepository
from herald.models import Environment
from tests.conftest import Tenancy, make_client
from tests.fixtures.builders import create_workflow, unique
from tests.fixtures.console import ConsoleAs, ConsoleClient, add_member, unique_email

# The issue: "author (workflows, layouts, translations, subscribers, topics, test sends; ...)".
AUTHOR_RESOURCES = frozenset({"workflows", "layouts", "translations", "subscribers", "topics", "test_sends"})


def may(role: str, action: str) -> bool:
    """Whether ``role`` may do ``action``, by the issue's words."""
    resource, _, verb = action.partition(".")
    if action == "secrets.read":
        return False
    if role in ("owner", "admin"):
        return True
    if verb == "read":
        return True
    return role == "author" and resource in AUTHOR_RESOURCES


def may_in_production(role: str, action: str) -> bool:
    """Production is protected: a member changes it only with the right to publish to it (owners and admins)."""
    if not may(role, action):
        return False
    resource, _, verb = action.partition(".")
    return verb == "read" or action in ORGANIZATION_WIDE or role in ("owner", "admin")


@dataclass
class Matrix:
    app: FastAPI
    tenancy: Tenancy
    client: ConsoleClient


ConsoleAttempt = Callable[[Matrix], Awaitable[httpx.Response]]


async def _read_members(matrix: Matrix) -> httpx.Response:
    return await matrix.client.get("/console/members")


async def _read_audit(matrix: Matrix) -> httpx.Response:
    return await matrix.client.get("/console/audit")


async def _invite(matrix: Matrix) -> httpx.Response:
    await matrix.client.get("/console/members")
    return await matrix.client.post_form("/console/members/invite", {"email": unique_email("invited"), "role": "viewer"})


async def _change_a_role(matrix: Matrix) -> httpx.Response:
    someone = await add_member(matrix.app, matrix.tenancy.organization_id, "author")
    await matrix.client.get("/console/members")
    return await matrix.client.post_form(f"/console/members/{someone.id}/role", {"role": "viewer"})


# The actions the console has a route for (on top of the pages each role reads), and how to try each.
CONSOLE: dict[str, ConsoleAttempt] = {
    "members.read": _read_members,
    "audit.read": _read_audit,
    "members.invite": _invite,
    "members.write": _change_a_role,
}


def test_the_matrix_knows_every_action_the_table_names() -> None:
    # Every action of the table is an action of a resource and a verb, and the console's routes name real ones.
    assert all(action.count(".") == 1 for action in ACTIONS)
    assert set(CONSOLE) <= ACTIONS and set(API) <= ACTIONS


@pytest.mark.parametrize("role", ROLES)
async def test_every_role_against_every_action_in_the_console(
    role: str, app: FastAPI, tenancy: Tenancy, console_as: ConsoleAs
) -> None:
    client = await console_as(role)
    assert client.member is not None
    actor = MemberActor(client.member.id, tenancy.organization_id, role, client.member.email)
    async with app.state.sessionmaker() as session:
        environments = {env.name: env for env in await MemberRepository(session).environments(tenancy.organization_id)}
    production = environments["Production"]
    assert production.protected
    wrong: list[str] = []
    for action in sorted(ACTIONS):
        expected = may(role, action)
        if action in CONSOLE:
            answer = await CONSOLE[action](Matrix(app, tenancy, client))
            refused = answer.status_code == 403
            if refused == expected or answer.status_code >= 500:
                wrong.append(f"{action}: the console answered {answer.status_code}")
        if allows(actor, action) != expected:
            wrong.append(f"{action}: policy.allows says {not expected}")
        if allows(actor, action, environments["Development"]) != expected:
            wrong.append(f"{action} in Development: policy.allows says {not expected}")
        if allows(actor, action, production) != may_in_production(role, action):
            wrong.append(f"{action} in Production: policy.allows says {not may_in_production(role, action)}")
    # One's own account (a password change) is every role's: a wrong current password is a 422, never a 403.
    await client.get("/console/account")
    account = await client.post_form("/console/account/password", {"currentPassword": "not it", "newPassword": "long enough password"})
    if account.status_code != 422:
        wrong.append(f"account: the console answered {account.status_code}")
    assert wrong == [], f"{role}: " + "; ".join(wrong)


# The API ------------------------------------------------------------------------------------------


@dataclass
class Keys:
    app: FastAPI
    tenancy: Tenancy
    development: httpx.AsyncClient  # another environment's key, seen from Production
    production: httpx.AsyncClient  # Production's own key


# Tried with each key: Development's (another environment's, refused) and Production's own (allowed).
ApiAttempt = Callable[[Keys, httpx.AsyncClient], Awaitable[httpx.Response]]


async def _write_a_workflow(keys: Keys, client: httpx.AsyncClient) -> httpx.Response:
    if client is keys.production:
        return await client.post("/v1/workflows", json={"name": unique("matrix"), "steps": []})
    # Development's key syncs one of its workflows into Production.
    workflow = await create_workflow(keys.development, name=unique("matrix"))
    body = {"targetEnvironmentId": keys.tenancy.production_environment_id}
    return await client.put(f"/v2/workflows/{workflow['_id']}/sync", json=body)


async def _publish(keys: Keys, client: httpx.AsyncClient) -> httpx.Response:
    body = {"sourceEnvironmentId": keys.tenancy.environment_id}
    return await client.post(f"/v2/environments/{keys.tenancy.production_environment_id}/publish", json=body)


async def _rename_production(keys: Keys, client: httpx.AsyncClient) -> httpx.Response:
    return await client.put(f"/v1/environments/{keys.tenancy.production_environment_id}", json={"name": "Production"})


# Actions with an API route that changes another environment than the key's, and how to try each.
API: dict[str, ApiAttempt] = {
    "workflows.write": _write_a_workflow,
    "environments.publish": _publish,
    "environments.write": _rename_production,
}


async def test_another_environments_key_changes_nothing_in_a_protected_one_whatever_the_action(
    app: FastAPI, tenancy: Tenancy
) -> None:
    async with app.state.sessionmaker() as session:
        production = await session.get(Environment, tenancy.production_environment_id)
        development = await session.get(Environment, tenancy.environment_id)
    assert production is not None and development is not None and production.protected
    other_key = ApiKeyActor(tenancy.environment_id, tenancy.organization_id, "development-key")
    own_key = ApiKeyActor(tenancy.production_environment_id, tenancy.organization_id, "production-key")
    wrong: list[str] = []
    async with make_client(app, tenancy.api_key) as dev, make_client(app, tenancy.production_api_key) as prod:
        keys = Keys(app, tenancy, dev, prod)
        for action in sorted(ACTIONS):
            _, _, verb = action.partition(".")
            # A key acts for its environment; secrets and key reveals stay the console's owners' and admins'.
            never = action in ("secrets.read", "api_keys.reveal")
            changes_production = verb != "read" and action not in ORGANIZATION_WIDE
            expect_other = not never and not changes_production
            if allows(other_key, action, production) != expect_other:
                wrong.append(f"{action}: another environment's key in Production: allows says {not expect_other}")
            if allows(own_key, action, production) == never:
                wrong.append(f"{action}: Production's own key: allows says {never}")
            if allows(other_key, action, development) == never:
                wrong.append(f"{action}: a key in an unprotected environment: allows says {never}")
            if action in API:
                refused = await API[action](keys, dev)
                if refused.status_code != 403 or "is protected" not in refused.text:
                    wrong.append(f"{action}: another environment's key over the API answered {refused.status_code}")
                allowed = await API[action](keys, prod)
                if allowed.status_code >= 400:
                    wrong.append(f"{action}: Production's own key over the API answered {allowed.status_code}: {allowed.text[:200]}")
    assert wrong == [], "; ".join(wrong)
