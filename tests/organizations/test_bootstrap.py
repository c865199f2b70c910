"""Bootstrap: one organization, however many processes run it at once."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from herald.kit.db import create_engine, create_sessionmaker
from herald.migrations import upgrade_async
from herald.models import ApiKey, Organization
from herald.organizations.service import BootstrapResult, bootstrap
from tests.fixtures import stores


async def _bootstrap_in_own_engine(url: str) -> BootstrapResult:
    """As a separate process would: its own engine and connection."""
    engine = create_engine(url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session:
            result = await bootstrap(session)
            await session.commit()
            return result
    finally:
        await engine.dispose()


async def test_concurrent_bootstraps_make_one_organization(empty_database: stores.TestDatabase) -> None:
    await upgrade_async(empty_database.url)
    results = await asyncio.gather(*(_bootstrap_in_own_engine(empty_database.url) for _ in range(4)))
    assert sum(result.created for result in results) == 1
    assert len({result.organization.id for result in results}) == 1
    engine = create_engine(empty_database.url, pool_size=1)
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(select(func.count()).select_from(Organization))).scalar_one() == 1
            assert (await connection.execute(select(func.count()).select_from(ApiKey))).scalar_one() == 2
    finally:
        await engine.dispose()
