"""Single sign-on with OpenID Connect: starting a sign-in, finishing it, and the member it signs in.

:func:`begin` keeps a new state, nonce and PKCE verifier in the store
(``sso_sign_ins``, by the state's sha256) and gives the identity provider's
address to send the browser to; the browser keeps the state in a cookie.
:func:`finish` takes the browser back: the state in the answer must be the
cookie's and a live one of the store, and works once (its row is deleted
whatever the outcome); the code is traded for an ID token with the verifier
(herald/members/oidc.py checks the token); then the member is found by the
provider's subject, or made on their first sign-in.

Roles: with ``HERALD_OIDC_ROLE_CLAIM`` the identity provider decides a
member's role at every sign-in (a claim that is not one of the four roles
gives ``HERALD_OIDC_DEFAULT_ROLE``), except that the organization's last
owner stays an owner; without it a new member gets the default role and
roles are changed on the Members page.

An existing member (who signed up with a password) is joined to their
identity at the provider only when the provider says their email is
verified (``email_verified``): else anyone able to choose their email at the
provider could take over the account.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.audit.service import record
from herald.kit.errors import ValidationFailed
from herald.kit.time import utcnow
from herald.members import service, sessions
from herald.members.oidc import OidcClient, SsoError, new_secret
from herald.members.policy import ROLES, SystemActor
from herald.members.repository import MemberRepository
from herald.models import Member, SsoSignIn

# Time to sign in at the identity provider and come back.
LIFETIME = timedelta(minutes=10)
STATE_TOO_OLD = "This sign-in was not started in this browser, was used already or has expired: start again"


@dataclass(frozen=True)
class Started:
    """A sign-in begun: the state for the browser's cookie, and the identity provider's address to send it to."""

    state: str
    url: str


@dataclass(frozen=True)
class Finished:
    """A member signed in by single sign-on: the new session's token and the page to go to."""

    member: Member
    token: str
    next_path: str


async def begin(session: AsyncSession, client: OidcClient, *, redirect_uri: str, next_path: str) -> Started:
    state, nonce, verifier = new_secret(), new_secret(), new_secret()
    url = await client.authorization_url(redirect_uri=redirect_uri, state=state, nonce=nonce, code_verifier=verifier)
    now = utcnow()
    repository = MemberRepository(session)
    repository.add(
        SsoSignIn(
            state_hash=sessions.token_hash(state),
            nonce=nonce,
            code_verifier=verifier,
            next_path=next_path[:500],
            created_at=now,
            expires_at=now + LIFETIME,
        )
    )
    await repository.flush()
    return Started(state, url)


async def finish(
    session: AsyncSession,
    client: OidcClient,
    *,
    state: str,
    browser_state: str,
    code: str,
    error: str,
    redirect_uri: str,
    role_claim: str,
    default_role: str,
    client_address: str,
    user_agent: str,
    replacing: str | None = None,
) -> Finished:
    """Finish the sign-in the browser comes back with; SsoError (recorded by :func:`record_failure`) when it does not hold."""
    if not state or len(state) > 100 or not browser_state or not hmac.compare_digest(state, browser_state[:100]):
        raise SsoError(STATE_TOO_OLD)
    repository = MemberRepository(session)
    pending = await repository.sso_sign_in(sessions.token_hash(state), utcnow())
    if pending is None:
        raise SsoError(STATE_TOO_OLD)
    try:
        if error:
            raise SsoError(f"The identity provider did not sign you in ({error[:100]})")
        if not code or len(code) > 2000:
            raise SsoError("The identity provider sent no code back")
        claims = await client.exchange(
            code=code, redirect_uri=redirect_uri, code_verifier=pending.code_verifier, nonce=pending.nonce
        )
    finally:
        # A state works once, whatever came of it; the write comes after the provider's answers, so a
        # slow provider holds no lock of the store.
        used_first = await repository.delete_sso_sign_in(pending.state_hash)
    if not used_first:
        raise SsoError(STATE_TOO_OLD)
    member = await member_for(session, claims, role_claim=role_claim, default_role=default_role)
    token = await service.sign_in_member(
        session, member, client_address=client_address, user_agent=user_agent, method="sso", replacing=replacing
    )
    return Finished(member, token, pending.next_path)


def claimed_role(claims: dict[str, Any], role_claim: str, default_role: str) -> str:
    """The role ``role_claim`` holds (a string, or a list: its most powerful role), else ``default_role``."""
    value = claims.get(role_claim) if role_claim else None
    values = value if isinstance(value, list) else [value]
    found = [role for role in ROLES if role in values]
    return found[0] if found else default_role


async def member_for(session: AsyncSession, claims: dict[str, Any], *, role_claim: str, default_role: str) -> Member:
    """The member the ID token's claims name: found by subject, joined by a verified email, or new."""
    repository = MemberRepository(session)
    subject = str(claims["sub"])
    role = claimed_role(claims, role_claim, default_role)
    member = await repository.member_by_subject(subject)
    if member is None:
        email = claims.get("email")
        if not isinstance(email, str) or not email:
            raise SsoError("The identity provider gave no email address: ask its administrator to release the email claim")
        try:
            email = service.check_email(email)
        except ValidationFailed:
            raise SsoError("The email address the identity provider gave is not one") from None
        member = await repository.member_by_email(email)
        if member is not None:
            if member.oidc_subject is not None:
                raise SsoError("A member with this email signs in with another identity at the provider")
            if claims.get("email_verified") is not True:
                raise SsoError(
                    "A member with this email exists already, and the identity provider does not say the email is verified"
                )
            member.oidc_subject = subject
            await repository.flush()
            record(session, SystemActor(member.organization_id), "member.sso_linked", "member", member.id, changes={"email": email})
        else:
            organization = await service.the_organization(session)
            name = claims.get("name") if isinstance(claims.get("name"), str) else ""
            member = await service.add_member(
                session, SystemActor(organization.id), organization.id, email=email, role=role, password=None, name=name
            )
            member.oidc_subject = subject
            await repository.flush()
            return member
    if role_claim and role != member.role:
        await _take_role(session, member, role)
    return member


async def _take_role(session: AsyncSession, member: Member, role: str) -> None:
    """The identity provider's role for ``member``; the organization's last owner stays one."""
    repository = MemberRepository(session)
    if member.role == "owner" and await repository.count_members(member.organization_id, "owner") <= 1:
        return
    before = member.role
    member.role = role
    await repository.flush()
    record(
        session,
        SystemActor(member.organization_id),
        "member.role_changed",
        "member",
        member.id,
        changes={"email": member.email, "role": [before, role], "through": "sso"},
    )


async def record_failure(session: AsyncSession, reason: str, *, client_address: str) -> None:
    """A single sign-on that signed nobody in, in the audit log."""
    organization = await MemberRepository(session).first_organization()
    if organization is None:
        return
    record(
        session,
        SystemActor(organization.id),
        "member.sign_in_failed",
        "member",
        None,
        changes={"method": "sso", "reason": reason[:300], "clientAddress": client_address[:64]},
    )
