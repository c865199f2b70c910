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


async def test_every_environment_gets_the_in_app_integration_and_sealed_keys(empty_database: stores.TestDatabase) -> None:
    from sqlalchemy import delete

    from herald.kit.crypto import SecretBox
    from herald.models import Integration

    await upgrade_async(empty_database.url)
    box = SecretBox("test-secret-key")
    engine = create_engine(empty_database.url, pool_size=1)
    try:
        maker = create_sessionmaker(engine)
        async with maker() as session:
            created = await bootstrap(session, box)
            await session.commit()
        async with maker() as session:
            rows = (await session.execute(select(Integration))).scalars().all()
            assert sorted((row.environment_id, row.provider_id, row.channel, row.active) for row in rows) == sorted(
                (entry.environment.id, "novu", "in_app", True) for entry in created.environments
            )
            keys = (await session.execute(select(ApiKey))).scalars().all()
            assert sorted(box.open(key.sealed_key or "") for key in keys) == sorted(
                entry.api_key or "" for entry in created.environments
            )
            # An environment made before the integration existed gets it from the next bootstrap, once.
            await session.execute(delete(Integration))
            await session.commit()
        for _ in range(2):
            async with maker() as session:
                await bootstrap(session, box)
                await session.commit()
        async with maker() as session:
            assert (await session.execute(select(func.count()).select_from(Integration))).scalar_one() == 2
    finally:
        await engine.dispose()
