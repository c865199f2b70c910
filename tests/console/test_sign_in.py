"""Signing in and out of the console, over HTTP on the in-process app, on both stores."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select, update

from herald.app import create_app
from herald.audit.service import list_entries
from herald.members.service import MAX_FAILURES
from herald.members.sessions import token_hash
from herald.models import ConsoleSession
from tests.conftest import Tenancy
from tests.fixtures.console import PASSWORD, ConsoleAs, ConsoleClient, add_member, console_client, unique_email


async def test_signing_in_starts_a_session_and_lands_on_a_page(app: FastAPI, tenancy: Tenancy, anonymous_console: ConsoleClient) -> None:
    member = await add_member(app, tenancy.organization_id, "viewer")
    page = await anonymous_console.get("/console/members")
    assert (page.status_code, page.headers["location"]) == (303, "/console/sign-in?next=/console/members")
    form = await anonymous_console.get("/console/sign-in?next=/console/members")
    assert form.status_code == 200
    for text in ('<label for="email">Email</label>', '<label for="password">Password</label>', ">Sign in</button>"):
        assert text in form.text
    # The email is compared lower-cased and stripped, as it was stored.
    signed = await anonymous_console.post_form(
        "/console/sign-in", {"email": f" {member.email.upper()} ", "password": PASSWORD, "next": "/console/members"}
    )
    assert (signed.status_code, signed.headers["location"]) == (303, "/console/members")
    members = await anonymous_console.get("/console/members")
    assert members.status_code == 200 and member.email in members.text
    # Somewhere else than the console is no place to go back to.
    assert (await anonymous_console.get("/console/sign-in?next=https://evil.example")).headers["location"] == "/console"


async def test_a_wrong_email_or_password_says_the_same(app: FastAPI, tenancy: Tenancy, anonymous_console: ConsoleClient) -> None:
    member = await add_member(app, tenancy.organization_id, "viewer")
    await anonymous_console.get("/console/sign-in")
    wrong_password = await anonymous_console.post_form("/console/sign-in", {"email": member.email, "password": "not the password"})
    wrong_email = await anonymous_console.post_form("/console/sign-in", {"email": unique_email(), "password": PASSWORD})
    for response in (wrong_password, wrong_email):
        assert response.status_code == 401
        assert "Invalid email or password" in response.text
        assert "herald_console=" not in response.headers.get("set-cookie", "")
    assert wrong_password.text.replace(member.email, "X").count("Invalid email or password") == wrong_email.text.count(
        "Invalid email or password"
    )


async def test_five_failures_from_one_address_answer_429_too_many_attempts(
    app: FastAPI, tenancy: Tenancy, anonymous_console: ConsoleClient
) -> None:
    member = await add_member(app, tenancy.organization_id, "owner")
    await anonymous_console.get("/console/sign-in")
    for _ in range(MAX_FAILURES):
        failed = await anonymous_console.post_form("/console/sign-in", {"email": member.email, "password": "guess guess guess"})
        assert failed.status_code == 401
    # Even the right password is refused for the rest of the window.
    refused = await anonymous_console.post_form("/console/sign-in", {"email": member.email, "password": PASSWORD})
    assert refused.status_code == 429
    assert "Too many attempts" in refused.text
    assert int(refused.headers["retry-after"]) > 0
    assert "herald_console=" not in refused.headers.get("set-cookie", "")
    # Counted in the store: another API process (another app on the same store) refuses too.
    other = create_app(replace(app.state.settings))
    try:
        async with console_client(other) as client:
            elsewhere = ConsoleClient(client)
            await elsewhere.get("/console/sign-in")
            assert (await elsewhere.post_form("/console/sign-in", {"email": member.email, "password": PASSWORD})).status_code == 429
    finally:
        await other.state.engine.dispose()
    # Another email from this address is not held back.
    someone = await add_member(app, tenancy.organization_id, "viewer")
    assert (await anonymous_console.post_form("/console/sign-in", {"email": someone.email, "password": PASSWORD})).status_code == 303
    # The failures are in the audit log.
    async with app.state.sessionmaker() as session:
        page = await list_entries(session, tenancy.organization_id, limit=50)
    failures = [entry for entry in page.entries if entry.action == "member.sign_in_failed"]
    assert len(failures) == MAX_FAILURES and all(entry.changes["email"] == member.email for entry in failures)


async def test_the_session_cookie_is_httponly_samesite_lax_and_scoped_to_the_console(
    app: FastAPI, tenancy: Tenancy, anonymous_console: ConsoleClient
) -> None:
    member = await add_member(app, tenancy.organization_id, "viewer")
    signed = await anonymous_console.sign_in(member.email)
    cookie = next(value for value in signed.headers.get_list("set-cookie") if value.startswith("herald_console="))
    attributes = {part.strip().split("=")[0].lower(): part.strip() for part in cookie.split(";")}
    assert "httponly" in attributes
    assert attributes["samesite"].lower() == "samesite=lax"
    assert attributes["path"] == "Path=/console"
    assert "secure" not in attributes
    # Behind https (HERALD_PUBLIC_URL), Secure as well.
    secure = create_app(replace(app.state.settings, public_url="https://herald.example.com"))
    try:
        async with console_client(secure, "https://herald.example.com") as client:
            behind_https = await ConsoleClient(client).sign_in(member.email)
        cookie = next(value for value in behind_https.headers.get_list("set-cookie") if value.startswith("herald_console="))
        assert "secure" in cookie.lower()
    finally:
        await secure.state.engine.dispose()
    # Only the token's sha256 is stored.
    token = anonymous_console.session_token
    assert token is not None
    async with app.state.sessionmaker() as session:
        assert await session.scalar(select(func.count()).where(ConsoleSession.token_hash == token)) == 0
        assert await session.scalar(select(func.count()).where(ConsoleSession.token_hash == token_hash(token))) == 1


async def test_every_sign_in_gets_a_new_token_and_ends_the_browsers_old_one(
    app: FastAPI, tenancy: Tenancy, anonymous_console: ConsoleClient
) -> None:
    member = await add_member(app, tenancy.organization_id, "viewer")
    # A token planted before sign-in is not the one after it.
    anonymous_console.client.cookies.set("herald_console", "planted-by-someone-else", domain="herald.test", path="/console")
    await anonymous_console.sign_in(member.email)
    first = anonymous_console.session_token
    assert first not in (None, "planted-by-someone-else")
    # Signing in again (the sign-in page left open in another tab) makes another token and ends the first.
    await anonymous_console.get("/console/account")
    again = await anonymous_console.post_form("/console/sign-in", {"email": member.email, "password": PASSWORD})
    assert again.status_code == 303
    second = anonymous_console.session_token
    assert second != first
    async with console_client(app) as client:
        client.cookies.set("herald_console", first or "", domain="herald.test", path="/console")
        stale = await client.get("/console/members")
    assert stale.status_code == 303 and stale.headers["location"].startswith("/console/sign-in")
    assert (await anonymous_console.get("/console/members")).status_code == 200


async def _set_session(app: FastAPI, token: str, **values: object) -> None:
    async with app.state.sessionmaker() as session:
        await session.execute(update(ConsoleSession).where(ConsoleSession.token_hash == token_hash(token)).values(**values))
        await session.commit()


async def _created_at(app: FastAPI, token: str):  # type: ignore[no-untyped-def]
    async with app.state.sessionmaker() as session:
        return await session.scalar(select(ConsoleSession.created_at).where(ConsoleSession.token_hash == token_hash(token)))


async def test_a_session_ends_after_12_hours_idle_or_7_days(app: FastAPI, console_as: ConsoleAs) -> None:
    idle = await console_as("viewer")
    assert idle.session_token is not None
    started = await _created_at(app, idle.session_token)
    # Seen 11 hours ago: still on; 12 hours ago: ended.
    await _set_session(app, idle.session_token, last_seen_at=started - timedelta(hours=11))
    assert (await idle.get("/console/members")).status_code == 200
    await _set_session(app, idle.session_token, last_seen_at=started - timedelta(hours=12, seconds=1))
    assert (await idle.get("/console/members")).status_code == 303

    old = await console_as("viewer")
    assert old.session_token is not None
    await _set_session(app, old.session_token, expires_at=(await _created_at(app, old.session_token)) - timedelta(seconds=1))
    assert (await old.get("/console/members")).status_code == 303


async def test_signing_out_ends_the_session(app: FastAPI, console_as: ConsoleAs) -> None:
    viewer = await console_as("viewer")
    token = viewer.session_token
    page = await viewer.get("/console/members")
    assert '>Sign out</button>' in page.text
    out = await viewer.post_form("/console/sign-out")
    assert (out.status_code, out.headers["location"]) == (303, "/console/sign-in")
    assert viewer.session_token is None
    async with console_client(app) as client:
        client.cookies.set("herald_console", token or "", domain="herald.test", path="/console")
        assert (await client.get("/console/members")).status_code == 303


async def test_a_password_change_ends_every_session_of_the_member(app: FastAPI, tenancy: Tenancy) -> None:
    member = await add_member(app, tenancy.organization_id, "author")
    async with console_client(app) as first_client, console_client(app) as second_client:
        laptop, phone = ConsoleClient(first_client), ConsoleClient(second_client)
        await laptop.sign_in(member.email)
        await phone.sign_in(member.email)
        await laptop.get("/console/account")
        wrong = await laptop.post_form("/console/account/password", {"currentPassword": "not it at all", "newPassword": "a new long password"})
        assert wrong.status_code == 422 and "The current password is not right" in wrong.text
        changed = await laptop.post_form("/console/account/password", {"currentPassword": PASSWORD, "newPassword": "a new long password"})
        assert (changed.status_code, changed.headers["location"]) == (303, "/console/sign-in")
        assert (await phone.get("/console/members")).status_code == 303
        assert (await laptop.get("/console/members")).status_code == 303
        assert (await laptop.sign_in(member.email)).status_code == 401
        assert (await laptop.sign_in(member.email, "a new long password")).status_code == 303


async def test_removing_a_member_ends_their_sessions(console_as: ConsoleAs) -> None:
    owner = await console_as("owner")
    leaving = await console_as("author")
    assert (await leaving.get("/console/members")).status_code == 200
    assert leaving.member is not None
    await owner.get("/console/members")
    removed = await owner.post_form(f"/console/members/{leaving.member.id}/remove")
    assert removed.status_code == 303
    assert (await leaving.get("/console/members")).status_code == 303
    assert (await leaving.sign_in(leaving.member.email)).status_code == 401


async def test_the_console_is_off_with_herald_console_off(app: FastAPI) -> None:
    off = create_app(replace(app.state.settings, console=False))
    try:
        transport = httpx.ASGITransport(app=off)
        async with httpx.AsyncClient(transport=transport, base_url="http://herald.test") as client:
            for path in ("/console/sign-in", "/console/members", "/console/static/console.css"):
                answer = await client.get(path)
                assert answer.status_code == 404, path
                assert answer.json()["statusCode"] == 404
    finally:
        await off.state.engine.dispose()
