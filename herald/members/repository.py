"""The only place that queries members, console sessions, invites and failed sign-ins."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import ConsoleSession, Environment, Member, MemberInvite, Organization, SignInFailure, SsoSignIn


class MemberRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def add(self, *rows: object) -> None:
        self.session.add_all(rows)

    async def flush(self) -> None:
        await self.session.flush()

    # Organizations and environments ----------------------------------------------------------

    async def first_organization(self) -> Organization | None:
        """The organization the console serves (Herald has one per installation; bootstrap makes it)."""
        result = await self.session.execute(select(Organization).order_by(Organization.created_at).limit(1))
        return result.scalar_one_or_none()

    async def environments(self, organization_id: str) -> list[Environment]:
        result = await self.session.execute(
            select(Environment).where(Environment.organization_id == organization_id).order_by(Environment.created_at)
        )
        return list(result.scalars())

    # Members ----------------------------------------------------------------------------------

    async def member_by_email(self, email: str) -> Member | None:
        return (await self.session.execute(select(Member).where(Member.email == email))).scalar_one_or_none()

    async def member_by_subject(self, subject: str) -> Member | None:
        """The member the identity provider knows by ``subject`` (single sign-on)."""
        return (await self.session.execute(select(Member).where(Member.oidc_subject == subject))).scalar_one_or_none()

    async def member(self, organization_id: str, member_id: str) -> Member | None:
        result = await self.session.execute(
            select(Member).where(Member.organization_id == organization_id, Member.id == member_id)
        )
        return result.scalar_one_or_none()

    async def members(self, organization_id: str) -> list[Member]:
        result = await self.session.execute(
            select(Member).where(Member.organization_id == organization_id).order_by(Member.email)
        )
        return list(result.scalars())

    async def count_members(self, organization_id: str, role: str | None = None) -> int:
        query = select(func.count()).select_from(Member).where(Member.organization_id == organization_id)
        if role is not None:
            query = query.where(Member.role == role)
        return int((await self.session.execute(query)).scalar_one())

    async def delete_member(self, member: Member) -> None:
        await self.session.execute(delete(ConsoleSession).where(ConsoleSession.member_id == member.id))
        await self.session.delete(member)

    # Sessions ---------------------------------------------------------------------------------

    async def console_session(self, token_hash: str) -> tuple[ConsoleSession, Member] | None:
        result = await self.session.execute(
            select(ConsoleSession, Member)
            .join(Member, Member.id == ConsoleSession.member_id)
            .where(ConsoleSession.token_hash == token_hash)
        )
        row = result.first()
        return (row[0], row[1]) if row is not None else None

    async def delete_session(self, token_hash: str) -> None:
        await self.session.execute(delete(ConsoleSession).where(ConsoleSession.token_hash == token_hash))

    async def delete_sessions_of(self, member_id: str) -> int:
        result = await self.session.execute(delete(ConsoleSession).where(ConsoleSession.member_id == member_id))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def touch_session(self, token_hash: str, at: datetime) -> None:
        await self.session.execute(
            update(ConsoleSession).where(ConsoleSession.token_hash == token_hash).values(last_seen_at=at)
        )

    async def choose_environment(self, token_hash: str, environment_id: str) -> None:
        await self.session.execute(
            update(ConsoleSession).where(ConsoleSession.token_hash == token_hash).values(environment_id=environment_id)
        )

    async def delete_sessions_ended_before(self, idle_floor: datetime, now: datetime) -> int:
        result = await self.session.execute(
            delete(ConsoleSession).where((ConsoleSession.expires_at < now) | (ConsoleSession.last_seen_at < idle_floor))
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    # Invites ----------------------------------------------------------------------------------

    async def invite_by_token(self, token_hash: str) -> MemberInvite | None:
        result = await self.session.execute(select(MemberInvite).where(MemberInvite.token_hash == token_hash))
        return result.scalar_one_or_none()

    async def use_invite(self, invite_id: str, at: datetime) -> bool:
        """Mark the invite used; False when another request used it first (a link works once)."""
        result = await self.session.execute(
            update(MemberInvite)
            .where(MemberInvite.id == invite_id, MemberInvite.used_at.is_(None))
            .values(used_at=at)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def open_invites(self, organization_id: str, now: datetime) -> Sequence[MemberInvite]:
        result = await self.session.execute(
            select(MemberInvite)
            .where(
                MemberInvite.organization_id == organization_id,
                MemberInvite.kind == "invite",
                MemberInvite.used_at.is_(None),
                MemberInvite.expires_at > now,
            )
            .order_by(MemberInvite.created_at.desc())
        )
        return list(result.scalars())

    async def delete_invites_expired_before(self, at: datetime) -> int:
        result = await self.session.execute(delete(MemberInvite).where(MemberInvite.expires_at < at))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    # Single sign-ons under way --------------------------------------------------------------

    async def sso_sign_in(self, state_hash: str, now: datetime) -> SsoSignIn | None:
        result = await self.session.execute(
            select(SsoSignIn).where(SsoSignIn.state_hash == state_hash, SsoSignIn.expires_at > now)
        )
        return result.scalar_one_or_none()

    async def delete_sso_sign_in(self, state_hash: str) -> bool:
        """Delete the sign-in; False when another request finished it first (a state works once)."""
        result = await self.session.execute(delete(SsoSignIn).where(SsoSignIn.state_hash == state_hash))
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def delete_sso_sign_ins_expired_before(self, at: datetime) -> int:
        result = await self.session.execute(delete(SsoSignIn).where(SsoSignIn.expires_at < at))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    # Failed sign-ins --------------------------------------------------------------------------

    async def count_failures(self, email: str, client_address: str, since: datetime) -> tuple[int, datetime | None]:
        """How many failures of (email, address) since ``since``, and the oldest of them (read by the index)."""
        result = await self.session.execute(
            select(func.count(), func.min(SignInFailure.at)).where(
                SignInFailure.email == email,
                SignInFailure.client_address == client_address,
                SignInFailure.at >= since,
            )
        )
        count, oldest = result.one()
        return int(count), oldest

    async def delete_failures_before(self, at: datetime) -> int:
        result = await self.session.execute(delete(SignInFailure).where(SignInFailure.at < at))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
