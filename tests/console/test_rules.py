"""The console's HTTP rules: CSRF, headers, roles through its endpoints, invites, the first owner, the environment."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from fastapi import FastAPI
from sqlalchemy import update

from herald.console.security import CONTENT_SECURITY_POLICY
from herald.kit.time import utcnow
from herald.members.service import setup_link
from herald.models import MemberInvite
from herald.organizations.service import create_organization
from tests.conftest import Tenancy
from tests.fixtures.console import PASSWORD, ConsoleAs, ConsoleClient, add_member, console_client, unique_email

INVITE_LINK = re.compile(r"https?://[^/\s<]+(/console/invite/[A-Za-z0-9_-]+)")


async def test_a_change_without_the_sessions_csrf_token_is_refused(console_as: ConsoleAs) -> None:
    owner = await console_as("owner")
    page = await owner.get("/console/members")
    meta = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
    assert meta is not None and meta.group(1) == owner.csrf
    # Every form carries it as a hidden field.
    forms = re.findall(r"<form [^>]*method=\"post\"[^>]*>(.*?)</form>", page.text, re.S)
    assert forms and all(f'name="csrf_token" value="{owner.csrf}"' in form for form in forms)
    email = unique_email("invited")
    for token in ("", "not-the-token"):
        refused = await owner.post_form("/console/members/invite", {"email": email, "role": "viewer"}, csrf=token)
        assert refused.status_code == 403
        assert "did not come from this console" in refused.text
    # A script's request answers Novu's error body.
    scripted = await owner.client.post("/console/members/invite", json={"email": email}, headers={"Accept": "application/json"})
    assert scripted.status_code == 403
    body = scripted.json()
    assert body["statusCode"] == 403 and body["path"] == "/console/members/invite" and body["error"] == "Forbidden"
    # The header works for scripts; nothing was invited by the refused ones.
    assert email not in (await owner.get("/console/members")).text
    accepted = await owner.client.post(
        "/console/members/invite", data={"email": email, "role": "viewer"}, headers={"X-CSRF-Token": owner.csrf}
    )
    assert accepted.status_code == 200 and email in accepted.text


async def test_the_sign_in_form_is_protected_before_any_session(app: FastAPI, tenancy: Tenancy, anonymous_console: ConsoleClient) -> None:
    member = await add_member(app, tenancy.organization_id, "viewer")
    # No pre-session cookie: a form posted from elsewhere.
    refused = await anonymous_console.post_form("/console/sign-in", {"email": member.email, "password": PASSWORD}, csrf="forged")
    assert refused.status_code == 403
    page = await anonymous_console.get("/console/sign-in")
    cookie = next(value for value in page.headers.get_list("set-cookie") if value.startswith("herald_console_csrf="))
    assert "httponly" in cookie.lower() and "samesite=lax" in cookie.lower()
    # The cookie alone is not enough: the form must repeat it.
    assert (await anonymous_console.post_form("/console/sign-in", {"email": member.email, "password": PASSWORD}, csrf="")).status_code == 403
    assert (await anonymous_console.post_form("/console/sign-in", {"email": member.email, "password": PASSWORD})).status_code == 303


async def test_every_console_answer_has_the_security_headers(console_as: ConsoleAs, anonymous_console: ConsoleClient) -> None:
    viewer = await console_as("viewer")
    answers = [
        await anonymous_console.get("/console/sign-in"),
        await anonymous_console.get("/console/members"),  # a redirect
        await viewer.get("/console/members"),
        await viewer.get("/console/audit"),
        await viewer.get("/console/not-built-yet"),
        await viewer.post_form("/console/members/invite", {"email": "x@example.com"}),  # 403
        await viewer.get("/console/static/console.css"),
    ]
    for answer in answers:
        policy = answer.headers["content-security-policy"]
        assert policy == CONTENT_SECURITY_POLICY, answer.request.url
        assert "'unsafe-inline'" not in policy and "frame-ancestors 'none'" in policy
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "same-origin"
    assert [answer.headers.get("cache-control") for answer in answers[:-1]] == ["no-store"] * (len(answers) - 1)
    assert answers[4].status_code == 404 and "<h1>Page not found</h1>" in answers[4].text
    # No inline script or style anywhere (the CSP would refuse it).
    for answer in answers[:-1]:
        assert not re.search(r"<script(?![^>]*\bsrc=)", answer.text), answer.request.url
        assert " style=" not in answer.text and "<style" not in answer.text and " on" + "click=" not in answer.text


# What each role may do through the console's endpoints built so far: (method, what, allowed roles).
ROLE_CASES = [
    ("members.read", {"owner", "admin", "author", "viewer"}),
    ("audit.read", {"owner", "admin", "author", "viewer"}),
    ("members.invite", {"owner", "admin"}),
    ("members.write", {"owner", "admin"}),
]


@pytest.mark.parametrize("role", ["owner", "admin", "author", "viewer"])
async def test_every_role_against_every_console_action(app: FastAPI, tenancy: Tenancy, console_as: ConsoleAs, role: str) -> None:
    client = await console_as(role)
    target = await add_member(app, tenancy.organization_id, "viewer")
    for action, allowed in ROLE_CASES:
        if action == "members.read":
            answer = await client.get("/console/members")
        elif action == "audit.read":
            answer = await client.get("/console/audit")
        elif action == "members.invite":
            answer = await client.post_form("/console/members/invite", {"email": unique_email("invited"), "role": "viewer"})
        else:
            answer = await client.post_form(f"/console/members/{target.id}/role", {"role": "author"})
        expected = (200, 303) if role in allowed else (403,)
        assert answer.status_code in expected, (role, action, answer.status_code)
        if answer.status_code == 403:
            assert f"Your role ({role}) does not allow {action}" in answer.text
    # A control the role may not use is not shown.
    page = await client.get("/console/members")
    assert (">Invite</button>" in page.text) == (role in ("owner", "admin"))
    assert ("Change role" in page.text) == (role in ("owner", "admin"))
    removal = await client.post_form(f"/console/members/{target.id}/remove")
    assert removal.status_code == (303 if role in ("owner", "admin") else 403)


async def test_an_admin_cannot_remove_or_demote_an_owner_and_the_last_owner_stays(console_as: ConsoleAs) -> None:
    owner = await console_as("owner")
    admin = await console_as("admin")
    assert owner.member is not None and admin.member is not None
    await admin.get("/console/members")
    for path, data in ((f"/console/members/{owner.member.id}/role", {"role": "viewer"}), (f"/console/members/{owner.member.id}/remove", {})):
        refused = await admin.post_form(path, data)
        assert refused.status_code == 403, path
    # An admin cannot make an owner either (nor invite one).
    assert (await admin.post_form(f"/console/members/{admin.member.id}/role", {"role": "owner"})).status_code == 403
    assert (await admin.post_form("/console/members/invite", {"email": unique_email(), "role": "owner"})).status_code == 403
    # The last owner cannot leave nor stop being an owner...
    await owner.get("/console/members")
    assert (await owner.post_form(f"/console/members/{owner.member.id}/role", {"role": "admin"})).status_code == 403
    last = await owner.post_form(f"/console/members/{owner.member.id}/remove")
    assert last.status_code == 403 and "last owner" in last.text
    # ...until there is another.
    assert (await owner.post_form(f"/console/members/{admin.member.id}/role", {"role": "owner"})).status_code == 303
    assert (await owner.post_form(f"/console/members/{owner.member.id}/remove")).status_code == 303
    assert (await owner.get("/console/members")).status_code == 303


async def test_an_invite_link_works_once_and_gives_its_role(app: FastAPI, console_as: ConsoleAs) -> None:
    admin = await console_as("admin")
    email = unique_email("joiner")
    invited = await admin.post_form("/console/members/invite", {"email": email, "role": "author"})
    assert invited.status_code == 200
    [path] = INVITE_LINK.findall(invited.text)
    async with console_client(app) as first, console_client(app) as second:
        joiner, latecomer = ConsoleClient(first), ConsoleClient(second)
        page = await joiner.get(path)
        assert page.status_code == 200 and email in page.text and '<label for="password">Password</label>' in page.text
        assert ">Join</button>" in page.text
        short = await joiner.post_form(path, {"password": "short"})
        assert short.status_code == 422 and "at least 10 characters" in short.text
        joined = await joiner.post_form(path, {"password": "a password of mine"})
        assert (joined.status_code, joined.headers["location"]) == (303, "/console")
        account = await joiner.get("/console/account")
        assert email in account.text and "author" in account.text
        # Used: it works no more, for anyone.
        await latecomer.get("/console/sign-in")
        assert (await latecomer.get(path)).status_code == 404
        assert (await latecomer.post_form(path, {"password": "another password"})).status_code == 404
    members = await admin.get("/console/members")
    assert members.text.count(f"<th scope=\"row\">{email}</th>") == 1


async def test_an_invite_expires_after_7_days(app: FastAPI, console_as: ConsoleAs) -> None:
    owner = await console_as("owner")
    invited = await owner.post_form("/console/members/invite", {"email": unique_email(), "role": "viewer"})
    [path] = INVITE_LINK.findall(invited.text)
    async with app.state.sessionmaker() as session:
        invite = (await session.execute(MemberInvite.__table__.select().order_by(MemberInvite.created_at.desc()).limit(1))).first()
        assert invite is not None
        created, expires = invite.created_at, invite.expires_at
        assert expires - created == timedelta(days=7)
        await session.execute(update(MemberInvite).where(MemberInvite.id == invite.id).values(expires_at=utcnow() - timedelta(seconds=1)))
        await session.commit()
    async with console_client(app) as client:
        late = ConsoleClient(client)
        expired = await late.get(path)
        assert expired.status_code == 404 and "This link is not valid" in expired.text


async def test_the_first_owners_link_works_once_while_there_is_no_member(app: FastAPI) -> None:
    async with app.state.sessionmaker() as session:
        organization = (await create_organization(session, box=app.state.secret_box)).organization
        token = await setup_link(session, organization.id)
        await session.commit()
    assert token is not None
    email = unique_email("first-owner")
    async with console_client(app) as client:
        first = ConsoleClient(client)
        page = await first.get(f"/console/setup/{token}")
        assert page.status_code == 200 and "Create the first owner" in page.text
        made = await first.post_form(f"/console/setup/{token}", {"email": email, "password": "the first owner's password"})
        assert made.status_code == 303
        account = await first.get("/console/account")
        assert email in account.text and "owner" in account.text
        assert (await first.get(f"/console/setup/{token}")).status_code == 404
    # Once there is a member, no new link is made.
    async with app.state.sessionmaker() as session:
        assert await setup_link(session, organization.id) is None


async def test_the_chosen_environment_is_kept_in_the_session(console_as: ConsoleAs, tenancy: Tenancy) -> None:
    viewer = await console_as("viewer")
    page = await viewer.get("/console/audit")
    assert '<label for="environment-select">Environment</label>' in page.text
    assert re.search(rf'<option value="{tenancy.environment_id}" selected>Development</option>', page.text)
    chosen = await viewer.post_form("/console/environment", {"environment": tenancy.production_environment_id, "next": "/console/audit"})
    assert (chosen.status_code, chosen.headers["location"]) == (303, "/console/audit")
    again = await viewer.get("/console/members")
    assert re.search(rf'<option value="{tenancy.production_environment_id}" selected>Production</option>', again.text)
    # Another organization's environment is no choice.
    unknown = await viewer.post_form("/console/environment", {"environment": "0" * 24, "next": "https://evil.example/"})
    assert unknown.headers["location"] == "/console"
