"""SQLite for the async engine, called on the event loop's own thread.

aiosqlite runs every call in a thread of its own and hands the result back:
each statement, fetch and commit is a round trip between two threads, and
when the event loop is busy the SQLite thread waits for the GIL before it can
even start. For a local SQLite file in WAL mode most calls take microseconds,
so that hand-off was most of what a small transaction cost (a trigger recorded
alone spent about 2.8 ms of CPU on it).

This driver keeps SQLAlchemy's aiosqlite adaptation (the same dialect, the
same SQL) but gives it a connection whose coroutines run ``sqlite3`` directly
and return at once. The price is that a slow statement holds the event loop:
acceptable for what SQLite serves (one machine, short transactions), and the
reason the busy timeout is short (herald.kit.db): a writer in another process
(the CLI) makes this one wait in short, bounded steps rather than for long.

Registered as ``sqlite+heraldinline``; herald.kit.db selects it for SQLite.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from sqlalchemy.connectors.asyncio import AsyncAdapt_dbapi_connection
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
    AsyncAdapt_aiosqlite_ss_cursor,
    SQLiteDialect_aiosqlite,
)
from sqlalchemy.dialects.sqlite.base import SQLiteCompiler
from sqlalchemy.util.concurrency import await_


class InlineCursor:
    """An aiosqlite-shaped cursor over a ``sqlite3`` cursor: every coroutine finishes at once."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    async def execute(self, sql: str, parameters: Any = None) -> InlineCursor:
        if parameters is None:
            self._cursor.execute(sql)
        else:
            self._cursor.execute(sql, parameters)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> InlineCursor:
        self._cursor.executemany(sql, parameters)
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._cursor.fetchmany(size) if size is not None else self._cursor.fetchmany()

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def close(self) -> None:
        self._cursor.close()

    async def nextset(self) -> None:
        return None

    async def setinputsizes(self, *sizes: Any) -> None:
        return None

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    async def __aenter__(self) -> InlineCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cursor.close()

    def __aiter__(self) -> InlineCursor:
        return self

    async def __anext__(self) -> Any:
        row = self._cursor.fetchone()
        if row is None:
            raise StopAsyncIteration
        return row


class InlineConnection:
    """An aiosqlite-shaped connection over a ``sqlite3`` connection."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._conn = connection
        # aiosqlite's adapter checks this to know the connection is open.
        self._connection: sqlite3.Connection | None = connection

    def cursor(self) -> InlineCursor:
        return InlineCursor(self._conn.cursor())

    async def commit(self) -> None:
        self._conn.commit()

    async def rollback(self) -> None:
        self._conn.rollback()

    async def close(self) -> None:
        if self._connection is not None:
            self._connection = None
            self._conn.close()

    def stop(self) -> None:
        """Terminate: close at once (there is no thread to stop)."""
        if self._connection is not None:
            self._connection = None
            self._conn.close()

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._conn.create_function(*args, **kwargs)

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level

    @isolation_level.setter
    def isolation_level(self, value: str | None) -> None:
        self._conn.isolation_level = value


class AdaptedInlineConnection(AsyncAdapt_dbapi_connection):
    """SQLAlchemy's adapter, with the isolation level set directly (aiosqlite's needs its thread)."""

    __slots__ = ()

    _cursor_cls = AsyncAdapt_aiosqlite_cursor
    _ss_cursor_cls = AsyncAdapt_aiosqlite_ss_cursor

    @property
    def isolation_level(self) -> str | None:
        return self._connection.isolation_level

    @isolation_level.setter
    def isolation_level(self, value: str | None) -> None:
        self._connection.isolation_level = value

    def create_function(self, *args: Any, **kwargs: Any) -> None:
        await_(self._connection.create_function(*args, **kwargs))

    def rollback(self) -> None:
        if self._connection._connection:
            super().rollback()

    def commit(self) -> None:
        if self._connection._connection:
            super().commit()

    def terminate(self) -> None:
        self._connection.stop()


class InlineDBAPI(AsyncAdapt_aiosqlite_dbapi):
    """The DB-API module SQLAlchemy sees: sqlite3's errors and constants, inline connections."""

    def __init__(self) -> None:
        super().__init__(_SqliteAsAiosqlite, sqlite3)
        self.has_stop = True

    def connect(self, *args: Any, **kwargs: Any) -> AdaptedInlineConnection:  # type: ignore[override]
        kwargs.pop("async_creator_fn", None)
        # The connection is used from the event loop's thread only.
        kwargs["check_same_thread"] = False
        return AdaptedInlineConnection(self, InlineConnection(sqlite3.connect(*args, **kwargs)))


class _SqliteAsAiosqlite:
    """What the aiosqlite dbapi adapter reads from the aiosqlite module, taken from sqlite3."""

    DatabaseError = sqlite3.DatabaseError
    Error = sqlite3.Error
    IntegrityError = sqlite3.IntegrityError
    NotSupportedError = sqlite3.NotSupportedError
    OperationalError = sqlite3.OperationalError
    ProgrammingError = sqlite3.ProgrammingError
    sqlite_version = sqlite3.sqlite_version
    sqlite_version_info = sqlite3.sqlite_version_info
    __version__ = sqlite3.sqlite_version

    class Connection:
        stop = None


class HintedSQLiteCompiler(SQLiteCompiler):
    """SQLite's compiler, writing table hints: ``with_hint(table, "INDEXED BY ix", "sqlite")``.

    SQLite has no statistics unless it is asked to gather them, and for a
    query that both filters and orders it may prefer an index that gives the
    order over one that finds the few rows. ``INDEXED BY`` after the table's
    name says which; SQLAlchemy's SQLite compiler leaves table hints out.
    """

    def get_from_hint_text(self, table: Any, text: str | None) -> str | None:
        return text


class SQLiteDialect_inline(SQLiteDialect_aiosqlite):
    driver = "heraldinline"
    supports_statement_cache = True
    statement_compiler = HintedSQLiteCompiler

    @classmethod
    def import_dbapi(cls) -> InlineDBAPI:  # type: ignore[override]
        return InlineDBAPI()

    def get_driver_connection(self, connection: Any) -> Any:
        return connection._connection


registry.register("sqlite.heraldinline", "herald.kit.sqlite_inline", "SQLiteDialect_inline")
