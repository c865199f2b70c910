"""Single sign-on with OpenID Connect, in process, against a real identity provider on loopback (tests/fixtures/oidc.py).

The console runs in the test (httpx's ASGI transport); the provider is a real
HTTP server, and Herald reaches it through the outbound policy, as it would a
real one. The browser's part (following redirects) is played by the test.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any
from unittest import mock
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from herald.app import create_app
from herald.config import SettingsError, load_settings
from herald.models import AuditEntry, Member, SsoSignIn
from tests.conftest import Tenancy
from tests.fixtures.console import ConsoleClient, add_member, console_client, unique_email
from tests.fixtures.oidc import CLIENT_ID, CLIENT_SECRET, OidcProvider

ROLE_CLAIM = "herald_role"


@pytest.fixture
async def sso_app(app: FastAPI, tenancy: Tenancy, oidc_provider: OidcProvider) -> AsyncIterator[FastAPI]:
    """The API and console on the tests' store (an organization in it), with single sign-on through ``oidc_provider``."""
    settings = replace(
        app.state.settings,
        oidc_issuer=oidc_provider.issuer,
        oidc_client_id=CLIENT_ID,
        oidc_client_secret=CLIENT_SECRET,
        oidc_role_claim=ROLE_CLAIM,
    )
    application = create_app(settings)
    yield application
    await application.state.engine.dispose()


@pytest.fixture
async def browser(sso_app: FastAPI) -> AsyncIterator[ConsoleClient]:
    async with console_client(sso_app) as client:
        yield ConsoleClient(client)


async def at_the_provider(authorize_url: str) -> str:
    """Where the identity provider sends the browser back (the console's callback, with code and state)."""
    async with httpx.AsyncClient() as client:
        answer = await client.get(authorize_url)
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    assert location.startswith("http://herald.test/console/sso/callback?")
    return location.removeprefix("http://herald.test")


async def start(browser: ConsoleClient, next_path: str = "") -> str:
    """Click "Sign in with SSO": the provider's authorization URL."""
    answer = await browser.get("/console/sso" + (f"?next={next_path}" if next_path else ""))
    assert answer.status_code == 303, answer.text
    return answer.headers["location"]


async def sso_sign_in(browser: ConsoleClient, next_path: str = "") -> tuple[httpx.Response, str]:
    """The whole round: start, sign in at the provider, come back. The callback's answer and its path."""
    callback = await at_the_provider(await start(browser, next_path))
    return await browser.get(callback), callback


async def member_by_email(app: FastAPI, email: str) -> Member | None:
    async with app.state.sessionmaker() as session:
        return await session.scalar(select(Member).where(Member.email == email))


async def audit_actions(app: FastAPI, member_id: str) -> list[tuple[str, dict[str, Any]]]:
    async with app.state.sessionmaker() as session:
        rows = await session.execute(
            select(AuditEntry.action, AuditEntry.changes).where(AuditEntry.resource_id == member_id).order_by(AuditEntry.created_at)
        )
        return [(action, changes) for action, changes in rows]


async def sso_failures(app: FastAPI) -> list[dict[str, Any]]:
    async with app.state.sessionmaker() as session:
        rows = await session.scalars(select(AuditEntry.changes).where(AuditEntry.action == "member.sign_in_failed"))
        return [changes for changes in rows if changes.get("method") == "sso"]


def assert_not_signed_in(answer: httpx.Response, status: int, says: str) -> None:
    assert answer.status_code == status, answer.text
    assert says in answer.text
    assert "herald_console=" not in " ".join(answer.headers.get_list("set-cookie"))


async def test_the_sign_in_page_offers_sso_only_when_it_is_set_up(
    app: FastAPI, sso_app: FastAPI, anonymous_console: ConsoleClient, browser: ConsoleClient
) -> None:
    plain = await anonymous_console.get("/console/sign-in")
    assert "Sign in with SSO" not in plain.text
    assert (await anonymous_console.get("/console/sso")).status_code == 404
    assert (await anonymous_console.get("/console/sso/callback?code=x&state=y")).status_code == 404
    offered = await browser.get("/console/sign-in?next=/console/audit")
    assert '<a id="sso" class="button secondary sso" href="/console/sso?next=/console/audit">Sign in with SSO</a>' in offered.text


