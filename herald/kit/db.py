"""Database engines and the request session.

URLs are accepted in their plain form (``sqlite:///path``,
``postgresql://...``) and mapped to the async drivers. SQLite runs in WAL mode,
on the event loop's own thread (herald.kit.sqlite_inline), and every
transaction starts with ``BEGIN IMMEDIATE``: writers queue for the write lock
instead of failing when a read transaction tries to upgrade.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import orjson
from fastapi import Depends, Request
from sqlalchemy import ARRAY, Select, any_, bindparam, cast, event, func, select, true
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session, aliased
from sqlalchemy.util.concurrency import await_

import herald.kit.sqlite_inline  # noqa: F401  (registers the sqlite+heraldinline driver)
from herald.kit.files import create_private_file, make_private_dir

# SQLite calls run on the event loop's thread, so a wait for another process's
# write lock must not happen inside SQLite (it would hold the loop): its own
# busy wait is kept short, and BEGIN IMMEDIATE is retried with asyncio sleeps
# for up to SQLITE_LOCK_WAIT_SECONDS.
SQLITE_BUSY_TIMEOUT_MS = 5
SQLITE_LOCK_WAIT_SECONDS = 30.0
# Threads reading SQLite for the long reads (create_read_engine): the machine's cores are shared with the loop.
READ_POOL_SIZE = 2


def async_url(url: str) -> str:
    """Map a plain database URL to its async driver."""
    parsed = make_url(url)
    driver = parsed.drivername
    if driver in ("sqlite", "sqlite+pysqlite"):
        parsed = parsed.set(drivername="sqlite+heraldinline")
    elif driver in ("postgresql", "postgres", "postgresql+psycopg2", "postgresql+psycopg"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed.render_as_string(hide_password=False)


def sync_url(url: str) -> str:
    """The same database for synchronous tools (Alembic offline, CLI checks)."""
    parsed = make_url(async_url(url))
    if parsed.drivername in ("sqlite+heraldinline", "sqlite+aiosqlite"):
        parsed = parsed.set(drivername="sqlite")
    return parsed.render_as_string(hide_password=False)


def create_read_engine(url: str, *, pool_size: int = READ_POOL_SIZE) -> AsyncEngine | None:
    """On SQLite, connections of their own for reads that can take long; None elsewhere (and for a memory store).

    The store's one connection runs on the event loop's thread (herald.kit.sqlite_inline), and a request
    holds it until it ends: a read that scans thousands of rows held every other request, the health check
    and the in-process worker for as long. These connections run in threads of their own (aiosqlite), where
    SQLite leaves the GIL while it works, and read while the other one writes (WAL). They cannot write
    (``query_only``). On PostgreSQL the server does the work, and the pool has connections for many requests.
    """
    target = make_url(async_url(url))
    if not target.drivername.startswith("sqlite"):
        return None
    path = target.database
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    engine = create_async_engine(
        target.set(drivername="sqlite+aiosqlite"),
        pool_size=pool_size,
        max_overflow=0,
        json_serializer=dumps_json,
        json_deserializer=loads_json,
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # A wait here is in the connection's thread, not the event loop's.
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_LOCK_WAIT_SECONDS * 1000)}")
        cursor.execute("PRAGMA query_only=ON")
        cursor.close()

    return engine


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide when transactions begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # Once per process, at start: a long wait here is harmless.
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_LOCK_WAIT_SECONDS * 1000)}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        begin_immediate(connection)


def begin_immediate(connection: Any) -> None:
    """``BEGIN IMMEDIATE``, waiting for another process's write lock without holding the event loop.

    Runs inside SQLAlchemy's greenlet, where ``await_`` may sleep on the loop.
    """
    deadline = time.monotonic() + SQLITE_LOCK_WAIT_SECONDS
    pause = 0.002
    while True:
        try:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            return
        except OperationalError as exc:
            if "database is locked" not in str(exc) or time.monotonic() > deadline:
                raise
        await_(asyncio.sleep(pause))
        pause = min(pause * 2, 0.05)


# A run of 19 digits may be an integer past 64 bits, which orjson would read as a float.
_LONG_NUMBER = re.compile(r"\d{19,}")


def loads_json(value: str) -> Any:
    """JSON columns are read with orjson, except values holding numbers it would round (read with json)."""
    if _LONG_NUMBER.search(value):
        return json.loads(value)
    return orjson.loads(value)


def dumps_json(value: Any) -> str:
    """JSON columns are written with orjson; values it refuses (integers past 64 bits) with json."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def create_engine(url: str, *, pool_size: int = 10, index_reads: bool = False, **kwargs: Any) -> AsyncEngine:
    """The async engine for ``url`` (``sqlite:///...`` or ``postgresql://...``).

    ``index_reads``: on PostgreSQL, the connections never choose a sequential
    scan where an index applies (``enable_seqscan = off``, set when they
    connect). For the job workers' engines, whose reads are all by key: the
    head of the job queue, events, jobs and subscribers by id. With
    statistics older than a table's growth (a new database, a burst after a
    quiet time: autovacuum analyzes once a minute at best), PostgreSQL
    believed the tables nearly empty and scanned them whole, comparing every
    row with every id: 50 ms and more per claim or lookup of 100 rows, where
    the index takes a millisecond. A query with no index to use still runs.
    """
    target = async_url(url)
    kwargs.setdefault("json_serializer", dumps_json)
    kwargs.setdefault("json_deserializer", loads_json)
    if target.startswith("sqlite"):
        path = make_url(target).database
        if path and path != ":memory:" and not path.startswith("file:"):
            # Created here, readable by its owner only, before SQLite opens it
            # (its -wal and -shm files take the database file's mode).
            make_private_dir(Path(path).parent)
            create_private_file(Path(path))
        # One connection: SQLite has one writer at a time anyway, and waiting
        # for the pool is an asyncio wait, where waiting on SQLite's lock would
        # be a busy handler sleeping (in steps of milliseconds).
        kwargs.setdefault("pool_size", 1)
        kwargs.setdefault("max_overflow", 0)
        engine = create_async_engine(target, **kwargs)
        _configure_sqlite(engine)
        return engine
    if index_reads:
        kwargs.setdefault("connect_args", {}).setdefault("server_settings", {})["enable_seqscan"] = "off"
    # No pre-ping: it cost a round trip on every checkout, i.e. per transaction.
    # A connection a database restart cut fails its first statement instead;
    # that request answers 503 (Retry-After) and SQLAlchemy drops every pooled
    # connection made before the failure, so one failure, not one per connection.
    return create_async_engine(
        target,
        pool_size=pool_size,
        max_overflow=pool_size,
        **kwargs,
    )


