"""``herald backup PATH``: a consistent copy of a SQLite database, taken while Herald serves it.

The copy is made with SQLite's online backup API from a read transaction: in
WAL mode that reads one snapshot of the database while the server keeps
writing, so the copy is the database as it was at one instant. It is written
to a private temporary file beside ``PATH``, switched to a rollback journal
(one self-contained file, nothing beside it to copy), checked, and only then
linked to ``PATH`` (a link fails rather than replace a file made meanwhile).

PostgreSQL databases are backed up with ``pg_dump`` (docs/operations.md).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from herald.kit.database_url import SQLITE_DRIVERS
from herald.kit.files import create_private_file


class BackupRefused(Exception):
    """The backup cannot be made as asked; the message says why and what to do."""


PG_DUMP_HINT = (
    "PostgreSQL databases are backed up with pg_dump, not herald backup: "
    "pg_dump --format=custom --file=herald.dump DATABASE_URL (see docs/operations.md); "
    "keep HERALD_SECRET_KEY with the dump"
)


@dataclass(frozen=True)
class Backup:
    path: Path
    size: int


def sqlite_path(database_url: str) -> Path:
    """The file of a SQLite database URL; BackupRefused for any other store."""
    parsed = make_url(database_url)
    if parsed.drivername not in SQLITE_DRIVERS:
        raise BackupRefused(PG_DUMP_HINT)
    if not parsed.database or parsed.database == ":memory:":
        raise BackupRefused("the database is in memory: there is no file to back up")
    return Path(parsed.database)


def backup_sqlite(source: Path, target: Path) -> Backup:
    """Copy the database at ``source`` to the new file ``target``; never overwrites."""
    target = target.expanduser().absolute()
    if target.exists() or target.is_symlink():
        raise BackupRefused(f"{target} exists: herald backup does not overwrite a file; name a new one")
    if not target.parent.is_dir():
        raise BackupRefused(f"the folder {target.parent} does not exist")
    if not source.is_file():
        raise BackupRefused(f"there is no database at {source}")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        # Private from its first byte: the copy holds API key hashes and sealed secrets.
        create_private_file(partial)
        _copy(source, partial)
        try:
            os.link(partial, target)
        except FileExistsError:
            raise BackupRefused(
                f"{target} exists: herald backup does not overwrite a file; name a new one"
            ) from None
    except OSError as exc:
        raise BackupRefused(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        for leftover in (partial, *(partial.with_name(partial.name + suffix) for suffix in ("-journal", "-wal", "-shm"))):
            leftover.unlink(missing_ok=True)
    return Backup(path=target, size=target.stat().st_size)


def _copy(source: Path, destination: Path) -> None:
    # Read-only: the backup never writes to the served database (nor creates one).
    reader = sqlite3.connect(f"{source.as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        writer = sqlite3.connect(destination)
        try:
            # One step (pages=-1): one read snapshot, so writes made meanwhile neither
            # restart the copy nor wait for it (WAL readers do not block writers).
            reader.backup(writer, pages=-1)
            writer.execute("PRAGMA journal_mode=DELETE")
            problems = [row[0] for row in writer.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise BackupRefused(f"the copy did not pass SQLite's check: {problems[0]}")
        finally:
            writer.close()
    except sqlite3.Error as exc:
        raise BackupRefused(f"cannot copy the database at {source}: {exc}") from None
    finally:
        reader.close()
