"""kit.db: look-ups by a list of keys (the rows they find, and on PostgreSQL the plan they get), and statements on the driver."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import bindparam, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection

from herald.kit.db import (
    any_of,
    any_of_parameter,
    create_engine,
    create_read_engine,
    create_sessionmaker,
    dialect_of,
    each_of,
    each_of_parameter,
    fetch_outside_transaction,
    without_transaction,
)
from herald.kit.errors import is_store_unavailable
from herald.migrations import upgrade_async
from herald.models import Subscriber

INSERT_SUBSCRIBERS = (
    "INSERT INTO subscribers (id, environment_id, organization_id, subscriber_id, channels, deleted, version,"
    " created_at, updated_at) VALUES {rows}"
)


def _rows(prefix: str, count: int, environment: str = "env-a") -> str:
    return ", ".join(
        f"('{prefix}-id-{n}', '{environment}', 'org', '{prefix}-{n}', '[]', false, 0, '2026-01-01', '2026-01-01')"
        for n in range(count)
    )


async def _two_environments(url: str):  # type: ignore[no-untyped-def]
    """An engine on a migrated store whose env-a holds user-0..4 (user-id-N) and env-b user-0..1 (user-other-N)."""
    await upgrade_async(url)
    engine = create_engine(url)
    async with engine.begin() as connection:
        await connection.exec_driver_sql(INSERT_SUBSCRIBERS.format(rows=_rows("user", 5)))
        await connection.exec_driver_sql(INSERT_SUBSCRIBERS.format(rows=_rows("user", 2, "env-b").replace("-id-", "-other-")))
    return engine


async def test_each_of_finds_each_key_once_within_the_scope(empty_database) -> None:
    engine = await _two_environments(empty_database.url)
    try:
        async with create_sessionmaker(engine)() as session:
            scoped = select(Subscriber.subscriber_id, Subscriber.id).where(Subscriber.environment_id == "env-a")
            found = (await session.execute(each_of(session, scoped, Subscriber.subscriber_id, ["user-1", "user-3", "user-1", "nobody"]))).all()
            assert sorted(tuple(row) for row in found) == [("user-1", "user-id-1"), ("user-3", "user-id-3")]

            whole = select(Subscriber).where(Subscriber.environment_id == "env-b")
            rows = list((await session.execute(each_of(session, whole, Subscriber.subscriber_id, ["user-0", "user-4"]))).scalars())
            assert [(type(row), row.id, row.environment_id) for row in rows] == [(Subscriber, "user-other-0", "env-b")]

            assert (await session.execute(each_of(session, scoped, Subscriber.subscriber_id, []))).all() == []
    finally:
        await engine.dispose()


async def test_look_ups_built_once_take_their_values_at_each_execution(empty_database) -> None:
    """any_of_parameter and each_of_parameter: one statement, run with other values (and scopes), finds what each_of finds."""
    engine = await _two_environments(empty_database.url)
    try:
        async with create_sessionmaker(engine)() as session:
            dialect = dialect_of(session)
            scoped = select(Subscriber.subscriber_id, Subscriber.id).where(Subscriber.environment_id == bindparam("environment"))
            by_key = each_of_parameter(dialect, scoped, Subscriber.subscriber_id, "keys")

            async def keyed(environment: str, keys: list[str]) -> list[tuple[str, str]]:
                found = await session.execute(by_key, {"environment": environment, "keys": keys})
                return sorted(tuple(row) for row in found)  # type: ignore[misc]

            assert await keyed("env-a", ["user-1", "user-3", "nobody"]) == [("user-1", "user-id-1"), ("user-3", "user-id-3")]
            assert await keyed("env-b", ["user-1", "user-3"]) == [("user-1", "user-other-1")]
            assert await keyed("env-a", []) == []
            literal = select(Subscriber.subscriber_id, Subscriber.id).where(Subscriber.environment_id == "env-a")
            expected = sorted(tuple(row) for row in await session.execute(each_of(session, literal, Subscriber.subscriber_id, ["user-0", "user-4"])))
            assert await keyed("env-a", ["user-0", "user-4"]) == expected == [("user-0", "user-id-0"), ("user-4", "user-id-4")]

            whole = select(Subscriber).where(Subscriber.environment_id == bindparam("environment"))
            entities = each_of_parameter(dialect, whole, Subscriber.subscriber_id, "keys")
            rows = list((await session.execute(entities, {"environment": "env-b", "keys": ["user-0", "user-4"]})).scalars())
            assert [(type(row), row.id) for row in rows] == [(Subscriber, "user-other-0")]

            by_id = select(Subscriber.id).where(any_of_parameter(dialect, Subscriber.id, "ids")).order_by(Subscriber.id)
            assert list((await session.execute(by_id, {"ids": ["user-id-2", "user-other-1", "none"]})).scalars()) == ["user-id-2", "user-other-1"]
            assert list((await session.execute(by_id, {"ids": ["user-id-0"]})).scalars()) == ["user-id-0"]
            assert list((await session.execute(by_id, {"ids": []})).scalars()) == []
    finally:
        await engine.dispose()


async def test_each_of_probes_the_index_per_key_when_the_statistics_are_stale(empty_database) -> None:
    """Statistics taken when the environment held three subscribers, then 20,000 more: each key is still one probe.

    The same look-up written with any_of is planned as a scan of the whole
    environment that compares every subscriber with every key (the test
    checks that first, so it shows the situation is the one that matters).
    """
    if empty_database.kind != "postgres":
        pytest.skip("PostgreSQL's planner and its statistics")
    await upgrade_async(empty_database.url)
    engine = create_engine(empty_database.url, index_reads=True)  # as the workers' engines
    try:
        await grow_after_statistics(engine)
        keys = [f"late-{n}" for n in range(1, 101)]
        async with create_sessionmaker(engine)() as session:
            scoped = select(Subscriber.subscriber_id, Subscriber.id).where(Subscriber.environment_id == "env-a")
            before = await _analyzed_plan(session, scoped.where(any_of(session, Subscriber.subscriber_id, keys)))
            # The environment read whole and compared with every key.
            assert sum(node.get("Rows Removed by Filter", 0) for node in before) >= 19_900, before
            plan = await _analyzed_plan(session, each_of(session, scoped, Subscriber.subscriber_id, keys))
            assert sum(node.get("Rows Removed by Filter", 0) for node in plan) == 0, plan
            probes = [node for node in plan if node.get("Relation Name") == "subscribers" or "Index Name" in node]
            assert probes and all(node["Actual Loops"] == 100 for node in probes), plan
            assert all("wanted.value" in node.get("Index Cond", node.get("Recheck Cond", "")) for node in probes), plan
            assert len((await session.execute(each_of(session, scoped, Subscriber.subscriber_id, keys))).all()) == 100
            # Built once with its values left to the execution, the look-up is planned the same way.
            once = select(Subscriber.subscriber_id, Subscriber.id).where(Subscriber.environment_id == bindparam("environment"))
            statement = each_of_parameter("postgresql", once, Subscriber.subscriber_id, "keys")
            plan = await _analyzed_plan(session, statement.params(environment="env-a", keys=keys))
            assert sum(node.get("Rows Removed by Filter", 0) for node in plan) == 0, plan
            assert all(node["Actual Loops"] == 100 for node in plan if node.get("Relation Name") == "subscribers"), plan
    finally:
        await engine.dispose()


async def grow_after_statistics(engine) -> None:  # type: ignore[no-untyped-def]
    """Statistics taken when env-a held three subscribers, then 20,000 more (late-1 ... late-20000) and no autovacuum."""
    async with engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.exec_driver_sql("ALTER TABLE subscribers SET (autovacuum_enabled = false)")
        await connection.exec_driver_sql(INSERT_SUBSCRIBERS.format(rows=_rows("early", 3)))
        await connection.exec_driver_sql("VACUUM ANALYZE subscribers")
        await connection.exec_driver_sql(
            "INSERT INTO subscribers (id, environment_id, organization_id, subscriber_id, channels, deleted, version,"
            " created_at, updated_at) SELECT 'late-id-' || n, 'env-a', 'org', 'late-' || n, '[]', false, 0, now(), now()"
            " FROM generate_series(1, 20000) AS n"
        )


def plan_nodes(explained: object) -> list[dict]:
    """Every node of an ``EXPLAIN (FORMAT JSON)`` answer."""
    [explained] = json.loads(explained) if isinstance(explained, str) else explained  # type: ignore[misc]
    nodes, pending = [], [explained["Plan"]]
    while pending:
        node = pending.pop()
        nodes.append(node)
        pending.extend(node.get("Plans", []))
    return nodes


async def _analyzed_plan(session, query) -> list[dict]:  # type: ignore[no-untyped-def]
    """The nodes of the query's plan as run, planned as a statement the driver has prepared and run before.

    asyncpg prepares every statement, and after a few runs PostgreSQL keeps a
    generic plan for it, made without the parameters' values: the plan the
    workers' look-ups get. ``force_generic_plan`` asks for that one at once.
    """
    compiled = query.compile(dialect=session.get_bind().dialect)
    arguments = ", ".join(_literal(compiled.params[name]) for name in compiled.positiontup)
    connection = await session.connection()
    await connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
    await connection.exec_driver_sql(f"PREPARE lookup AS {compiled}")
    explained = (await connection.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE lookup({arguments})")).scalar_one()
    await connection.exec_driver_sql("DEALLOCATE lookup")
    return plan_nodes(explained)


def _literal(value: object) -> str:
    if isinstance(value, list):
        return "ARRAY[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


async def _driver_fetches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the statements fetch_outside_transaction runs through SQLAlchemy."""
    through_sqlalchemy: list[str] = []
    exec_driver_sql = AsyncConnection.exec_driver_sql

    async def counted(self: AsyncConnection, statement: str, *args: Any, **kwargs: Any) -> Any:
        through_sqlalchemy.append(statement)
        return await exec_driver_sql(self, statement, *args, **kwargs)

    monkeypatch.setattr(AsyncConnection, "exec_driver_sql", counted)
    return through_sqlalchemy


