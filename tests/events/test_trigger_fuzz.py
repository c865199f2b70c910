"""A bounded fuzz of the trigger body: bad input gets a clear answer and leaves the service healthy.

Hypothesis sends a few hundred trigger bodies to a running server with its
in-process worker: arbitrary JSON in every field, recipients of every shape
and type, and bytes that are not JSON at all. Every answer must be a 201
with the spec's trigger response or a 4xx with Novu's error body, never a
5xx. Afterwards the service must still be healthy, take a good trigger, and
its worker must have carried every accepted trigger to a final status
without an internal error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import func, select

from herald.events.schemas import TriggerStatus
from herald.models import Job
from tests.conftest import Tenancy
from tests.fixtures.builders import create_workflow
from tests.fixtures.generated import bounded
from tests.fixtures.processes import wait_until
from tests.fixtures.server import running_server

STRUCTURED_EXAMPLES = 250
RAW_EXAMPLES = 60
EDGE_EXAMPLES = 60
STATUSES = set(TriggerStatus.__args__)  # type: ignore[attr-defined]
FINAL = ("completed", "failed", "skipped", "canceled", "merged")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=10,
)
identifiers = st.from_regex(r"[A-Za-z0-9_:.\-]{1,20}", fullmatch=True)
SUBSCRIBER_FIELDS = ("email", "firstName", "lastName", "phone", "avatar", "locale", "data", "channels", "timezone")


def subscriber_objects() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"subscriberId": st.one_of(identifiers, json_values)},
        optional={name: json_values for name in SUBSCRIBER_FIELDS},
    )


def recipients(workflow_topic: str) -> st.SearchStrategy[Any]:
    one = st.one_of(
        identifiers,
        st.text(max_size=40),
        subscriber_objects(),
        st.fixed_dictionaries(
            {"type": st.sampled_from(["Topic", "topic", "Subscriber", 3])},
            optional={"topicKey": st.one_of(st.just(workflow_topic), identifiers, json_values), "exclude": json_values},
        ),
        json_values,
    )
    return st.one_of(one, st.lists(one, max_size=5))


def addressable_recipients(topic: str) -> st.SearchStrategy[Any]:
    """Recipients the trigger accepts, whose other fields (types included) are anything."""
    one = st.one_of(
        identifiers,
        st.fixed_dictionaries({"subscriberId": identifiers}, optional={name: json_values for name in SUBSCRIBER_FIELDS}),
        st.fixed_dictionaries({"type": st.just("Topic"), "topicKey": st.just(topic)}, optional={"exclude": json_values}),
    )
    return st.one_of(one, st.lists(one, min_size=1, max_size=4))


OPTIONAL_FIELDS = {
    "payload": st.one_of(st.dictionaries(st.text(max_size=10), json_values, max_size=5), json_values),
    "overrides": json_values,
    "transactionId": st.one_of(identifiers, json_values),
    "actor": st.one_of(identifiers, subscriber_objects(), json_values),
    "context": st.one_of(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=7), json_values),
}


def trigger_bodies(name: str, topic: str) -> st.SearchStrategy[Any]:
    # A body the trigger accepts, but for what the other fields hold: this reaches the engine.
    objects = st.dictionaries(st.text(max_size=10), json_values, max_size=5)
    runnable = st.fixed_dictionaries(
        {"name": st.just(name), "to": addressable_recipients(topic)},
        optional={
            "payload": objects,
            "overrides": objects,
            "actor": st.one_of(identifiers, subscriber_objects()),
            "context": st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=5),
        },
    )
    fields = st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(st.just(name), st.just(name), identifiers, json_values),
            "to": recipients(topic),
            "payload": st.one_of(st.dictionaries(st.text(max_size=10), json_values, max_size=5), json_values),
            "overrides": json_values,
            "transactionId": st.one_of(identifiers, json_values),
            "actor": st.one_of(identifiers, subscriber_objects(), json_values),
            "tenant": st.one_of(identifiers, st.fixed_dictionaries({"identifier": identifiers}, optional={"data": json_values}), json_values),
            "context": st.one_of(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=7), json_values),
        },
    )
    return st.one_of(runnable, runnable, fields, json_values)


def nested(depth: int, leaf: Any) -> Any:
    for level in range(depth):
        leaf = {"a": leaf} if level % 2 else [leaf]
    return leaf


def edge_bodies(name: str, topic: str) -> st.SearchStrategy[bytes]:
    """Runnable bodies with a value nested about as deep as the request guard allows (100 levels) or far
    deeper, or with a lone UTF-16 surrogate in a string: sent as ``\\udfff`` escapes, as JSON encoders
    that escape everything send them."""
    surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
    deep = st.builds(nested, st.one_of(st.integers(90, 110), st.integers(250, 1200)), json_values)
    where = st.sampled_from(["payload", "overrides", "actor", "to"])

    def place(body: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
        if field == "actor":
            return {**body, "actor": {"subscriberId": "edge", "data": {"v": value}}}
        if field == "to":
            return {**body, "to": [{"subscriberId": "edge", "firstName": value if isinstance(value, str) else None, "data": {"v": value}}]}
        return {**body, field: {"v": value}}

    base = st.fixed_dictionaries({"name": st.just(name), "to": addressable_recipients(topic)})
    values = st.one_of(deep, st.builds(lambda text, lone: text + lone, st.text(max_size=10), surrogates))
    return st.builds(place, base, where, values).map(lambda body: json.dumps(body, ensure_ascii=True).encode())


def check_answer(response: httpx.Response) -> None:
    assert response.status_code in (201, 400, 422), f"{response.status_code}: {response.text}"
    body = response.json()
    if response.status_code == 201:
        data = body["data"]
        assert isinstance(data["acknowledged"], bool), body
        assert data["status"] in STATUSES, body
        assert isinstance(data.get("transactionId"), str), body
        assert all(isinstance(text, str) for text in data.get("error", [])), body
    else:
        assert body["statusCode"] == response.status_code, body
        assert body["path"] == "/v1/events/trigger", body
        assert isinstance(body["message"], str) and body["message"], body
        assert isinstance(body["timestamp"], str), body


@pytest.fixture
def server_with_worker(app: FastAPI) -> Iterator[str]:
    """A real server on the test store, with the in-process worker running (as ``herald serve``)."""
    fast = dataclasses.replace(app.state.settings, run_worker=True, retry_base_seconds=0.05, worker_poll_seconds=0.1)
    with running_server(fast) as url:
        yield url


async def test_fuzzed_trigger_bodies_get_clear_answers_and_leave_the_service_healthy(
    app: FastAPI, api: httpx.AsyncClient, tenancy: Tenancy, server_with_worker: str
) -> None:
    workflow = await create_workflow(api)
    name = workflow["triggers"][0]["identifier"]
    topic = "fuzz-topic"
    assert (await api.post("/v1/topics", json={"key": topic, "name": "fuzz"})).status_code == 201
    assert (await api.post(f"/v1/topics/{topic}/subscribers", json={"subscribers": ["ada", "grace"]})).status_code == 200
    headers = {"Authorization": f"ApiKey {tenancy.api_key}"}
    accepted: list[str] = []
    failures: list[str] = []

    def fuzz() -> None:
        http = httpx.Client(base_url=server_with_worker, headers=headers, timeout=30)
        @bounded(STRUCTURED_EXAMPLES)
        @given(body=trigger_bodies(name, topic))
        def structured(body: Any) -> None:
            response = http.post("/v1/events/trigger", json=body)
            check_answer(response)
            if response.status_code == 201 and response.json()["data"]["status"] == "processed":
                accepted.append(response.json()["data"]["transactionId"])

        @bounded(RAW_EXAMPLES)
        @given(raw=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
        def raw_bytes(raw: bytes) -> None:
            check_answer(http.post("/v1/events/trigger", content=raw, headers={"content-type": "application/json"}))

        @bounded(EDGE_EXAMPLES)
        @given(raw=edge_bodies(name, topic))
        def deep_or_unencodable(raw: bytes) -> None:
            response = http.post("/v1/events/trigger", content=raw, headers={"content-type": "application/json"})
            check_answer(response)
            if response.status_code == 201 and response.json()["data"]["status"] == "processed":
                accepted.append(response.json()["data"]["transactionId"])

        for run in (structured, raw_bytes, deep_or_unencodable):
            try:
                run()
            except Exception as exc:  # report both runs' failures together
                failures.append(f"{run.__name__}: {exc}")
        http.close()

    await asyncio.to_thread(fuzz)
    assert not failures, "\n\n".join(failures)
    assert accepted, "no fuzzed trigger was accepted: the fuzz did not reach the engine"

    async with httpx.AsyncClient(base_url=server_with_worker, headers=headers, timeout=30) as client:
        assert (await client.get("/v1/health-check")).status_code == 200
        good = await client.post("/v1/events/trigger", json={"name": name, "to": "ada", "payload": {"name": "Ada"}})
        assert good.status_code == 201 and good.json()["data"]["status"] == "processed", good.text

    async def jobs_by_status() -> dict[str, int]:
        async with app.state.sessionmaker() as session:
            rows = await session.execute(
                select(Job.status, func.count()).where(Job.environment_id == tenancy.environment_id).group_by(Job.status)
            )
            return dict(rows.all())

    async def all_final() -> bool:
        return all(status in FINAL for status in await jobs_by_status())

    await wait_until(all_final, timeout=120, interval=0.2, what="the worker to finish every accepted trigger")
    async with app.state.sessionmaker() as session:
        crashed = (
            await session.execute(
                select(Job.error_text).where(Job.environment_id == tenancy.environment_id, Job.error_text.like("Internal error%"))
            )
        ).scalars().all()
    assert crashed == []
