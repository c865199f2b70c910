"""The worker's sweep deletes what no longer counts: old failed sign-ins, ended sessions, expired links, lapsed SSO states."""

from __future__ import annotations

import secrets
from datetime import timedelta

from fastapi import FastAPI
from sqlalchemy import func, select

from herald.kit.time import utcnow
from herald.members import sessions
from herald.members.service import sweep
from herald.models import ConsoleSession, MemberInvite, SignInFailure, SsoSignIn
from tests.conftest import Tenancy
from tests.fixtures.console import add_member, unique_email


async def test_the_sweep_keeps_what_still_counts(app: FastAPI, tenancy: Tenancy) -> None:
    member = await add_member(app, tenancy.organization_id, "viewer")
    now = utcnow()
    email = unique_email("swept")
    async with app.state.sessionmaker() as session:
        session.add_all(
            [
                SignInFailure(email=email, client_address="198.51.100.7", at=now - timedelta(minutes=16)),
                SignInFailure(email=email, client_address="198.51.100.7", at=now - timedelta(minutes=5)),
            ]
        )
        _, live = await sessions.start_session(session, member, client_address="198.51.100.7", user_agent="test")
        _, idle = await sessions.start_session(session, member, client_address="198.51.100.7", user_agent="test")
        idle.last_seen_at = now - sessions.IDLE - timedelta(minutes=1)
        expired, open_ = secrets.token_hex(32), secrets.token_hex(32)
        for days, token in ((-2, expired), (3, open_)):
            session.add(
                MemberInvite(
                    organization_id=tenancy.organization_id, token_hash=token, email=email, role="viewer",
                    expires_at=now + timedelta(days=days),
                )
            )
        await session.commit()
        await sweep(session)
        await session.commit()
        failures = await session.scalar(select(func.count()).select_from(SignInFailure).where(SignInFailure.email == email))
        kept = set((await session.execute(select(ConsoleSession.token_hash).where(ConsoleSession.member_id == member.id))).scalars())
        invites = set((await session.execute(select(MemberInvite.token_hash).where(MemberInvite.email == email))).scalars())
    assert failures == 1
    assert kept == {live.token_hash}
    assert invites == {open_}


async def test_the_sweep_deletes_lapsed_single_sign_ons(app: FastAPI) -> None:
    now = utcnow()
    lapsed, live = secrets.token_hex(32), secrets.token_hex(32)
    async with app.state.sessionmaker() as session:
        for state_hash, minutes in ((lapsed, -1), (live, 9)):
            session.add(
                SsoSignIn(
                    state_hash=state_hash, nonce="n", code_verifier="v", next_path="/console",
                    created_at=now - timedelta(minutes=10), expires_at=now + timedelta(minutes=minutes),
                )
            )
        await session.commit()
        await sweep(session)
        await session.commit()
        kept = set((await session.execute(select(SsoSignIn.state_hash).where(SsoSignIn.state_hash.in_([lapsed, live])))).scalars())
    assert kept == {live}
