"""The reads of ``GET /v1/messages`` stay index ranges on a store of millions of messages (both stores' query plans)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from herald.messages.repository import FeedFilter, MessageRepository, _count


async def plan_of(app: FastAPI, statement: Any) -> str:
    """The store's plan for a statement, one line per node."""
    dialect = app.state.engine.dialect
    sql = str(statement.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    async with app.state.engine.connect() as connection:
        if dialect.name == "sqlite":
            return "\n".join(str(row[-1]) for row in await connection.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
        # The test's store is empty: ask whether an index can serve the read, not whether it is worth it.
        await connection.exec_driver_sql("SET enable_seqscan = off")
        return "\n".join(str(row[0]) for row in await connection.exec_driver_sql("EXPLAIN " + sql))


async def test_one_channels_messages_are_a_range_of_one_index_for_the_page_and_for_the_count(app: FastAPI) -> None:
    """?channel= reads ix_messages_environment_channel_created on PostgreSQL: the page in its order, the count from the index alone.

    With the environment's index only, a page of a rare channel walked the
    environment's messages dropping the others, and the count read every one
    of the channel's rows from the table. SQLite has no such index (migration
    0032): without statistics it took it for a subscriber's inbox too, so
    there the list keeps the environment's index and every inbox its own.
    """
    repository = MessageRepository(None)  # type: ignore[arg-type]
    query = repository.list_query("environment", subscriber_id=None, channel="email", transaction_ids=None)
    page, count = await plan_of(app, query.offset(20).limit(10)), await plan_of(app, _count(query))
    if app.state.engine.dialect.name == "sqlite":
        assert "ix_messages_environment_created" in page, page
        inbox = await plan_of(app, repository.feed_query("environment", "subscriber", FeedFilter()))
        assert "ix_messages_subscriber_channel_created" in inbox, inbox
        return
    for plan in (page, count):
        assert "ix_messages_environment_channel_created" in plan, plan
    assert "Sort" not in page, page
    assert "Index Only Scan using ix_messages_environment_channel_created" in count, count
