"""Each page of a topic fan-out is a bounded index range scan, whatever the topic's size."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, text

from herald.engine.repository import EngineRepository
from herald.kit.ids import new_id
from herald.topics.repository import TopicRepository
from tests.conftest import Tenancy
from tests.engine.conftest import sent_while
from tests.topics.test_routes import add, insert_subscribers

PAGE = 4


async def topic_id(api: httpx.AsyncClient, key: str) -> str:
    return (await api.get(f"/v1/topics/{key}")).json()["data"]["_id"]


async def pages_and_statements(app: FastAPI, excluded_by_topic: dict[str, list[str]]) -> tuple[list[list[str]], list[tuple[str, Any]]]:
    """Every page of the fan-out, read as the engine reads it, and the statements that read them."""
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if "topic_subscribers" in statement:
            sent.append((statement, parameters))

    pages: list[list[str]] = []
    event.listen(app.state.engine.sync_engine, "before_cursor_execute", record)
    try:
        async with app.state.sessionmaker() as session:
            after = ""
            while True:
                members = await EngineRepository(session).topic_members_after(excluded_by_topic, after, PAGE)
                pages.append([external for _, external in members])
                if len(members) < PAGE:
                    break
                after = members[-1][0]
    finally:
        event.remove(app.state.engine.sync_engine, "before_cursor_execute", record)
    return pages, sent


async def plan_of(app: FastAPI, statement: str, parameters: Any) -> str:
    """The store's plan for a statement as it was sent, one line per node."""
    async with app.state.engine.connect() as connection:
        if app.state.engine.dialect.name == "sqlite":
            rows = await connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, tuple(parameters))
            return "\n".join(str(row[-1]) for row in rows)
        # The test's tables are small: ask whether the index can serve the page, not whether it is worth it.
        await connection.exec_driver_sql("SET enable_seqscan = off")
        rows = await connection.exec_driver_sql("EXPLAIN " + statement, tuple(parameters))
        return "\n".join(str(row[0]) for row in rows)


def assert_bounded_range_scan(plan: str, dialect: str) -> None:
    if dialect == "sqlite":
        assert "USING INDEX uq_topic_subscribers_topic_subscriber (topic_id=? AND subscriber_id>?)" in plan, plan
        assert "TEMP B-TREE" not in plan, plan  # no sort and no DISTINCT over the remaining members
        assert "SCAN topic_subscribers" not in plan, plan
    else:
        assert "Index Scan using uq_topic_subscribers_topic_subscriber" in plan, plan
        for node in ("Sort", "Unique", "Aggregate", "Seq Scan"):
            assert node not in plan, plan
        # Every read of the index stops after a page: a Limit sits right above each index scan.
        lines = [line.strip().removeprefix("->  ") for line in plan.splitlines()]
        for at, line in enumerate(lines):
            if line.startswith("Index Scan"):
                assert lines[at - 1].startswith("Limit"), plan