def any_of(session: AsyncSession, column: Any, values: Iterable[Any]) -> Any:
    """``column IN values`` for lists of ids, built so a growing table cannot make it slow.

    On PostgreSQL the list is one array parameter (``= ANY($1)``): one
    statement whatever the count, looked up through the index even when the
    table's statistics are stale. (With ``IN ($1, ..., $100)`` on a table that
    grew since its last ANALYZE, PostgreSQL chose a sequential scan that
    compared every row with every value: 50 to 100 ms where 0.6 ms do.)
    """
    dialect = dialect_of(session)
    return _any_of(dialect, column, _values_parameter(dialect, None, column, list(dict.fromkeys(values))))


def any_of_parameter(dialect: str, column: Any, name: str) -> Any:
    """:func:`any_of` with the values left to the execution, as the parameter ``name``.

    For a statement built once per dialect and run often. Built per call, a
    look-up by a few ids spent more CPU building its statement and the
    statement's cache key than sending it: with the expansion's three
    look-ups built once, a trigger delivered alone (``bench.trickle``,
    PostgreSQL) cost 4.5 to 4.7 ms of CPU where it had cost 5.8 to 6.2.
    """
    return _any_of(dialect, column, _values_parameter(dialect, name, column))


def each_of(session: AsyncSession, query: Select[Any], key: Any, values: Iterable[Any]) -> Select[Any]:
    """``query`` for the rows whose ``key`` is one of ``values``: one index probe per value on PostgreSQL.

    For look-ups by the second column of a composite index, such as
    subscribers by (environment_id, subscriber_id): :func:`any_of` there
    leaves it to the planner whether the array is part of the index scan, and
    with statistics older than the table's growth (the environment believed
    to hold a row or two) it scanned every row of the environment and compared
    each with every value: 36 ms for 100 subscriberIds among 20,000, and
    growing with the environment. Here the values are unnested and each is
    looked up on its own (a LATERAL subquery with LIMIT 1, which the planner
    cannot turn into a join in another order), so the cost is the number of
    values whatever the statistics say. ``query`` selects one entity or
    columns, with the conditions that scope it (the environment); a key
    matches at most one row. SQLite takes ``key IN values``.
    """
    dialect = dialect_of(session)
    return _each_of(dialect, query, key, _values_parameter(dialect, None, key, list(dict.fromkeys(values))))


