"""Alembic migrations: one history for SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Alembic announces each of its plugins at INFO when it is imported: noise on every command.
logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)

from alembic import command  # noqa: E402
from alembic.config import Config  # noqa: E402
from alembic.runtime.migration import MigrationContext  # noqa: E402
from alembic.script import ScriptDirectory  # noqa: E402
from alembic.util import CommandError  # noqa: E402
from sqlalchemy.engine import Connection  # noqa: E402

MIGRATIONS_DIR = Path(__file__).parent
RUN_MIGRATE = "run 'herald migrate'"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # Handed over as it is, not as an option: options go through ConfigParser's
    # interpolation, where the % of a percent-encoded password or path is special
    # ("invalid interpolation syntax").
    config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the database to ``revision``; safe to call on every start."""
    command.upgrade(alembic_config(database_url), revision)


async def upgrade_async(database_url: str, revision: str = "head") -> None:
    await asyncio.to_thread(upgrade, database_url, revision)


@functools.cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config(""))


def head_revision() -> str:
    """The revision this code needs."""
    head = _scripts().get_current_head()
    assert head is not None, "the migrations have more than one head"
    return head


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def read_revision(connection: Connection) -> str | None:
    """The database's revision (None when it has no schema); for ``AsyncConnection.run_sync``."""
    # Without the two INFO lines a migration context logs when it is made ("Context impl ..."):
    # a command refused for want of a schema prints one line.
    with _quiet("alembic.runtime.migration"):
        return MigrationContext.configure(connection).get_current_revision()


def is_known_revision(revision: str) -> bool:
    """Whether ``revision`` is one of this code's (a newer Herald may have migrated the database further)."""
    try:
        return _scripts().get_revision(revision) is not None
    except CommandError:
        return False


def schema_mismatch(current: str | None) -> str | None:
    """Why a database at ``current`` does not fit this code, as the end of a sentence
    ("The database ..."); None when it is at the head."""
    head = head_revision()
    if current == head:
        return None
    if current is None:
        return f"has no schema: {RUN_MIGRATE}"
    if not is_known_revision(current):
        return (
            f"is at revision {current}, which this version of Herald does not know (a newer one migrated it): "
            f"run a Herald that has revision {current}"
        )
    return f"is at revision {current}, the code needs {head}: {RUN_MIGRATE}"


async def current_revision(database_url: str) -> str | None:
    """The revision of the database at ``database_url``; None when it has no schema.

    A SQLite file that does not exist has no schema: it is not created to find
    out. A store that cannot be reached raises
    :class:`herald.kit.database_url.StoreUnreachable` with the reason.
    """
    from sqlalchemy.engine import make_url

    from herald.kit.database_url import SQLITE_DRIVERS, StoreUnreachable, explain_connect_failure
    from herald.kit.db import create_engine

    parsed = make_url(database_url)
    if parsed.drivername in SQLITE_DRIVERS and parsed.database and parsed.database != ":memory:":
        if not Path(parsed.database).is_file():
            return None
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(read_revision)
    except Exception as exc:
        reason = explain_connect_failure(database_url, exc)
        if reason is None:
            raise
        raise StoreUnreachable(reason) from None
    finally:
        await engine.dispose()