async def test_the_first_sso_sign_in_creates_the_member_with_the_claimed_role(
    sso_app: FastAPI, oidc_provider: OidcProvider, browser: ConsoleClient
) -> None:
    email = unique_email("sso")
    oidc_provider.sign_in_as("subject-author-1", email.upper(), name="Ada Author", **{ROLE_CLAIM: "author"})
    authorize = await start(browser, "/console/audit")
    # Authorization code with PKCE (S256), a state and a nonce, for this client and its callback.
    query = {name: values[0] for name, values in parse_qs(urlsplit(authorize).query).items()}
    assert authorize.startswith(f"{oidc_provider.issuer}/authorize?")
    assert query["response_type"] == "code" and query["client_id"] == CLIENT_ID
    assert query["redirect_uri"] == "http://herald.test/console/sso/callback"
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    assert len(query["state"]) >= 43 and len(query["nonce"]) >= 43 and query["state"] != query["nonce"]
    assert "openid" in query["scope"].split()
    landed = await browser.get(await at_the_provider(authorize))
    assert landed.status_code == 303, landed.text
    assert (landed.status_code, landed.headers["location"]) == (303, "/console/audit")
    assert browser.session_token is not None
    assert (await browser.get("/console/members")).status_code == 200

    member = await member_by_email(sso_app, email)
    assert member is not None
    assert (member.role, member.oidc_subject, member.password_hash, member.name) == ("author", "subject-author-1", None, "Ada Author")
    # The discovery document, the keys and the token, from the provider itself.
    assert {("GET", "/.well-known/openid-configuration"), ("GET", "/jwks"), ("POST", "/token")} <= set(oidc_provider.requests)
    actions = await audit_actions(sso_app, member.id)
    assert [action for action, _ in actions] == ["member.created", "member.signed_in"]
    assert actions[1][1]["method"] == "sso"
    # The state is spent.
    async with sso_app.state.sessionmaker() as session:
        assert await session.scalar(select(func.count()).select_from(SsoSignIn).where(SsoSignIn.state_hash == query["state"])) == 0

    # Signing in again finds the same member by the provider's subject, even with another email there.
    async with console_client(sso_app) as client:
        again = ConsoleClient(client)
        oidc_provider.sign_in_as("subject-author-1", unique_email("renamed"), **{ROLE_CLAIM: "author"})
        answer, _ = await sso_sign_in(again)
        assert answer.status_code == 303
    async with sso_app.state.sessionmaker() as session:
        assert await session.scalar(select(func.count()).select_from(Member).where(Member.oidc_subject == "subject-author-1")) == 1


async def test_the_role_claim_is_honoured_at_every_sign_in_and_an_unknown_role_gets_the_default(
    sso_app: FastAPI, oidc_provider: OidcProvider
) -> None:
    email = unique_email("roles")

    async def sign_in_with(role: Any) -> Member:
        oidc_provider.sign_in_as("subject-roles", email, **({ROLE_CLAIM: role} if role is not None else {}))
        async with console_client(sso_app) as client:
            answer, _ = await sso_sign_in(ConsoleClient(client))
        assert answer.status_code == 303, answer.text
        member = await member_by_email(sso_app, email)
        assert member is not None
        return member

    assert (await sign_in_with("superuser")).role == "viewer"  # HERALD_OIDC_DEFAULT_ROLE, viewer unless set
    assert (await sign_in_with("admin")).role == "admin"
    assert (await sign_in_with(["viewer", "author"])).role == "author"  # a list: its most powerful role
    assert (await sign_in_with(None)).role == "viewer"
    member = await sign_in_with("admin")
    changes = [changes["role"] for action, changes in await audit_actions(sso_app, member.id) if action == "member.role_changed"]
    assert changes == [["viewer", "admin"], ["admin", "author"], ["author", "viewer"], ["viewer", "admin"]]


async def test_the_default_role_is_the_settings_one(app: FastAPI, tenancy: Tenancy, oidc_provider: OidcProvider) -> None:
    settings = replace(
        app.state.settings,
        oidc_issuer=oidc_provider.issuer,
        oidc_client_id=CLIENT_ID,
        oidc_client_secret=CLIENT_SECRET,
        oidc_default_role="author",
    )
    application = create_app(settings)
    try:
        email = unique_email("default")
        oidc_provider.sign_in_as("subject-default", email, **{ROLE_CLAIM: "owner"})  # no role claim is set up: not read
        async with console_client(application) as client:
            answer, _ = await sso_sign_in(ConsoleClient(client))
        assert answer.status_code == 303
        member = await member_by_email(application, email)
        assert member is not None and member.role == "author"
    finally:
        await application.state.engine.dispose()


