"""Multi-row inserts handed to the driver as it takes them, for the hot write paths.

A Core ``insert(table)`` with a list of rows binds every value of every row
through its column type (JSON serialized, datetimes normalized and formatted)
inside SQLAlchemy's execution machinery, and on the trigger path that cost
more than the trigger's own checks: about 4 ms of CPU for a batch of 32
events and their jobs on SQLite. Here the values are converted the way the
column types convert them (``tests/kit/test_bulk.py`` compares rows stored
both ways, byte for byte on SQLite) and the statement is built once per
table and shape:

- SQLite: one ``INSERT ... VALUES (...), (...)`` per chunk of rows;
- PostgreSQL: ``INSERT ... SELECT FROM json_to_recordset($1)``, every row in
  one JSON document (serialized by orjson in one call), so the statement is
  the same for any number of rows (asyncpg prepares it once per connection)
  and has one parameter whatever the count. (One typed array per column, with
  ``unnest``, cost more: asyncpg checks every element of every array as it
  encodes it, an eighth of a busy worker's time.)

Columns a row leaves out get the column's Python-side default, as a flush
or a Core insert would give them. On PostgreSQL a statement can also give
columns itself (``given``) and make rows of one table out of the rows of
another (``postgres_insert_select``), so what it can work out is not sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import JSON, Table
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.db import dumps_json
from herald.models.base import UTCDateTime

# SQLite takes at most 32,766 parameters per statement; chunks stay well below.
SQLITE_MAX_PARAMETERS = 30_000
_PG_DIALECT = postgresql.dialect()


def _sqlite_datetime(value: datetime | None) -> str | None:
    """As UTCDateTime and SQLite's DATETIME store it: naive UTC, ``YYYY-MM-DD HH:MM:SS.ffffff``."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"
    )


def _postgres_datetime(value: Any) -> str:
    """ISO 8601 with the offset (UTC when the value has none), read back exactly by ``timestamptz``."""
    if not isinstance(value, datetime):
        raise TypeError(f"{type(value).__name__} is not JSON serializable")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()


def _in_array(value: Any) -> list[Any]:
    return [value]


def _postgres_json(rows: list[dict[str, Any]]) -> str:
    """The document, by orjson; by json for what orjson refuses (integers past 64 bits), as dumps_json does."""
    try:
        return orjson.dumps(rows, option=orjson.OPT_NAIVE_UTC).decode()
    except TypeError:
        return json.dumps(rows, default=_postgres_datetime)


@dataclass(frozen=True)
class _Column:
    name: str
    # The column's default for rows that leave it out: a value, or a callable made to take no argument.
    default: Callable[[], Any] | None
    # How a value is converted for each store (None: as it is).
    sqlite: Callable[[Any], Any] | None
    postgres: Callable[[Any], Any] | None
    # How PostgreSQL reads the column out of the JSON document: its type there, and
    # the expression that makes the column's value of it (``{}``: the record's field).
    record_type: str
    read: str = "{}"


def _only_server_default(column: Any) -> ValueError:
    # Every column is named in the statement, so the server's default would never apply.
    return ValueError(f"{column.table.name}.{column.name} has only a server default: give it in every row")


def _default_of(column: Any) -> Callable[[], Any] | None:
    default = column.default
    if default is None:
        if column.server_default is not None:
            def refuse() -> Any:
                raise _only_server_default(column)

            return refuse
        return None
    if default.is_callable:
        return lambda: default.arg(None)
    value = default.arg
    return lambda: value


def _plan_column(column: Any) -> _Column:
    column_type = column.type
    if isinstance(column_type, JSON):
        # A None given is JSON null (as SQLAlchemy's JSON type stores it), and only
        # a column left out is SQL NULL. SQLite takes the serialized text. In
        # PostgreSQL's document the value sits inside a one-element array, read
        # back with ``->0``: JSON null stays JSON null there, where a bare null
        # would read as SQL NULL. (Serializing each value to a string of its own
        # and casting it cost a second encoding of every payload, escapes and all.)
        return _Column(column.name, _default_of(column), dumps_json, _in_array, "json", "({}->0)::jsonb")
    if isinstance(column_type, UTCDateTime):
        # PostgreSQL's document carries datetimes as orjson writes them (RFC 3339, naive as UTC).
        return _Column(column.name, _default_of(column), _sqlite_datetime, None, "timestamptz")
    compiled = column_type.compile(dialect=_PG_DIALECT)
    return _Column(column.name, _default_of(column), None, None, compiled)


@dataclass(frozen=True)
class _TablePlan:
    table: Table
    name: str
    columns: tuple[_Column, ...]
    # (name, default, conversion) per column, in order, for each store: what a row's values go through.
    sqlite: tuple[tuple[str, Callable[[], Any] | None, Callable[[Any], Any] | None], ...]
    postgres: tuple[tuple[str, Callable[[], Any] | None, Callable[[Any], Any] | None], ...]

    @classmethod
    def of(cls, table: Table) -> _TablePlan:
        columns = tuple(_plan_column(column) for column in table.columns)
        return cls(
            table,
            table.name,
            columns,
            tuple((column.name, column.default, column.sqlite) for column in columns),
            tuple((column.name, column.default, column.postgres) for column in columns),
        )


