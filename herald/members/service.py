"""Members of the organization: adding, signing in, invites, the first owner, role changes and removal.

No HTTP types here: the console's handlers and the ``herald users`` command
call these, and they raise herald.kit.errors exceptions that carry their
status. Every change is recorded in the audit log (herald.audit.service) in
the caller's transaction.

Sign-in throttling is counted in the store (``sign_in_failures``), so it holds
across API processes: ``MAX_FAILURES`` failures for one email from one client
address within ``FAILURE_WINDOW`` refuse that pair's sign-ins until the oldest
of them leaves the window. A refused attempt is not counted again, so the
window does not extend itself for ever.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from herald.audit.service import record
from herald.kit.errors import ConflictError, ForbiddenError, NotFoundError, ValidationFailed
from herald.kit.time import utcnow
from herald.members import passwords, sessions
from herald.members.policy import ROLES, Actor, MemberActor, SystemActor, authorize
from herald.members.repository import MemberRepository
from herald.models import ConsoleSession, Member, MemberInvite, Organization, SignInFailure

MAX_FAILURES = 5
FAILURE_WINDOW = timedelta(minutes=15)
INVITE_LIFETIME = timedelta(days=7)
SETUP_LIFETIME = timedelta(hours=24)
INVALID_CREDENTIALS = "Invalid email or password"
TOO_MANY_ATTEMPTS = "Too many attempts: wait a few minutes before you try again"
MAX_EMAIL_LENGTH = 320
MAX_NAME_LENGTH = 200
# What an address must look like to be one: something@something.something, no spaces.
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def normalize_email(email: str) -> str:
    return email.strip().lower()


def check_email(email: str, field: str = "email") -> str:
    """The email lower-cased, or 422."""
    normalized = normalize_email(email)
    if not normalized or len(normalized) > MAX_EMAIL_LENGTH or not _EMAIL.match(normalized):
        raise ValidationFailed.field(field, "Enter an email address in the correct format, like name@example.com", email[:MAX_EMAIL_LENGTH])
    return normalized


def check_role(role: str, field: str = "role") -> str:
    if role not in ROLES:
        raise ValidationFailed.field(field, f"The role must be one of {', '.join(ROLES)}", role[:50])
    return role


def actor_of(member: Member) -> MemberActor:
    return MemberActor(member.id, member.organization_id, member.role, member.email)


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def the_organization(session: AsyncSession) -> Organization:
    """The organization this installation serves; 404 before ``herald bootstrap``."""
    organization = await MemberRepository(session).first_organization()
    if organization is None:
        raise NotFoundError("No organization yet: run `herald bootstrap` first")
    return organization


# Members ----------------------------------------------------------------------------------------


async def add_member(
    session: AsyncSession,
    actor: Actor,
    organization_id: str,
    *,
    email: str,
    role: str,
    password: str | None,
    name: str = "",
) -> Member:
    """A new member; 409 when the email is taken, 422 for a bad email, role or password."""
    email = check_email(email)
    check_role(role)
    if password is not None:
        passwords.check_new_password(password)
    repository = MemberRepository(session)
    if await repository.member_by_email(email) is not None:
        raise ConflictError(f"A member with the email {email} exists already")
    member = Member(
        organization_id=organization_id,
        email=email,
        name=name.strip()[:MAX_NAME_LENGTH],
        role=role,
        password_hash=await passwords.hash_password(password) if password is not None else None,
        created_at=utcnow(),
    )
    repository.add(member)
    await repository.flush()
    record(session, actor, "member.created", "member", member.id, changes={"email": email, "role": role}, organization_id=organization_id)
    return member


async def list_members(session: AsyncSession, organization_id: str) -> list[Member]:
    return await MemberRepository(session).members(organization_id)


async def require_member(session: AsyncSession, organization_id: str, member_id: str) -> Member:
    member = await MemberRepository(session).member(organization_id, member_id[:64])
    if member is None:
        raise NotFoundError(f"Member {member_id[:64]} not found")
    return member


async def change_role(session: AsyncSession, actor: MemberActor, member_id: str, role: str) -> Member:
    """Give a member another role. An admin cannot change an owner or make one; the last owner stays an owner."""
    authorize(actor, "members.write")
    check_role(role)
    member = await require_member(session, actor.organization_id, member_id)
    if member.role == role:
        return member
    if actor.role != "owner" and (member.role == "owner" or role == "owner"):
        raise ForbiddenError("Only an owner can change an owner's role or make someone an owner")
    if member.role == "owner" and await MemberRepository(session).count_members(actor.organization_id, "owner") <= 1:
        raise ForbiddenError("The organization's last owner cannot stop being an owner: make another owner first")
    before = member.role
    member.role = role
    await MemberRepository(session).flush()
    record(session, actor, "member.role_changed", "member", member.id, changes={"email": member.email, "role": [before, role]})
    return member


async def remove_member(session: AsyncSession, actor: MemberActor, member_id: str) -> Member:
    """Remove a member and end their sessions. An admin cannot remove an owner; the last owner cannot leave."""
    member = await require_member(session, actor.organization_id, member_id)
    if member.id != actor.member_id:
        authorize(actor, "members.write")
    if member.role == "owner":
        if actor.role != "owner":
            raise ForbiddenError("Only an owner can remove an owner")
        if await MemberRepository(session).count_members(actor.organization_id, "owner") <= 1:
            raise ForbiddenError("The organization's last owner cannot leave: make another owner first")
    await MemberRepository(session).delete_member(member)
    record(session, actor, "member.removed", "member", member.id, changes={"email": member.email, "role": member.role})
    return member


async def change_password(session: AsyncSession, member: Member, current: str, new: str) -> None:
    """Set a new password after checking the current one; every session of the member ends."""
    if not await passwords.verify_password(member.password_hash, current):
        raise ValidationFailed.field("currentPassword", "The current password is not right")
    passwords.check_new_password(new, "newPassword")
    member.password_hash = await passwords.hash_password(new)
    member.password_changed_at = utcnow()
    await sessions.end_sessions_of(session, member.id)
    await MemberRepository(session).flush()
    record(session, actor_of(member), "member.password_changed", "member", member.id)


# Signing in -------------------------------------------------------------------------------------


@dataclass
class SignInResult:
    """What came of a sign-in: a member and the new session's token, or why not.

    A failure is an answer, not an exception, so that the caller's
    transaction commits the failure's record.
    """

    member: Member | None = None
    token: str | None = None
    console_session: ConsoleSession | None = None
    throttled: bool = False
    retry_after: int = 0


async def sign_in(
    session: AsyncSession,
    email: str,
    password: str,
    *,
    client_address: str,
    user_agent: str = "",
    replacing: str | None = None,
) -> SignInResult:
    """Check an email and password; on success start a new session (``replacing`` the browser's old one)."""
    email = normalize_email(email)[:MAX_EMAIL_LENGTH]
    client_address = client_address[:64]
    repository = MemberRepository(session)
    now = utcnow()
    failures, oldest = await repository.count_failures(email, client_address, now - FAILURE_WINDOW)
    if failures >= MAX_FAILURES:
        wait = (oldest + FAILURE_WINDOW - now).total_seconds() if oldest is not None else FAILURE_WINDOW.total_seconds()
        return SignInResult(throttled=True, retry_after=max(1, int(wait) + 1))
    member = await repository.member_by_email(email) if email else None
    if not await passwords.verify_password(member.password_hash if member is not None else None, password):
        repository.add(SignInFailure(email=email, client_address=client_address, at=now))
        organization = await repository.first_organization() if member is None else None
        organization_id = member.organization_id if member is not None else organization.id if organization else None
        if organization_id is not None:
            record(
                session,
                SystemActor(organization_id),
                "member.sign_in_failed",
                "member",
                member.id if member is not None else None,
                changes={"email": email, "clientAddress": client_address},
            )
        return SignInResult()
    token, row = await sessions.start_session(
        session, member, client_address=client_address, user_agent=user_agent, replacing=replacing
    )
    record(session, actor_of(member), "member.signed_in", "member", member.id, changes={"clientAddress": client_address})
    return SignInResult(member=member, token=token, console_session=row)


async def sign_in_member(
    session: AsyncSession,
    member: Member,
    *,
    client_address: str,
    user_agent: str = "",
    method: str = "",
    replacing: str | None = None,
) -> str:
    """A session for a member who has just proved who they are another way (joined through a link, SSO); its token.

    ``method`` says how, in the audit entry (``sso``); ``replacing`` is the browser's former session token, ended.
    """
    token, _ = await sessions.start_session(
        session, member, client_address=client_address[:64], user_agent=user_agent, replacing=replacing
    )
    changes = {"clientAddress": client_address[:64], **({"method": method} if method else {})}
    record(session, actor_of(member), "member.signed_in", "member", member.id, changes=changes)
    return token


# Invites and the first owner's link -------------------------------------------------------------


@dataclass
class Link:
    """A one-time link's token (shown once) and its row."""

    token: str
    invite: MemberInvite


async def invite(session: AsyncSession, actor: MemberActor, email: str, role: str) -> Link:
    """An invite for ``email`` to join with ``role``: a link that works once within 7 days.

    An admin cannot invite an owner. 409 when the email is a member already.
    """
    authorize(actor, "members.invite")
    email = check_email(email)
    check_role(role)
    if role == "owner" and actor.role != "owner":
        raise ForbiddenError("Only an owner can invite an owner")
    if await MemberRepository(session).member_by_email(email) is not None:
        raise ConflictError(f"{email} is a member already")
    link = await _new_link(session, actor.organization_id, "invite", role, email=email, created_by=actor.member_id)
    record(session, actor, "member.invited", "invite", link.invite.id, changes={"email": email, "role": role})
    return link


async def _new_link(
    session: AsyncSession,
    organization_id: str,
    kind: str,
    role: str,
    *,
    email: str | None = None,
    created_by: str | None = None,
) -> Link:
    token = secrets.token_urlsafe(32)
    now = utcnow()
    lifetime = SETUP_LIFETIME if kind == "setup" else INVITE_LIFETIME
    row = MemberInvite(
        organization_id=organization_id,
        kind=kind,
        token_hash=_token_hash(token),
        email=email,
        role=role,
        created_by=created_by,
        created_at=now,
        expires_at=now + lifetime,
    )
    MemberRepository(session).add(row)
    await MemberRepository(session).flush()
    return Link(token, row)


async def open_invites(session: AsyncSession, organization_id: str) -> list[MemberInvite]:
    return list(await MemberRepository(session).open_invites(organization_id, utcnow()))


async def find_link(session: AsyncSession, token: str, kind: str) -> MemberInvite:
    """The open link a token names; 404 when it is unknown, used, expired or of another kind."""
    if not token or len(token) > 100:
        raise NotFoundError("This link is not valid: it may have been used or have expired")
    row = await MemberRepository(session).invite_by_token(_token_hash(token))
    if row is None or row.kind != kind or row.used_at is not None or row.expires_at <= utcnow():
        raise NotFoundError("This link is not valid: it may have been used or have expired")
    if kind == "setup" and await MemberRepository(session).count_members(row.organization_id) > 0:
        raise NotFoundError("This link is not valid: the organization has its first owner already")
    return row


async def accept_link(
    session: AsyncSession, token: str, kind: str, *, password: str, email: str | None = None, name: str = ""
) -> Member:
    """Join through a link: an invite (its email and role) or the set-up link (the first owner, with ``email``).

    The link is used once: a second use, even a concurrent one, finds it used (404).
    """
    row = await find_link(session, token, kind)
    passwords.check_new_password(password)
    address = check_email(email) if kind == "setup" else row.email or ""
    if not await MemberRepository(session).use_invite(row.id, utcnow()):
        raise NotFoundError("This link is not valid: it may have been used or have expired")
    member = await add_member(
        session, SystemActor(row.organization_id), row.organization_id, email=address, role=row.role, password=password, name=name
    )
    record(
        session,
        actor_of(member),
        "member.joined",
        "member",
        member.id,
        changes={"email": member.email, "role": member.role, "through": kind},
    )
    return member


async def setup_link(session: AsyncSession, organization_id: str) -> str | None:
    """A one-time link (24 h) to create the first owner, while the organization has no member; else None.

    Each call makes a new link (the token is kept only hashed, so an earlier
    one cannot be shown again); earlier links keep working until they expire
    or one of them is used.
    """
    if await MemberRepository(session).count_members(organization_id) > 0:
        return None
    link = await _new_link(session, organization_id, "setup", "owner")
    return link.token


# Housekeeping -----------------------------------------------------------------------------------


async def sweep(session: AsyncSession, now: datetime | None = None) -> int:
    """Delete what no longer counts: failed sign-ins out of the window, ended sessions, expired links and SSO states."""
    now = now or utcnow()
    repository = MemberRepository(session)
    return (
        await repository.delete_failures_before(now - FAILURE_WINDOW)
        + await repository.delete_sessions_ended_before(now - sessions.IDLE, now)
        + await repository.delete_invites_expired_before(now - timedelta(days=1))
        + await repository.delete_sso_sign_ins_expired_before(now)
    )
