"""kit.bulk.insert_rows stores what SQLAlchemy's own insert stores, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy import Boolean, Column, MetaData, String, Table, false, insert, select, text

from herald.kit import bulk
from herald.kit.bulk import insert_rows
from herald.kit.ids import new_id
from herald.models import Event, Job


def event_row(tenancy, transaction_id: str, **values) -> dict:
    row = {
        "id": new_id(),
        "environment_id": tenancy.environment_id,
        "organization_id": tenancy.organization_id,
        "transaction_id": transaction_id,
        "workflow_id": new_id(),
        "trigger_identifier": "bulk-test",
        "steps": [{"template": {"type": "in_app", "content": "Hi {{payload.name}}"}}],
        "recipients": [{"type": "Subscriber", "subscriberId": "ada"}],
        "payload": {"name": "Ada", "big": 12345678901234567890123, "nested": {"list": [1, 2.5, None, "ü"]}},
        "actor": None,
        "created_at": datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=timezone(timedelta(hours=2))),
    }
    row.update(values)
    return row


def job_row(tenancy, event_id: str, transaction_id: str) -> dict:
    # Leaves out what a Core insert would fill from the column defaults.
    return {
        "id": new_id(),
        "environment_id": tenancy.environment_id,
        "organization_id": tenancy.organization_id,
        "kind": "event",
        "event_id": event_id,
        "transaction_id": transaction_id,
        "run_at": datetime(2026, 3, 4, 3, 6, 7, tzinfo=UTC),
    }


async def stored(app: FastAPI, table, ids: list[str]) -> dict[str, dict]:
    """Rows as the store keeps them: raw column values on SQLite (text as written), typed on PostgreSQL."""
    names = ", ".join(column.name for column in table.columns)
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            text(f"SELECT {names} FROM {table.name} WHERE id IN ({', '.join(f':id{n}' for n in range(len(ids)))})"),
            {f"id{n}": value for n, value in enumerate(ids)},
        )
        return {row.id: dict(row._mapping) for row in result}


def without(row: dict, *names: str) -> dict:
    return {key: value for key, value in row.items() if key not in names}


async def test_rows_are_stored_as_sqlalchemy_stores_them(app: FastAPI, tenancy) -> None:
    ours = [event_row(tenancy, f"bulk-ours-{n}") for n in range(3)]
    theirs = [{**row, "id": new_id(), "transaction_id": row["transaction_id"].replace("ours", "theirs")} for row in ours]
    async with app.state.sessionmaker() as session, session.begin():
        written = await insert_rows(session, Event.__table__, ours, returning=("id",))
        await session.execute(insert(Event.__table__), theirs)
    assert sorted(found for (found,) in written) == sorted(row["id"] for row in ours)

    mine = await stored(app, Event.__table__, [row["id"] for row in ours])
    reference = await stored(app, Event.__table__, [row["id"] for row in theirs])
    for ours_row, theirs_row in zip(ours, theirs, strict=True):
        assert without(mine[ours_row["id"]], "id", "transaction_id") == without(
            reference[theirs_row["id"]], "id", "transaction_id"
        )
    # Read back through the model, the values are the ones given.
    async with app.state.sessionmaker() as session:
        event = await session.get(Event, ours[0]["id"])
    assert event.payload == ours[0]["payload"]
    assert event.created_at == ours[0]["created_at"]
    assert event.actor is None and event.status == "accepted" and event.kind == "trigger"


async def test_left_out_columns_get_the_column_defaults(app: FastAPI, tenancy) -> None:
    event = event_row(tenancy, "bulk-defaults")
    ours = job_row(tenancy, event["id"], "bulk-defaults")
    theirs = {**job_row(tenancy, event["id"], "bulk-defaults"), "run_at": ours["run_at"]}
    started = datetime.now(UTC)
    async with app.state.sessionmaker() as session, session.begin():
        await insert_rows(session, Job.__table__, [ours])
        await session.execute(insert(Job.__table__), [theirs])
    rows = await stored(app, Job.__table__, [ours["id"], theirs["id"]])
    # created_at and updated_at default to the time of the insert: equal up to that.
    volatile = ("id", "created_at", "updated_at")
    assert without(rows[ours["id"]], *volatile) == without(rows[theirs["id"]], *volatile)
    async with app.state.sessionmaker() as session:
        job = await session.get(Job, ours["id"])
    assert (job.status, job.attempts, job.max_attempts, job.data, job.result) == ("queued", 0, 5, {}, None)
    # Each timestamp from its own default call, as a Core insert makes them.
    assert abs(job.created_at - started) < timedelta(minutes=1)
    assert abs(job.updated_at - started) < timedelta(minutes=1)


async def test_conflicting_rows_are_skipped_and_not_returned(app: FastAPI, tenancy) -> None:
    first = event_row(tenancy, "bulk-conflict")
    again = event_row(tenancy, "bulk-conflict", payload={"second": True})
    fresh = event_row(tenancy, "bulk-conflict-fresh")
    async with app.state.sessionmaker() as session, session.begin():
        await insert_rows(session, Event.__table__, [first])
    async with app.state.sessionmaker() as session, session.begin():
        written = await insert_rows(
            session,
            Event.__table__,
            [again, fresh],
            skip_conflicts_on=("environment_id", "transaction_id"),
            returning=("id",),
        )
    assert written == [(fresh["id"],)]
    async with app.state.sessionmaker() as session:
        payloads = (
            await session.scalars(
                select(Event.payload).where(
                    Event.environment_id == tenancy.environment_id, Event.transaction_id == "bulk-conflict"
                )
            )
        ).all()
    assert payloads == [first["payload"]]


async def test_conflicting_rows_can_update_the_stored_ones_instead(app: FastAPI, tenancy) -> None:
    first = event_row(tenancy, "bulk-upsert", trigger_identifier="first")
    again = event_row(tenancy, "bulk-upsert", trigger_identifier="again", payload={"second": True})
    del again["actor"]  # left out: SQL NULL, which COALESCE passes over
    fresh = event_row(tenancy, "bulk-upsert-fresh")
    async with app.state.sessionmaker() as session, session.begin():
        await insert_rows(session, Event.__table__, [{**first, "actor": {"subscriberId": "kept"}}])
    updates = {"payload": "excluded.payload", "actor": "COALESCE(excluded.actor, events.actor)"}
    async with app.state.sessionmaker() as session, session.begin():
        written = await insert_rows(
            session,
            Event.__table__,
            [again, fresh],
            skip_conflicts_on=("environment_id", "transaction_id"),
            update_on_conflict=updates,
            returning=("transaction_id",),
        )
    assert sorted(written) == [("bulk-upsert",), ("bulk-upsert-fresh",)]
    async with app.state.sessionmaker() as session:
        stored = (
            await session.execute(
                select(Event.id, Event.trigger_identifier, Event.payload, Event.actor).where(
                    Event.environment_id == tenancy.environment_id, Event.transaction_id == "bulk-upsert"
                )
            )
        ).one()
    # The stored row, with the columns the update names changed and no other.
    assert tuple(stored) == (first["id"], "first", {"second": True}, {"subscriberId": "kept"})
    with pytest.raises(ValueError, match="update_on_conflict needs"):
        async with app.state.sessionmaker() as session:
            await insert_rows(session, Event.__table__, [fresh], update_on_conflict=updates)


async def test_many_rows_are_written_in_chunks_within_the_parameter_limit(
    app: FastAPI, tenancy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Few parameters a statement on SQLite, so 50 rows take several statements.
    monkeypatch.setattr(bulk, "SQLITE_MAX_PARAMETERS", 3 * len(Event.__table__.columns))
    rows = [event_row(tenancy, f"bulk-chunk-{n}", payload={"n": n}) for n in range(50)]
    async with app.state.sessionmaker() as session, session.begin():
        written = await insert_rows(
            session, Event.__table__, rows, skip_conflicts_on=("environment_id", "transaction_id"), returning=("id",)
        )
    assert sorted(found for (found,) in written) == sorted(row["id"] for row in rows)
    async with app.state.sessionmaker() as session:
        payloads = (
            await session.scalars(
                select(Event.payload).where(
                    Event.environment_id == tenancy.environment_id, Event.transaction_id.like("bulk-chunk-%")
                )
            )
        ).all()
    assert sorted(payload["n"] for payload in payloads) == list(range(50))


async def test_no_rows_write_nothing(app: FastAPI, tenancy) -> None:
    async with app.state.sessionmaker() as session:
        assert await insert_rows(session, Event.__table__, [], returning=("id",)) == []


async def test_a_column_with_only_a_server_default_must_be_given(app: FastAPI) -> None:
    # insert_rows names every column, so a default only the server knows would be replaced by NULL.
    table = Table(
        "bulk_server_default_probe",
        MetaData(),
        Column("id", String(24), primary_key=True),
        Column("flag", Boolean, server_default=false(), nullable=False),
    )
    async with app.state.sessionmaker() as session:
        with pytest.raises(ValueError, match="only a server default"):
            await insert_rows(session, table, [{"id": new_id()}])


def test_a_statement_made_from_rows_must_be_given_a_column_with_only_a_server_default() -> None:
    # postgres_insert_select names every column too: the server's default would never apply.
    table = Table(
        "bulk_server_default_probe_select",
        MetaData(),
        Column("id", String(24), primary_key=True),
        Column("flag", Boolean, server_default=false(), nullable=False),
    )
    with pytest.raises(ValueError, match="flag has only a server default"):
        bulk.postgres_insert_select(table, {"id": "s.id"}, "source s")
    assert "s.flag" in bulk.postgres_insert_select(table, {"id": "s.id", "flag": "s.flag"}, "source s")


def test_rows_made_in_a_statement_get_constant_defaults_and_must_be_given_the_others() -> None:
    # postgres_insert_select writes a column left out as its default literal; one made per row cannot be.
    made = bulk.postgres_insert_select(Job.__table__, {"id": "s.id", "run_at": "now()", "created_at": "now()", "updated_at": "now()"}, "source s")
    assert "0, 5" in made  # attempts, max_attempts
    assert "'{}'::jsonb" in made  # data
    for needed in ("id", "run_at", "created_at"):
        given = {"id": "s.id", "run_at": "now()", "created_at": "now()", "updated_at": "now()"}
        del given[needed]
        with pytest.raises(ValueError, match=f"jobs.{needed}'s default is made for each row"):
            bulk.postgres_insert_select(Job.__table__, given, "source s")


def test_a_document_can_leave_columns_to_the_statement_and_carry_other_fields(tenancy) -> None:
    row = {**event_row(tenancy, "doc"), "job_id": "j1", "extra_steps": None}
    [record] = orjson.loads(bulk.postgres_document(Event.__table__, [row], leave_out={"steps"}, extra=("job_id", "extra_steps")))
    assert "steps" not in record
    assert (record["job_id"], record["extra_steps"]) == ("j1", None)
    assert record["recipients"] == [row["recipients"]]  # the rest as postgres_insert reads it
    recordset = bulk.postgres_recordset(Event.__table__, 1, ["id", "created_at"], {"job_id": "varchar(24)"})
    assert recordset == 'json_to_recordset($1::json) AS r("created_at" timestamptz, "id" VARCHAR(24), "job_id" varchar(24))'