async def test_a_statement_outside_a_transaction_runs_on_the_driver_and_inside_one_through_sqlalchemy(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    if app.state.settings.is_sqlite:
        pytest.skip("asyncpg's connection is PostgreSQL's")
    through_sqlalchemy = await _driver_fetches(monkeypatch)
    async with app.state.sessionmaker() as session:
        await without_transaction(session)
        assert await fetch_outside_transaction(session, "SELECT $1::int + 1", (41,)) == [(42,)]
    assert through_sqlalchemy == []
    async with app.state.sessionmaker() as session:
        assert await fetch_outside_transaction(session, "SELECT $1::int + 1", (1,)) == [(2,)]
    assert through_sqlalchemy == ["SELECT $1::int + 1"]


async def test_a_failure_on_the_driver_is_raised_as_sqlalchemy_raises_it(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    if app.state.settings.is_sqlite:
        pytest.skip("asyncpg's connection is PostgreSQL's")
    through_sqlalchemy = await _driver_fetches(monkeypatch)
    async with app.state.sessionmaker() as session:
        await without_transaction(session)
        with pytest.raises(sa_exc.ProgrammingError, match="no_such_column"):
            await fetch_outside_transaction(session, "SELECT no_such_column", ())
    assert through_sqlalchemy == ["SELECT no_such_column"]


async def test_a_connection_lost_under_the_driver_is_invalidated_and_reads_as_the_store_unavailable(app: FastAPI) -> None:
    if app.state.settings.is_sqlite:
        pytest.skip("asyncpg's connection is PostgreSQL's")
    async with app.state.sessionmaker() as session:
        await without_transaction(session)
        [(pid,)] = await fetch_outside_transaction(session, "SELECT pg_backend_pid()", ())
        async with app.state.sessionmaker() as other:
            await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            await other.commit()
        with pytest.raises(sa_exc.DBAPIError) as raised:
            await fetch_outside_transaction(session, "SELECT 1", ())
    assert raised.value.connection_invalidated
    assert is_store_unavailable(raised.value)
    # The pool gives a live connection next.
    async with app.state.sessionmaker() as session:
        await without_transaction(session)
        assert await fetch_outside_transaction(session, "SELECT 1", ()) == [(1,)]


async def test_sqlite_reads_on_connections_of_their_own_while_the_store_connection_is_held(empty_database) -> None:
    """SQLite's one connection runs on the event loop, held by a request until it ends: a long read held every
    other request with it. The read engine reads what is committed while a writer holds that connection, in
    threads, and cannot write. PostgreSQL has none (its pool has connections for many requests)."""
    engine = await _two_environments(empty_database.url)
    reader = create_read_engine(empty_database.url)
    try:
        if engine.dialect.name != "sqlite":
            assert reader is None
            return
        assert reader is not None
        async with create_sessionmaker(engine)() as writer:
            # The one connection, in a write transaction (BEGIN IMMEDIATE) that has not committed.
            await writer.execute(text(INSERT_SUBSCRIBERS.format(rows=_rows("late", 1))))
            async with create_sessionmaker(reader)() as session:
                found = (await session.execute(select(Subscriber.subscriber_id))).scalars()
                assert sorted(found) == sorted([*(f"user-{n}" for n in range(5)), "user-0", "user-1"])  # not late-0
                with pytest.raises(sa_exc.OperationalError, match="readonly"):
                    await session.execute(text("DELETE FROM subscribers"))
            await writer.rollback()
    finally:
        if reader is not None:
            await reader.dispose()
        await engine.dispose()