_plans: dict[str, _TablePlan] = {}
_statements: dict[tuple[Any, ...], str] = {}


def _plan(table: Table) -> _TablePlan:
    plan = _plans.get(table.name)
    if plan is None:
        plan = _plans[table.name] = _TablePlan.of(table)
    return plan


def _quoted(names: Sequence[str]) -> str:
    # Always quoted: some column names are keywords (notifications."to").
    return ", ".join(f'"{name}"' for name in names)


def _tail(conflict: Sequence[str] | None, returning: Sequence[str], updates: tuple[tuple[str, str], ...] = ()) -> str:
    sql = ""
    if conflict is not None:
        target = f" ({_quoted(conflict)})" if conflict else ""
        action = "DO UPDATE SET " + ", ".join(f'"{name}" = {expression}' for name, expression in updates) if updates else "DO NOTHING"
        sql += f" ON CONFLICT{target} {action}"
    if returning:
        sql += f" RETURNING {_quoted(returning)}"
    return sql


def _sqlite_statement(
    plan: _TablePlan, rows: int, conflict: Sequence[str] | None, returning: Sequence[str], updates: tuple[tuple[str, str], ...] = ()
) -> str:
    key = ("sqlite", plan.name, rows, tuple(conflict) if conflict is not None else None, tuple(returning), updates)
    sql = _statements.get(key)
    if sql is None:
        names = _quoted([column.name for column in plan.columns])
        group = "(" + ", ".join("?" for _ in plan.columns) + ")"
        sql = f"INSERT INTO {plan.name} ({names}) VALUES " + ", ".join(group for _ in range(rows))
        sql = _statements[key] = sql + _tail(conflict, returning, updates)
    return sql


def postgres_recordset(
    table: Table, parameter: int, names: Collection[str] | None = None, extra: Mapping[str, str] | None = None
) -> str:
    """``json_to_recordset($parameter::json) AS r(...)``: the records of a :func:`postgres_document`, as ``r``.

    ``names``: the table's columns the records hold (default: all); ``extra``:
    more fields, by name and type (a document's ``extra``).
    """
    plan = _plan(table)
    fields = [f'"{column.name}" {column.record_type}' for column in plan.columns if names is None or column.name in names]
    fields += [f'"{name}" {record_type}' for name, record_type in (extra or {}).items()]
    return f"json_to_recordset(${parameter}::json) AS r({', '.join(fields)})"


def postgres_insert(
    table: Table,
    *,
    parameter: int = 1,
    skip_conflicts_on: Sequence[str] | None = None,
    returning: Sequence[str] = (),
    where: str = "",
    given: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
    joins: str = "",
) -> str:
    """``INSERT INTO table ... SELECT FROM json_to_recordset($parameter)``: the rows of a :func:`postgres_document`.

    ``where`` filters the rows read (they are ``r``), for statements that
    combine several inserts (``WITH written AS (...) INSERT ...``). ``given``:
    columns whose values are SQL expressions, over ``r`` and the tables of
    ``joins``, instead of the document's (which leaves them out); ``extra``:
    fields of the records that are not columns (the document's ``extra``), by
    name and type, for those expressions.
    """
    plan = _plan(table)
    given = given or {}
    names = _quoted([column.name for column in plan.columns])
    selected = ", ".join(
        given[column.name] if column.name in given else column.read.format(f'r."{column.name}"') for column in plan.columns
    )
    read = {column.name for column in plan.columns} - set(given)
    sql = f"INSERT INTO {plan.name} ({names}) SELECT {selected} FROM {postgres_recordset(table, parameter, read, extra)}{joins}"
    if where:
        sql += f" WHERE {where}"
    return sql + _tail(skip_conflicts_on, returning)


def postgres_insert_select(table: Table, values: Mapping[str, str], source: str, *, returning: Sequence[str] = ()) -> str:
    """``INSERT INTO table SELECT ... FROM source``: rows made by the statement out of other rows, not sent.

    ``values`` gives columns' SQL expressions over ``source``. A column left
    out gets its default as a flush would give it: a constant (or an empty
    JSON object or array) written as a literal, or NULL. A column whose
    default is made for each row (an id, a time) must be in ``values``.
    """
    plan = _plan(table)
    selected = ", ".join(values[column.name] if column.name in values else _default_literal(column) for column in table.columns)
    names = _quoted([column.name for column in plan.columns])
    return f"INSERT INTO {plan.name} ({names}) SELECT {selected} FROM {source}" + _tail(None, returning)


