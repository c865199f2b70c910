"""The Inbox's ``data`` filters, evaluated by the store: their meaning, their bounds, the queries they make."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import event, null, select
from sqlalchemy.ext.asyncio import AsyncEngine

from herald.inbox.service import MAX_DATA_DEPTH, MAX_DATA_NUMBER, MAX_DATA_TERMS, MAX_DATA_TEXT
from herald.models import Message
from tests.conftest import assert_error
from tests.fixtures.builders import create_subscriber, insert_in_app_message
from tests.inbox.test_routes import Inbox, inbox, message_for  # noqa: F401  (the fixture)

# -- what a filter means ------------------------------------------------------------------------


def reference_matches(data: Any, expected: dict[str, Any]) -> bool:
    """What a data filter has meant since the Inbox came (it ran in Python, over every message, before the store
    evaluated it): every key is there and its clause holds."""
    if not isinstance(data, dict):
        return not expected
    return all(key in data and _reference_value(data[key], value) for key, value in expected.items())


def _reference_value(actual: Any, expected: Any) -> bool:
    """A scalar (equal), a list or ``{"or": [...]}`` (any), ``{"and": [...]}`` (all), an object (its keys, nested)."""
    if isinstance(expected, list):
        return any(_reference_value(actual, item) for item in expected)
    if isinstance(expected, dict):
        if set(expected) == {"or"} and isinstance(expected["or"], list):
            return any(_reference_value(actual, item) for item in expected["or"])
        if set(expected) == {"and"} and isinstance(expected["and"], list):
            return all(_reference_value(actual, group) for group in expected["and"])
        return isinstance(actual, dict) and reference_matches(actual, expected)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual is expected
    return bool(actual == expected)


# Keys a path can name (SQLite reads them by path) and keys it cannot (by json_each): dots, quotes,
# backslashes, letters past ASCII, the empty key, a number-like key.
KEYS = [
    "kind", "n", "flag", "none", "list", "obj", "a", "b", "c", "a.b", 'q"uote', "back\\slash", "é", "", "0",
    "$x", "sp ace", "or", "and", "big", "half", "[0]",
]
SCALARS: list[Any] = [
    "invoice", "receipt", "x", "y", "ü", "1", "null", "empty", "🙂", 1, 1.0, 2, 0, 0.5, -0.0, MAX_DATA_NUMBER,
    True, False, None,
]
CORPUS: list[Any] = [
    {"kind": "invoice", "n": 1, "flag": True, "none": None},
    {"kind": "receipt", "n": 1.0, "flag": False, "half": 0.5},
    {"kind": "invoice", "n": 2, "flag": 1, "list": [1, "invoice"], "obj": {}},
    {"kind": ["invoice"], "n": "1", "obj": {"a": 1, "b": {"c": "x"}}},
    {"obj": {"a": 1.0, "b": {"c": "y"}, "c": None}, "a.b": 1, "a": {"b": 2}, "[0]": "x"},
    {"obj": "invoice", 'q"uote': "x", "back\\slash": "y", "é": "ü", "": "empty", "0": 0, "$x": None, "sp ace": True},
    {"obj": {"é": {'q"uote': 2}, "": {"a.b": "🙂"}}, "list": [], "none": "null", "kind": "🙂"},
    # Written with json (an integer past 64 bits), which escapes every character past ASCII.
    {"big": 2**70, "é": "ü", "kind": "invoice", "obj": {"é": 1}},
    {"n": MAX_DATA_NUMBER, "half": -0.0, "kind": "x", "flag": None},
    {"or": [1, 2], "and": "x", "kind": {"or": ["invoice"]}, "n": {"and": []}},
    {"or": 1, "and": {"or": 2}, "obj": [{"a": 1}], "a": [2]},
    {},
    None,
    [1, 2],
    "invoice",
    null(),  # no data at all (SQL NULL)
]


def random_clause(rng: random.Random, depth: int) -> Any:
    if depth >= MAX_DATA_DEPTH - 1 or rng.random() < 0.5:
        return rng.choice(SCALARS)
    items = [random_clause(rng, depth + 2) for _ in range(rng.randrange(0, 3))]
    shape = rng.randrange(4)
    if shape == 0:
        return items
    if shape == 1:
        return {"or": items}
    if shape == 2:
        return {"and": items}
    return random_filter(rng, depth + 1)


def random_filter(rng: random.Random, depth: int = 1) -> dict[str, Any]:
    return {rng.choice(KEYS): random_clause(rng, depth + 1) for _ in range(rng.randrange(1, 4))}


EXPLICIT: list[dict[str, Any]] = [
    {"kind": "invoice"},
    {"kind": ["receipt", "invoice"]},
    {"kind": {"or": ["receipt", "invoice"]}},
    {"kind": {"and": [{"or": ["invoice"]}, {"or": ["invoice", "x"]}]}},
    {"n": 1},  # 1 and 1.0, not "1", not true
    {"flag": True},  # true, not 1
    {"flag": 1},
    {"none": None},  # null, not a missing key
    {"list": 1},  # an array equals no scalar
    {"list": []},  # no alternative holds
    {"n": {"and": []}},  # only that the key is there
    {"obj": {}},  # an object, any
    {"obj": {"a": 1}},
    {"obj": {"b": {"c": ["x", "y"]}}},
    {"obj": {"é": {'q"uote': 2}}},
    {"obj": {"": {"a.b": "🙂"}}},
    {"a.b": 1},
    {"a": {"b": 2}},
    {"[0]": "x"},
    {'q"uote': "x", "back\\slash": "y", "é": "ü", "": "empty", "0": 0, "$x": None, "sp ace": True},
    {"é": "ü"},
    {"kind": "🙂"},
    {"half": 0},  # -0.0 is 0
    {"n": MAX_DATA_NUMBER},
    {"or": 1},  # an object with the key "or", not an alternative
    {"and": {"or": [2]}},
    {"or": [1, 2]},
    {"kind": {"or": "invoice"}},
    {"big": 1},
    {"obj": [{"a": 1}]},
]


async def test_a_data_filter_keeps_the_notifications_it_always_kept(app: FastAPI, inbox: Inbox) -> None:  # noqa: F811
    """The store's evaluation against the reference meaning, for examples of every form and 300 generated filters
    (keys a JSON path can name and keys it cannot), through the list and the count routes."""
    messages = [(await message_for(app, inbox, data=data)).id for data in CORPUS]
    plain = [None if data is null() else data for data in CORPUS]
    rng = random.Random(6)
    filters = EXPLICIT + [random_filter(rng) for _ in range(300)]
    mismatches = []
    for data_filter in filters:
        expected = {message_id for message_id, data in zip(messages, plain, strict=True) if reference_matches(data, data_filter)}
        found = set(await inbox.ids(data=json.dumps(data_filter), limit=100))
        if found != expected:
            mismatches.append((data_filter, [plain[messages.index(m)] for m in found ^ expected]))
    assert not mismatches, mismatches[:10]
    for start in range(0, len(filters), 20):
        batch = filters[start : start + 20]
        expected_counts = [sum(reference_matches(data, item) for data in plain) for item in batch]
        assert await inbox.counts(*({"data": item} for item in batch)) == expected_counts
    # The examples say what they show: not every filter keeps nothing.
    assert set(await inbox.ids(data=json.dumps({"n": 1}))) == {messages[0], messages[1]}
    assert await inbox.ids(data=json.dumps({"flag": True})) == [messages[0]]
    assert await inbox.ids(data=json.dumps({"none": None})) == [messages[0]]
    assert await inbox.ids(data=json.dumps({"obj": {"é": {'q"uote': 2}}})) == [messages[6]]


# -- bounds -------------------------------------------------------------------------------------


def nested(levels: int) -> dict[str, Any]:
    """A filter nesting ``levels`` levels of objects and lists, the filter itself the first."""
    value: Any = "x"
    for _ in range(levels - 1):
        value = {"k": value}
    return {"k": value}


PAST_THE_BOUNDS: list[tuple[str, dict[str, Any]]] = [
    ("levels", nested(MAX_DATA_DEPTH + 1)),
    ("keys and values", {f"k{n}": n for n in range(MAX_DATA_TERMS // 2 + 1)}),
    ("keys and values", {"k": list(range(MAX_DATA_TERMS))}),
    ("characters", {"k" * (MAX_DATA_TEXT + 1): 1}),
    ("characters", {"k": "v" * (MAX_DATA_TEXT + 1)}),
    ("past", {"k": MAX_DATA_NUMBER + 1}),
    ("past", {"k": -MAX_DATA_NUMBER * 2.0}),
]
WITHIN_THE_BOUNDS: list[dict[str, Any]] = [
    nested(MAX_DATA_DEPTH),
    {f"k{n}": n for n in range(MAX_DATA_TERMS // 2)},
    {"k": list(range(2, MAX_DATA_TERMS + 1))},
    {"k" * MAX_DATA_TEXT: "v" * MAX_DATA_TEXT},
    {"k": [MAX_DATA_NUMBER, -MAX_DATA_NUMBER, 0.1]},
]


async def test_data_filters_past_their_bounds_are_refused_on_every_route(
    app: FastAPI, api: httpx.AsyncClient, inbox: Inbox  # noqa: F811
) -> None:
    """Levels, keys and values, characters and numbers are bounded (422 naming the bound) on the list, the count,
    the bulk routes and the API key's list; filters at the bounds run. Any filter ran before, over every message."""
    await message_for(app, inbox, data={"k": 1})
    subscriber_id = inbox.session["subscriber"]["subscriberId"]
    for bound, data_filter in PAST_THE_BOUNDS:
        text = json.dumps(data_filter)
        listed = await inbox.client.get("/v1/inbox/notifications", params={"data": text})
        assert bound in assert_error(listed, 422)["errors"]["data"]["messages"][0], listed.text
        counted = await inbox.client.get("/v1/inbox/notifications/count", params={"filters": json.dumps([{"data": data_filter}])})
        assert bound in assert_error(counted, 422)["errors"]["filters.data"]["messages"][0]
        bulk = await inbox.client.post("/v1/inbox/notifications/read", json={"data": text})
        assert bound in assert_error(bulk, 422)["errors"]["data"]["messages"][0]
        by_key = await api.get(f"/v2/subscribers/{subscriber_id}/notifications", params={"data": text})
        assert bound in assert_error(by_key, 422)["errors"]["data"]["messages"][0]
    for data_filter in WITHIN_THE_BOUNDS:
        assert await inbox.ids(data=json.dumps(data_filter)) == []
        assert await inbox.counts({"data": data_filter}) == [0]
        await inbox.bulk("read", data=data_filter)