def each_of_parameter(dialect: str, query: Select[Any], key: Any, name: str) -> Select[Any]:
    """:func:`each_of` with the values left to the execution, as the parameter ``name`` (see any_of_parameter).

    The values given must be unique: a value named twice would find its row twice.
    """
    return _each_of(dialect, query, key, _values_parameter(dialect, name, key))


def dialect_of(session: AsyncSession) -> str:
    """The name of the dialect the session's statements are for ("postgresql", "sqlite")."""
    return str(session.get_bind().dialect.name)


_NO_VALUE: Any = object()


def _values_parameter(dialect: str, name: str | None, column: Any, values: Any = _NO_VALUE) -> Any:
    """A parameter holding a list of the column's values: an array on PostgreSQL, an expanding IN list elsewhere."""
    given = () if values is _NO_VALUE else (values,)
    if dialect == "postgresql":
        return cast(bindparam(name, *given, type_=ARRAY(column.type)), ARRAY(column.type))
    return bindparam(name, *given, expanding=True)


def _any_of(dialect: str, column: Any, values: Any) -> Any:
    return column == any_(values) if dialect == "postgresql" else column.in_(values)


def _each_of(dialect: str, query: Select[Any], key: Any, values: Any) -> Select[Any]:
    if dialect != "postgresql":
        return query.where(key.in_(values))
    wanted = func.unnest(values).table_valued("value").render_derived(name="wanted")
    match = query.where(key == wanted.c.value).limit(1).lateral("match")
    [first] = query.column_descriptions[:1]
    entity = first["entity"]
    if len(query.column_descriptions) == 1 and first["expr"] is entity:
        selected: list[Any] = [aliased(entity, match)]
    else:
        selected = list(match.c)
    return select(*selected).select_from(wanted).join(match, true())


async def without_transaction(session: AsyncSession) -> None:
    """Run the session's statements outside a transaction (PostgreSQL; SQLite is left as it is).

    For a session that makes one write, or only reads: each statement commits
    or reads on its own, and the BEGIN and the COMMIT or ROLLBACK around them,
    two round trips, are not sent. Call it before the session's first
    statement. Reads see each statement's own snapshot, not one for all.
    """
    if session.get_bind().dialect.name == "postgresql":
        await session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})


async def lock_for_transaction(session: AsyncSession, name: str) -> None:
    """Hold the lock ``name`` until the session's transaction ends; others wait for it.

    On PostgreSQL a transaction-level advisory lock. SQLite needs none: every
    transaction begins with ``BEGIN IMMEDIATE``, so writers already run one
    at a time.
    """
    if session.get_bind().dialect.name != "postgresql":
        return
    lock_id = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
    await session.execute(select(func.pg_advisory_xact_lock(lock_id)))