def _default_literal(column: Any) -> str:
    """A column's default as an SQL literal, for :func:`postgres_insert_select`."""
    default = column.default
    if default is None:
        if column.server_default is not None:
            raise _only_server_default(column)
        return "NULL"
    value = default.arg(None) if default.is_callable else default.arg
    made_per_row = default.is_callable and not (isinstance(column.type, JSON) and value in ({}, []))
    if made_per_row:
        raise ValueError(f"{column.table.name}.{column.name}'s default is made for each row: give it")
    if isinstance(column.type, JSON):
        return "'" + orjson.dumps(value).decode().replace("'", "''") + "'::jsonb"
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise ValueError(f"{column.table.name}.{column.name}: no literal for a default of type {type(value).__name__}")


def postgres_document(
    table: Table, rows: Sequence[dict[str, Any]], *, leave_out: Collection[str] = (), extra: Sequence[str] = ()
) -> str:
    """``rows`` as the JSON document a :func:`postgres_insert` statement reads.

    ``leave_out``: columns the statement gives itself (its ``given``);
    ``extra``: fields of each row that are not columns, copied as they are.
    """
    plan = _plan(table)
    steps = plan.postgres if not leave_out else tuple(step for step in plan.postgres if step[0] not in leave_out)
    names = [step[0] for step in steps]
    documents = []
    for row in rows:
        document = dict(zip(names, _values(steps, row), strict=True))
        document.update((name, row[name]) for name in extra)
        documents.append(document)
    return _postgres_json(documents)


def _postgres_statement(
    plan: _TablePlan, conflict: Sequence[str] | None, returning: Sequence[str], updates: tuple[tuple[str, str], ...] = ()
) -> str:
    key = ("postgresql", plan.name, tuple(conflict) if conflict is not None else None, tuple(returning), updates)
    sql = _statements.get(key)
    if sql is None:
        sql = postgres_insert(plan.table, skip_conflicts_on=conflict if not updates else None, returning=returning)
        if updates:
            # postgres_insert's own tail is RETURNING only here: the ON CONFLICT clause goes before it.
            head, _, _ = sql.partition(" RETURNING ")
            sql = head + _tail(conflict, returning, updates)
        _statements[key] = sql
    return sql


def _values(
    steps: tuple[tuple[str, Callable[[], Any] | None, Callable[[Any], Any] | None], ...], row: dict[str, Any]
) -> list[Any]:
    values = []
    last: datetime | None = None
    last_converted: Any = None
    for name, default, convert in steps:
        if name in row:
            value = row[name]
        else:
            value = default() if default is not None else None
            if value is None:
                # Left out with nothing to default to: SQL NULL, also for JSON
                # (where a None given in the row is JSON null, as SQLAlchemy has it).
                values.append(None)
                continue
        if convert is not None:
            # A row's timestamps are usually one value (created, updated, due): converted once.
            if value is last and value is not None:
                value = last_converted
            else:
                converted = convert(value)
                if isinstance(value, datetime):
                    last, last_converted = value, converted
                value = converted
        values.append(value)
    return values


async def insert_rows(
    session: AsyncSession,
    table: Table,
    rows: Sequence[dict[str, Any]],
    *,
    skip_conflicts_on: Sequence[str] | None = None,
    returning: Sequence[str] = (),
    update_on_conflict: Mapping[str, str] | None = None,
) -> list[tuple[Any, ...]]:
    """Insert ``rows`` (dicts by column name) into ``table`` in the session's transaction.

    ``skip_conflicts_on``: the columns of a unique index whose duplicates are
    skipped (``ON CONFLICT (...) DO NOTHING``; ``()`` for any conflict).
    ``update_on_conflict``: instead of skipping, update them (``DO UPDATE
    SET column = expression``, expressions over ``excluded`` and the table);
    no two rows may then name the same key.
    ``returning``: columns returned for each row written, in no particular
    order. Returns those rows (an empty list without ``returning``).
    """
    if not rows:
        return []
    plan = _plan(table)
    updates = tuple((update_on_conflict or {}).items())
    if updates and not skip_conflicts_on:
        raise ValueError("update_on_conflict needs the columns of the unique index (skip_conflicts_on)")
    connection = await session.connection()
    written: list[tuple[Any, ...]] = []
    if connection.dialect.name == "postgresql":
        document = postgres_document(table, rows)
        result = await connection.exec_driver_sql(_postgres_statement(plan, skip_conflicts_on, returning, updates), (document,))
        return [tuple(found) for found in result.all()] if returning else []
    per_statement = max(1, SQLITE_MAX_PARAMETERS // len(plan.columns))
    for start in range(0, len(rows), per_statement):
        chunk = rows[start : start + per_statement]
        parameters: list[Any] = []
        for row in chunk:
            parameters.extend(_values(plan.sqlite, row))
        sql = _sqlite_statement(plan, len(chunk), skip_conflicts_on, returning, updates)
        result = await connection.exec_driver_sql(sql, tuple(parameters))
        if returning:
            written.extend(tuple(found) for found in result.all())
    return written