# -- the queries --------------------------------------------------------------------------------


def reading_engine(app: FastAPI) -> AsyncEngine:
    """Where the Inbox's lists and counts read: SQLite's read connections, or PostgreSQL's pool."""
    return app.state.read_engine or app.state.engine


async def test_data_filters_are_evaluated_by_the_store_in_one_pass(app: FastAPI, inbox: Inbox) -> None:  # noqa: F811
    """A count of 20 data filters reads the subscriber's messages once, and neither route reads their data to
    match it here: the filters ran in Python over the ids and data of every message, once per filter."""
    ids = [(await message_for(app, inbox, data={"n": n % 5, "kind": "invoice"})).id for n in range(30)]
    statements: list[str] = []

    def record(conn: object, cursor: object, statement: str, *rest: object) -> None:
        if "FROM messages" in statement:
            statements.append(" ".join(statement.split()))

    engine = reading_engine(app).sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        counts = await inbox.counts(*({"data": {"n": n % 6, "kind": ["invoice", "x"]}} for n in range(20)))
        counting = list(statements)
        statements.clear()
        listed = await inbox.ids(data=json.dumps({"n": 3}), limit=3)
        listing = list(statements)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert counts == [6, 6, 6, 6, 6, 0] * 3 + [6, 6]
    assert listed == [ids[28], ids[23], ids[18]]
    [count] = counting
    assert count.startswith("SELECT count(*) FILTER (WHERE"), count
    [page] = listing
    assert " LIMIT " in page and ("json_extract(messages.data" in page or "messages.data ->" in page), page