async def test_a_wrong_state_is_refused(sso_app: FastAPI, oidc_provider: OidcProvider, browser: ConsoleClient) -> None:
    email = unique_email("state")
    oidc_provider.sign_in_as("subject-state", email)
    callback = await at_the_provider(await start(browser))
    query = {name: values[0] for name, values in parse_qs(urlsplit(callback).query).items()}
    failures = len(await sso_failures(sso_app))
    tampered = "/console/sso/callback?" + urlencode({**query, "state": query["state"][:-2] + "xx"})
    assert_not_signed_in(await browser.get(tampered), 400, "start again")
    # The right state from another browser (without the cookie that started it) is refused too.
    async with console_client(sso_app) as client:
        assert_not_signed_in(await client.get(callback), 400, "start again")
    assert await member_by_email(sso_app, email) is None
    assert len(await sso_failures(sso_app)) == failures + 2
    # The provider was not asked for a token.
    assert ("POST", "/token") not in oidc_provider.requests


async def test_a_replayed_callback_or_code_is_refused(sso_app: FastAPI, oidc_provider: OidcProvider, browser: ConsoleClient) -> None:
    oidc_provider.sign_in_as("subject-replay", unique_email("replay"))
    answer, callback = await sso_sign_in(browser)
    assert answer.status_code == 303
    # The same answer again: its state was spent.
    async with console_client(sso_app) as client:
        thief = ConsoleClient(client)
        assert_not_signed_in(await thief.get(callback), 400, "start again")
        # The spent code with a live state of the thief's own: the provider refuses the code (and the verifier is another).
        await start(thief)
        state = next(cookie.value for cookie in thief.client.cookies.jar if cookie.name == "herald_console_sso")
        code = parse_qs(urlsplit(callback).query)["code"][0]
        replayed = await thief.get("/console/sso/callback?" + urlencode({"code": code, "state": state}))
        assert_not_signed_in(replayed, 401, "invalid_grant")


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"aud": "another-client"}, "aud claim"),
        ({"iss": "https://impostor.example"}, "iss claim"),
        ({"nonce": "another-sign-in"}, "nonce claim"),
        ({"exp": 1_000_000_000}, "expired"),
        ({"sign_with_stranger": True}, "signature"),
    ],
    ids=["audience", "issuer", "nonce", "expiry", "signature"],
)
async def test_an_id_token_not_for_this_sign_in_is_refused(
    change: dict[str, Any], says: str, sso_app: FastAPI, oidc_provider: OidcProvider, browser: ConsoleClient
) -> None:
    email = unique_email("token")
    oidc_provider.sign_in_as("subject-token-" + email, email)
    claims = dict(change)  # the parameters are shared by both stores' runs
    oidc_provider.sign_with_stranger = bool(claims.pop("sign_with_stranger", False))
    oidc_provider.token_claims = claims
    answer, _ = await sso_sign_in(browser)
    assert_not_signed_in(answer, 401, says)
    assert await member_by_email(sso_app, email) is None
    assert CLIENT_SECRET not in answer.text


async def test_rotated_keys_are_fetched_again(sso_app: FastAPI, oidc_provider: OidcProvider) -> None:
    for turn in range(2):
        email = unique_email(f"rotated-{turn}")
        oidc_provider.sign_in_as(f"subject-rotated-{email}", email)
        async with console_client(sso_app) as client:
            answer, _ = await sso_sign_in(ConsoleClient(client))
        assert answer.status_code == 303, answer.text
        # The keys are cached now; the provider signs with a new one from here on.
        oidc_provider.rotate_keys()
    assert oidc_provider.requests.count(("GET", "/jwks")) == 2


async def test_a_discovery_document_of_another_issuer_is_refused(sso_app: FastAPI, oidc_provider: OidcProvider) -> None:
    oidc_provider.metadata_changes = {"issuer": "https://impostor.example"}
    async with console_client(sso_app) as client:
        answer = await client.get("/console/sso")
    assert answer.status_code == 502
    assert "names another issuer than HERALD_OIDC_ISSUER" in answer.text
    assert "Sign in with SSO" in answer.text


