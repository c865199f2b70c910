"""The audit log is append-only: the store itself refuses to change or delete an entry, on both stores."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from sqlalchemy import delete, select, text, update
from sqlalchemy.exc import DBAPIError

from herald.audit.service import record
from herald.members.policy import SystemActor
from herald.models import AuditEntry, Organization
from herald.organizations.service import create_organization
from tests.conftest import Tenancy


async def _entry(app: FastAPI, organization_id: str) -> str:
    async with app.state.sessionmaker() as session:
        entry = record(session, SystemActor(organization_id), "test.recorded", "test", changes={"n": 1})
        await session.commit()
        return entry.id


async def test_an_entry_cannot_be_updated_or_deleted(app: FastAPI, tenancy: Tenancy) -> None:
    entry_id = await _entry(app, tenancy.organization_id)
    statements = [
        update(AuditEntry).where(AuditEntry.id == entry_id).values(action="test.rewritten"),
        update(AuditEntry).where(AuditEntry.id == entry_id).values(changes={"n": 2}),
        delete(AuditEntry).where(AuditEntry.id == entry_id),
        text("DELETE FROM audit_entries"),
    ]
    for statement in statements:
        async with app.state.sessionmaker() as session:
            with pytest.raises(DBAPIError, match="append-only"):
                await session.execute(statement)
            await session.rollback()
    async with app.state.sessionmaker() as session:
        kept = (await session.execute(select(AuditEntry).where(AuditEntry.id == entry_id))).scalar_one()
    assert (kept.action, kept.changes) == ("test.recorded", {"n": 1})


async def test_truncating_the_log_fails_on_postgresql(app: FastAPI, tenancy: Tenancy) -> None:
    if app.state.settings.is_sqlite:
        pytest.skip("SQLite has no TRUNCATE (DELETE is refused above)")
    await _entry(app, tenancy.organization_id)
    async with app.state.sessionmaker() as session:
        with pytest.raises(DBAPIError, match="append-only"):
            await session.execute(text("TRUNCATE audit_entries"))
        await session.rollback()


async def test_an_organizations_entries_go_only_after_it(app: FastAPI) -> None:
    async with app.state.sessionmaker() as session:
        organization = (await create_organization(session, box=app.state.secret_box)).organization
        await session.commit()
    entry_id = await _entry(app, organization.id)
    async with app.state.sessionmaker() as session:
        await session.execute(delete(Organization).where(Organization.id == organization.id))
        await session.execute(delete(AuditEntry).where(AuditEntry.organization_id == organization.id))
        await session.commit()
        assert (await session.execute(select(AuditEntry).where(AuditEntry.id == entry_id))).first() is None