async def test_a_data_filtered_list_reads_the_subscribers_messages_by_their_index(
    app: FastAPI, api: httpx.AsyncClient, inbox: Inbox  # noqa: F811
) -> None:
    """The plan of a filtered page: the subscriber's messages in the feed's index, the data test on each (not the
    environment's messages newest first, which other inboxes fill)."""
    await message_for(app, inbox, data={"kind": "invoice"})
    other = await create_subscriber(api)
    for _ in range(60):
        await insert_in_app_message(app, other, data={"kind": "invoice"})
    statements: list[tuple[str, Any]] = []

    def record(conn: object, cursor: object, statement: str, parameters: Any, *rest: object) -> None:
        if "FROM messages" in statement and " LIMIT " in statement:
            statements.append((statement, parameters))

    engine = reading_engine(app)
    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        await inbox.ids(data=json.dumps({"kind": "invoice", "é": {"a": 1}}))
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)
    [(statement, parameters)] = statements
    sqlite = engine.dialect.name == "sqlite"
    async with engine.connect() as connection:
        if sqlite:
            rows = (await connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)).all()
        else:
            # A table this small would be read whole; may the index serve?
            await connection.exec_driver_sql("SET enable_seqscan = off")
            await connection.exec_driver_sql("ANALYZE messages")
            rows = (await connection.exec_driver_sql("EXPLAIN " + statement, parameters)).all()
        plan = " / ".join(str(row[-1]) for row in rows)
    assert "ix_messages_subscriber_channel_created" in plan, plan


async def test_the_inbox_lists_and_counts_while_the_stores_connection_is_held(app: FastAPI, inbox: Inbox) -> None:  # noqa: F811
    """On SQLite a request holds the store's one connection until it ends; the Inbox's filtered reads waited for
    it behind every other request (and held it in turn, and the health check and the worker with it). They read on
    connections of their own: here they answer while a transaction holds that connection."""
    message = await message_for(app, inbox, data={"kind": "invoice"})
    async with app.state.sessionmaker() as holder:
        await holder.execute(select(Message.id).limit(1))  # checked out, in a transaction, until this block ends
        reads = asyncio.gather(inbox.ids(data=json.dumps({"kind": "invoice"})), inbox.counts({"data": {"kind": "invoice"}}))
        # Bounded only so that a read waiting for the held connection fails here rather than hangs.
        done, _ = await asyncio.wait({reads}, timeout=20)
        assert reads in done, "the inbox's reads waited for the connection another transaction holds"
    assert reads.result() == [[message.id], [1]]