@pytest.mark.parametrize(
    ("secret", "methods", "used"),
    [
        (CLIENT_SECRET, None, "client_secret_basic"),
        (CLIENT_SECRET, ["client_secret_post"], "client_secret_post"),
        ("", None, "none"),
    ],
    ids=["basic", "post", "public-client"],
)
async def test_the_client_authenticates_as_the_provider_supports(
    secret: str, methods: list[str] | None, used: str, app: FastAPI, tenancy: Tenancy, oidc_provider: OidcProvider
) -> None:
    oidc_provider.client_secret = secret
    if methods is not None:
        oidc_provider.metadata_changes = {"token_endpoint_auth_methods_supported": methods}
    settings = replace(app.state.settings, oidc_issuer=oidc_provider.issuer, oidc_client_id=CLIENT_ID, oidc_client_secret=secret)
    application = create_app(settings)
    try:
        email = unique_email("client-auth")
        oidc_provider.sign_in_as(f"subject-{email}", email)
        async with console_client(application) as client:
            answer, _ = await sso_sign_in(ConsoleClient(client))
        assert answer.status_code == 303, answer.text
        assert oidc_provider.token_auth == [used]
    finally:
        await application.state.engine.dispose()


async def test_a_refusal_at_the_provider_is_said(sso_app: FastAPI, oidc_provider: OidcProvider, browser: ConsoleClient) -> None:
    oidc_provider.deny = "access_denied"
    answer, _ = await sso_sign_in(browser)
    assert_not_signed_in(answer, 401, "did not sign you in (access_denied)")


async def test_an_existing_member_is_joined_only_by_a_verified_email(
    sso_app: FastAPI, tenancy: Tenancy, oidc_provider: OidcProvider
) -> None:
    existing = await add_member(sso_app, tenancy.organization_id, "admin")
    oidc_provider.sign_in_as("subject-unverified", existing.email, email_verified=False, **{ROLE_CLAIM: "owner"})
    async with console_client(sso_app) as client:
        answer, _ = await sso_sign_in(ConsoleClient(client))
    assert_not_signed_in(answer, 401, "does not say the email is verified")
    oidc_provider.sign_in_as("subject-verified", existing.email, **{ROLE_CLAIM: "admin"})
    async with console_client(sso_app) as client:
        answer, _ = await sso_sign_in(ConsoleClient(client))
    assert answer.status_code == 303
    member = await member_by_email(sso_app, existing.email)
    assert member is not None and (member.id, member.oidc_subject, member.role) == (existing.id, "subject-verified", "admin")
    # Another identity with the same email cannot take the member over.
    oidc_provider.sign_in_as("subject-other", existing.email)
    async with console_client(sso_app) as client:
        answer, _ = await sso_sign_in(ConsoleClient(client))
    assert_not_signed_in(answer, 401, "another identity")


async def test_the_provider_is_reached_through_the_outbound_policy(app: FastAPI, oidc_provider: OidcProvider) -> None:
    strict = create_app(
        replace(app.state.settings, outbound_allow=(), oidc_issuer=oidc_provider.issuer, oidc_client_id=CLIENT_ID)
    )
    try:
        async with console_client(strict) as client:
            answer = await client.get("/console/sso")
        assert answer.status_code == 502
        assert "may not connect to the identity provider" in answer.text and "loopback" in answer.text
        assert oidc_provider.requests == []
    finally:
        await strict.state.engine.dispose()


def _settings_error(**env: str) -> str:
    with mock.patch.dict(os.environ, env, clear=False), pytest.raises(SettingsError) as raised:
        load_settings(secret_key="k", data_dir="/tmp/herald-sso-settings")
    return str(raised.value)


def test_the_oidc_settings_say_what_is_wrong() -> None:
    assert "HERALD_OIDC_CLIENT_ID is not" in _settings_error(HERALD_OIDC_ISSUER="https://id.example.com")
    assert "HERALD_OIDC_ISSUER is not" in _settings_error(HERALD_OIDC_CLIENT_ID="herald")
    assert "https URL" in _settings_error(HERALD_OIDC_ISSUER="http://id.example.com", HERALD_OIDC_CLIENT_ID="herald")
    assert "issuer URL" in _settings_error(HERALD_OIDC_ISSUER="id.example.com", HERALD_OIDC_CLIENT_ID="herald")
    assert "one of owner, admin, author, viewer" in _settings_error(
        HERALD_OIDC_ISSUER="https://id.example.com", HERALD_OIDC_CLIENT_ID="herald", HERALD_OIDC_DEFAULT_ROLE="boss"
    )
    with mock.patch.dict(
        os.environ,
        {"HERALD_OIDC_ISSUER": "https://id.example.com", "HERALD_OIDC_CLIENT_ID": "herald", "HERALD_OIDC_CLIENT_SECRET": "s3cret"},
    ):
        settings = load_settings(secret_key="k", data_dir="/tmp/herald-sso-settings")
    assert (settings.sso, settings.oidc_default_role, settings.oidc_role_claim) == (True, "viewer", "")
    assert "s3cret" not in repr(settings)
