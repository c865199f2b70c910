"""The data folder and the SQLite files are readable by their owner only, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from herald.config import SECRET_KEY_FILE, load_settings
from herald.kit.db import create_engine


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that takes nothing away: modes must be set by Herald, not left to the umask."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


async def test_sqlite_database_and_its_folder_are_private(tmp_path: Path, open_umask: None) -> None:
    database = tmp_path / "data" / "nested" / "herald.db"
    before = mode(tmp_path)
    engine = create_engine(f"sqlite:///{database}")
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE t (secret TEXT)"))
            await connection.execute(text("INSERT INTO t VALUES ('x')"))
        async with engine.connect() as connection:
            assert (await connection.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
            wal = database.with_name(database.name + "-wal")
            shm = database.with_name(database.name + "-shm")
            assert wal.exists() and shm.exists()
            assert (mode(wal), mode(shm)) == (0o600, 0o600)
    finally:
        await engine.dispose()
    assert mode(database) == 0o600
    assert (mode(tmp_path / "data"), mode(tmp_path / "data" / "nested")) == (0o700, 0o700)
    # A folder that was there already is the operator's: left as it is.
    assert mode(tmp_path) == before


async def test_an_existing_database_file_keeps_its_mode(tmp_path: Path) -> None:
    database = tmp_path / "herald.db"
    database.touch()
    database.chmod(0o640)
    engine = create_engine(f"sqlite:///{database}")
    try:
        async with engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    finally:
        await engine.dispose()
    assert mode(database) == 0o640


def test_generated_secret_key_and_data_folder_are_private(
    tmp_path: Path, open_umask: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HERALD_SECRET_KEY", raising=False)
    monkeypatch.delenv("HERALD_DATABASE_URL", raising=False)
    data_dir = tmp_path / "fresh"
    settings = load_settings(data_dir=data_dir)
    assert mode(data_dir) == 0o700
    assert mode(data_dir / SECRET_KEY_FILE) == 0o600
    assert (data_dir / SECRET_KEY_FILE).read_text().strip() == settings.secret_key
    # Read back, not made again.
    assert load_settings(data_dir=data_dir).secret_key == settings.secret_key