def create_sessionmaker(
    engine: AsyncEngine,
    *,
    after_commit: Callable[[Session], None] | None = None,
    after_rollback: Callable[[Session], None] | None = None,
) -> async_sessionmaker[AsyncSession]:
    """Sessions on ``engine``; ``after_commit`` is called with each session whose transaction committed.

    The hooks belong to this sessionmaker's sessions only (a Session class of
    their own carries them), so every commit of the process's API, group commit
    and worker passes through one place, whoever opened the session.
    ``after_rollback`` is called with each session whose transaction rolled back.
    """
    session_class: type[Session] = Session
    if after_commit is not None or after_rollback is not None:
        session_class = type("HookedSession", (Session,), {})
    if after_commit is not None:
        event.listen(session_class, "after_commit", after_commit)
    if after_rollback is not None:
        event.listen(session_class, "after_rollback", after_rollback)
    # Objects stay readable after commit: responses are shaped from them.
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False, sync_session_class=session_class)


async def session_scope(maker: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """One transaction: committed when the block ends cleanly, rolled back otherwise."""
    async with maker() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


async def get_db_session(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's session: one transaction, committed when the handler returns.

    Services never commit; a handler that raises rolls everything back, so a
    request's writes land together or not at all.
    """
    maker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    async for session in session_scope(maker):
        yield session


# ``scope="function"`` runs the commit as soon as the handler returns, before
# the response is sent: a client that sees 201 can rely on the write.
SessionDep = Annotated[AsyncSession, Depends(get_db_session, scope="function")]


async def get_read_session(request: Request) -> AsyncIterator[AsyncSession]:
    """A session for a request that only reads, and may read long (the Inbox's filtered lists and counts).

    On SQLite its statements run on connections of their own (create_read_engine), not on the one the
    other requests, the health check and the in-process worker wait for, and cannot write; on PostgreSQL
    it is a session like the others. It is never committed.
    """
    maker: async_sessionmaker[AsyncSession] = request.app.state.read_sessionmaker
    async with maker() as session:
        yield session


ReadSessionDep = Annotated[AsyncSession, Depends(get_read_session, scope="function")]


async def fetch_outside_transaction(session: AsyncSession, statement: str, parameters: Sequence[Any]) -> list[Sequence[Any]]:
    """Run ``statement`` (numbered ``$n`` parameters) and return its rows, on asyncpg's own connection when it can.

    For the trigger batch's write, the hottest statement: SQLAlchemy's
    execution layer (its cursor, its result, its event hooks) cost the API
    about 9 µs a trigger in batches of 30. That way is taken only outside a
    transaction (:func:`without_transaction`), where a failed statement leaves
    nothing behind: a failure is then run again through SQLAlchemy, which
    translates it and, when the connection was lost, invalidates it for the
    pool, so the caller sees what any statement's failure shows (a lost store
    answers 503, kit.errors.is_store_unavailable). Inside a transaction the
    statement goes through SQLAlchemy.
    """
    connection = await session.connection()
    if connection.sync_connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        raw = await connection.get_raw_connection()
        try:
            return list(await raw.driver_connection.fetch(statement, *parameters))
        except Exception:  # noqa: BLE001 - run again below, where it is raised as SQLAlchemy raises it
            pass
    result = await connection.exec_driver_sql(statement, tuple(parameters))
    return list(result.all())


async def listen_until(
    database_url: str,
    channel: str,
    on_payload: Callable[[str], None],
    stop: asyncio.Event,
    *,
    what: str,
    check_seconds: float = 1.0,
    retry_seconds: float = 2.0,
) -> None:
    """LISTEN on ``channel`` (PostgreSQL) on a connection of its own until ``stop``; reconnect when it drops.

    The pool's connections cannot LISTEN: a notification is delivered to the
    one connection that asked, for as long as it lives. ``what`` names the
    listener in the warning logged when the connection fails.
    """
    import logging
    from contextlib import suppress

    import asyncpg

    dsn = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    while not stop.is_set():
        try:
            connection = await asyncpg.connect(dsn)
            try:
                await connection.add_listener(channel, lambda _c, _p, _ch, payload: on_payload(payload))
                while not stop.is_set() and not connection.is_closed():
                    with suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), check_seconds)
            finally:
                with suppress(Exception):
                    await connection.close()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logging.getLogger("herald.db").warning("%s: LISTEN connection failed (%s); retrying", what, exc)
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), retry_seconds)