async def test_one_topic_is_paged_by_an_index_range_that_stops_after_each_page(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    subscribers = await insert_subscribers(app, tenancy, 10)
    await add(api, "everyone", *(subscriber.subscriber_id for subscriber in subscribers))
    ordered = [subscriber.subscriber_id for subscriber in sorted(subscribers, key=lambda subscriber: subscriber.id)]
    left_out = ordered[5]
    for excluded in ([], [left_out]):
        pages, statements = await pages_and_statements(app, {await topic_id(api, "everyone"): excluded})
        assert [member for page in pages for member in page] == [member for member in ordered if member not in excluded]
        assert [len(page) for page in pages] == ([4, 4, 2] if not excluded else [4, 4, 1])
        for statement, parameters in statements:
            assert_bounded_range_scan(await plan_of(app, statement, parameters), app.state.engine.dialect.name)


async def test_several_topics_are_paged_by_one_bounded_range_each_and_yield_each_member_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    subscribers = await insert_subscribers(app, tenancy, 9)
    ordered = [subscriber.subscriber_id for subscriber in sorted(subscribers, key=lambda subscriber: subscriber.id)]
    await add(api, "left", *ordered[:6])
    await add(api, "right", *ordered[3:])
    # ordered[4] is left out of "right" only: "left" still reaches it. ordered[7] is only in "right", which leaves it out.
    excluded_by_topic = {await topic_id(api, "left"): [], await topic_id(api, "right"): [ordered[4], ordered[7]]}
    pages, statements = await pages_and_statements(app, excluded_by_topic)
    assert [member for page in pages for member in page] == [member for member in ordered if member != ordered[7]]
    assert [len(page) for page in pages] == [4, 4, 0]  # a full last page asks once more
    assert len(statements) == len(pages)
    for statement, parameters in statements:
        assert_bounded_range_scan(await plan_of(app, statement, parameters), app.state.engine.dialect.name)


async def test_a_batchs_subscription_rules_are_read_through_the_batchs_range_of_the_topic(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    """The rules of a batch's members (topic_preferences.screen) are read by the range of the topic the batch spans.

    On a million-member topic seeded just before its trigger, before PostgreSQL had statistics of it, the list of
    a batch's thousand members alone was answered by reading every member of the topic (about 20 s a batch,
    bench/results/2026-11-29T1408Z-postgres.json has the run after the change). The range bounds the index read
    whatever the planner believes; here the statement must carry it, and the plan must read the topic's members
    index by subscriber.
    """
    subscribers = await insert_subscribers(app, tenancy, 3000)
    for start in range(0, len(subscribers), 500):
        added = await add(api, "everyone", *(subscriber.subscriber_id for subscriber in subscribers[start : start + 500]))
        assert added.status_code == 200, added.text
    everyone = await topic_id(api, "everyone")
    batch = sorted(subscriber.id for subscriber in subscribers)[1000:1050]
    async def read() -> list[Any]:
        async with app.state.sessionmaker() as session:
            return await TopicRepository(session).subscription_rules(tenancy.environment_id, [everyone], batch)

    rows, sent = await sent_while(app, read(), lambda statement: "topic_subscribers" in statement)
    assert sorted(subscriber_id for subscriber_id, _ in rows) == batch
    [(statement, parameters)] = sent
    assert "BETWEEN" in statement.upper(), statement
    assert batch[0] in list(parameters) and batch[-1] in list(parameters)
    dialect = app.state.engine.dialect.name
    if dialect == "postgresql":
        async with app.state.engine.connect() as connection:
            await connection.exec_driver_sql("ANALYZE topic_subscribers")
    plan = await plan_of(app, statement, parameters)
    if dialect == "sqlite":
        assert "USING INDEX uq_topic_subscribers_topic_subscriber (topic_id=? AND subscriber_id" in plan, plan
        assert "SCAN topic_subscribers" not in plan, plan
    else:
        assert "uq_topic_subscribers_topic_subscriber" in plan, plan
        index_conditions = [line for line in plan.splitlines() if "Index Cond" in line]
        assert index_conditions and all("subscriber_id" in line for line in index_conditions), plan


async def test_a_parts_range_is_read_between_its_two_ends(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    """A part of a shared-out expansion (engine/expand.py) reads the members after where the part before it ended,
    up to its own last, and no further: a range of the index bounded at both ends."""
    subscribers = await insert_subscribers(app, tenancy, 10)
    await add(api, "everyone", *(subscriber.subscriber_id for subscriber in subscribers))
    ordered = sorted(subscribers, key=lambda subscriber: subscriber.id)
    everyone = await topic_id(api, "everyone")
    async def read() -> list[tuple[str, str]]:
        async with app.state.sessionmaker() as session:
            # A page as large as the topic, so that only the range's end stops it.
            return await EngineRepository(session).topic_members_after({everyone: []}, ordered[2].id, 10, through=ordered[6].id)

    members, sent = await sent_while(app, read(), lambda statement: "topic_subscribers" in statement)
    assert [external for _, external in members] == [subscriber.subscriber_id for subscriber in ordered[3:7]]
    [(statement, parameters)] = sent
    plan = await plan_of(app, statement, parameters)
    if app.state.engine.dialect.name == "sqlite":
        assert "USING INDEX uq_topic_subscribers_topic_subscriber (topic_id=? AND subscriber_id>? AND subscriber_id<?)" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
    else:
        assert_bounded_range_scan(plan, "postgresql")
        [condition] = [line for line in plan.splitlines() if "Index Cond" in line]
        assert "(subscriber_id)::text >" in condition and "(subscriber_id)::text <=" in condition, plan


async def test_what_is_left_of_a_shared_out_expansion_is_read_from_partial_indexes(
    app: FastAPI, tenancy: Tenancy
) -> None:
    """Each part that finishes asks whether it is the last (engine/expand.py, expansion_details), while a million
    steps may be queued: the expansion's jobs are read from the leased and due indexes, the due ones only up to
    when the parts are due, and the count of notifications from the (event, subscriber) index."""
    from herald.kit.time import utcnow

    async def ask() -> None:
        async with app.state.sessionmaker() as session:
            repository = EngineRepository(session)
            assert await repository.expansion_parts_left("no-event", utcnow()) == 0
            assert await repository.count_event_notifications("no-event") == 0

    _, sent = await sent_while(app, ask())
    asked = [(statement, parameters) for statement, parameters in sent if "FROM jobs" in statement or "FROM notifications" in statement]
    assert len(asked) == 2
    jobs, notifications = [await plan_of(app, statement, parameters) for statement, parameters in asked]
    if app.state.engine.dialect.name == "sqlite":
        reads = [line for line in jobs.splitlines() if " jobs" in line]
        assert reads and all("USING INDEX ix_jobs_leased" in read or "USING INDEX ix_jobs_due (run_at<?)" in read for read in reads), jobs
        assert "USING COVERING INDEX uq_notifications_event_subscriber (event_id=?)" in notifications, notifications
    else:
        assert "ix_jobs_leased" in jobs and "ix_jobs_due" in jobs and "Seq Scan" not in jobs, jobs
        due = [line for line in jobs.splitlines() if "Index Cond" in line and "run_at" in line]
        assert due and all("run_at <=" in line for line in due), jobs
        assert "uq_notifications_event_subscriber" in notifications and "Seq Scan" not in notifications, notifications


async def test_an_open_ended_read_of_a_topic_without_statistics_walks_the_index_and_stops(
    app: FastAPI, tenancy: Tenancy
) -> None:
    """The event job's read of where its parts end has no upper bound. On a topic PostgreSQL has no statistics
    of (filled since the last ANALYZE, or a server without autovacuum) the planner guessed a couple of hundred
    rows and read every member after the cursor with a bitmap scan, then sorted them: 0.55 s a read of a
    million-member topic. The read is made with bitmap scans off for its transaction, and only for it."""
    if app.state.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's planner")
    topic = new_id()[:16]  # ids of 24 characters: the topic's, and its own 16 before each member's number
    async with app.state.engine.begin() as connection:
        # Members inserted in one statement, as a bulk import or a seeded store makes them: no statistics of them.
        await connection.execute(
            text(
                "INSERT INTO topic_subscribers (id, topic_id, environment_id, organization_id, subscriber_id, "
                "external_subscriber_id, topic_key) SELECT :topic || lpad(n::text, 8, '0'), :topic, :environment, :organization, "
                "lpad(n::text, 24, '0'), 's' || n, 'plan' FROM generate_series(1, 50000) AS n"
            ),
            {"topic": topic, "environment": tenancy.environment_id, "organization": tenancy.organization_id},
        )
    async def read() -> tuple[list[tuple[str, str]], str]:
        async with app.state.sessionmaker() as session, session.begin():
            members = await EngineRepository(session).topic_members_after({topic: []}, "", 1000)
            return members, await session.scalar(text("SELECT current_setting('enable_bitmapscan')"))

    (members, setting), sent = await sent_while(app, read())
    assert len(members) == 1000 and members[0][0] == "1".rjust(24, "0")
    assert setting == "on"  # back as it was for the rest of the transaction
    [read] = [(statement, parameters) for statement, parameters in sent if "FROM topic_subscribers" in statement]
    turned = [statement for statement, _ in sent if "set_config('enable_bitmapscan'" in statement]
    assert len(turned) == 2 and sent.index(read) == [s for s, _ in sent].index(turned[0]) + 1

    async def plan(bitmap_scans: bool) -> str:
        async with app.state.engine.begin() as connection:
            if not bitmap_scans:
                await connection.exec_driver_sql("SELECT set_config('enable_bitmapscan', 'off', true)")
            rows = await connection.exec_driver_sql("EXPLAIN " + read[0], tuple(read[1]))
            return "\n".join(str(row[0]) for row in rows)

    # As the planner would answer it left alone: every row after the cursor, then a sort.
    assert "Bitmap Heap Scan" in (alone := await plan(bitmap_scans=True)) and "Sort" in alone, alone
    assert_bounded_range_scan(await plan(bitmap_scans=False), "postgresql")
