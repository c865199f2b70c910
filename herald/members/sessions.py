"""Console sessions: kept in the store, named by a random token the browser holds in a cookie.

The cookie (``herald_console``: HttpOnly, SameSite=Lax, Path=/console,
Secure behind https) carries 32 random bytes; the store keeps only their
sha256, so a copy of the database signs nobody in. A new token at every
sign-in (a token planted before sign-in is worth nothing after it). A session
ends after ``IDLE`` without a request or ``ABSOLUTE`` after sign-in, by
"Sign out", by a change of the member's password and by their removal.

``last_seen_at`` is written at most once every ``TOUCH_EVERY``, so reading
pages costs no write.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.time import utcnow
from herald.members.repository import MemberRepository
from herald.models import ConsoleSession, Member

COOKIE = "herald_console"
IDLE = timedelta(hours=12)
ABSOLUTE = timedelta(days=7)
TOUCH_EVERY = timedelta(minutes=1)
# Bounded like every stored value: what a browser says it is.
USER_AGENT_LENGTH = 300


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class SignedIn:
    """A live session and its member, as a request finds them."""

    session: ConsoleSession
    member: Member
    token_hash: str


async def start_session(
    session: AsyncSession,
    member: Member,
    *,
    client_address: str,
    user_agent: str,
    environment_id: str | None = None,
    replacing: str | None = None,
) -> tuple[str, ConsoleSession]:
    """A new session for ``member``: the token for the cookie (shown once) and its row.

    ``replacing`` is the token the browser held before, if any: its session
    ends (the id is rotated at sign-in, never reused).
    """
    repository = MemberRepository(session)
    if replacing:
        await repository.delete_session(token_hash(replacing))
    token = new_token()
    now = utcnow()
    row = ConsoleSession(
        token_hash=token_hash(token),
        member_id=member.id,
        csrf_token=secrets.token_urlsafe(32),
        environment_id=environment_id,
        created_at=now,
        last_seen_at=now,
        expires_at=now + ABSOLUTE,
        client_address=client_address[:64],
        user_agent=user_agent[:USER_AGENT_LENGTH],
    )
    repository.add(row)
    await repository.flush()
    return token, row


async def find_session(session: AsyncSession, token: str | None) -> SignedIn | None:
    """The live session a cookie names, or None (unknown, expired, idle too long, or older than the password).

    An ended session found here is deleted when the request commits (else by
    the worker's sweep, members.service.sweep). A session seen again after
    ``TOUCH_EVERY`` has its ``last_seen_at`` moved on.
    """
    if not token or len(token) > 100:
        return None
    hashed = token_hash(token)
    repository = MemberRepository(session)
    found = await repository.console_session(hashed)
    if found is None:
        return None
    row, member = found
    now = utcnow()
    changed = member.password_changed_at
    if row.expires_at <= now or row.last_seen_at + IDLE <= now or (changed is not None and row.created_at < changed):
        await repository.delete_session(hashed)
        return None
    if now - row.last_seen_at >= TOUCH_EVERY:
        await repository.touch_session(hashed, now)
        row.last_seen_at = now
    return SignedIn(row, member, hashed)


async def end_session(session: AsyncSession, token: str | None) -> None:
    if token:
        await MemberRepository(session).delete_session(token_hash(token))


async def end_sessions_of(session: AsyncSession, member_id: str) -> int:
    """End every session of a member (a password change, a removal); how many there were."""
    return await MemberRepository(session).delete_sessions_of(member_id)


async def choose_environment(session: AsyncSession, signed_in: SignedIn, environment_id: str) -> None:
    """Keep the environment a member chose in their session (every page shows that one's data)."""
    await MemberRepository(session).choose_environment(signed_in.token_hash, environment_id)
    signed_in.session.environment_id = environment_id
