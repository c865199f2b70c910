"""Hostile query values on every GET route: a 4xx with Novu's error body, never a 5xx.

The routes and their query parameters are read from the app's OpenAPI
document (the Inbox's filters are documented there too); each parameter is
sent, one at a time and then repeated, the values a body would be refused
for: JSON nested 1,000 deep, lone UTF-16 surrogates, NUL, numbers past what
a float or the stores' 64-bit integers hold, ``nan``, very long strings.
Path parameters name real records, so that the query is read rather than
the route answering 404 first.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any
from urllib.parse import quote, unquote

import httpx
from fastapi import FastAPI

from herald.kit.request_guard import MAX_JSON_DEPTH
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, create_workflow, insert_in_app_message
from tests.inbox.test_routes import application_identifier, start_session

DEEP = 1_000
NESTED_OBJECT = '{"a":' * DEEP + "1" + "}" * DEEP
WITHIN = '{"a":' * (MAX_JSON_DEPTH - 2) + "1" + "}" * (MAX_JSON_DEPTH - 2)

# Each value as it goes on the wire (percent-encoded where it must be).
SCALARS = [
    "nan", "-Infinity", "1e400", str(2**63), str(-(2**63) - 1), "9" * 400, "-1", "0.5", "", "x" * 20_000, "%ED%BF%BF",
]
JSON_TEXTS = [
    NESTED_OBJECT, WITHIN, '{"k":"\\udfff"}', '{"k":"\\u0000"}', '{"k":1e400}', '{"k":NaN}', f'{{"k":{2**64}}}',
    '{"k":[[[[[[[[1]]]]]]]]}', "[" + ",".join(["{}"] * 5_000) + "]", '[{"data":{"k":1e400},"createdGte":1e400}]',
    f'[{{"createdLte":{2**64}}}]', '[{"data":{"k":"\\udfff"}}]', '[{"tags":["\\u0000"]}]',
]
# The v1 feed's payload is base64 of a JSON object.
ENCODED = [base64.b64encode(text.encode()).decode() for text in ('{"k":"\\u0000"}', '{"k":"\\udfff"}', NESTED_OBJECT)]
VALUES = SCALARS + [quote(text, safe="") for text in [*JSON_TEXTS, *ENCODED]]
# Sent twice with another value, for the routes that read the first, the last or every one of a name.
REPEATED = ["nan", str(2**63), quote(NESTED_OBJECT, safe=""), quote('{"k":"\\udfff"}', safe="")]
# Parameters named with brackets by @novu/js's query encoding, beyond the documented ones.
BRACKETED = ["tags[0][]", "tags[1][]"]


async def records(app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient) -> tuple[dict[str, str], str]:
    """Values for the routes' path parameters, and a subscriber token for the Inbox's routes."""
    workflow = await create_workflow(api, tags=["billing"])
    subscriber = await create_subscriber(api, subscriberId="ada")
    await insert_in_app_message(app, subscriber, workflow_id=workflow["_id"], data={"k": 1})
    topic = await api.post("/v1/topics", json={"key": "fuzz-topic", "name": "Fuzz"})
    assert topic.status_code == 201, topic.text
    identifier = await application_identifier(app, tenancy.environment_id)
    session = await start_session(app, {"applicationIdentifier": identifier, "subscriberId": "ada"})
    assert session.status_code == 201, session.text
    paths = {
        "subscriberId": "ada",
        "topicKey": "fuzz-topic",
        "workflowId": workflow["_id"],
        "parameter": workflow["_id"],
        "stepId": workflow["steps"][0]["_id"],
    }
    return paths, session.json()["data"]["token"]


def get_routes(document: dict[str, Any]) -> list[tuple[str, list[str]]]:
    routes = []
    for path, operations in document["paths"].items():
        if "get" in operations:
            parameters = [p["name"] for p in operations["get"].get("parameters", []) if p["in"] == "query"]
            routes.append((path, parameters))
    return routes


async def get(app: FastAPI, path: str, query: str, authorization: str) -> tuple[int, bytes]:
    """GET ``path?query`` straight through the app, the query's bytes as written (a client would parse and
    encode again each 20 KB value: most of the time this test took)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": unquote(path),
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(b"host", b"herald.test"), (b"authorization", authorization.encode())],
        "server": ("herald.test", 80),
        "client": ("127.0.0.1", 50000),
    }
    answer: dict[str, Any] = {"body": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return answer["status"], answer["body"]


async def test_every_get_route_answers_hostile_query_values_with_a_4xx(
    app: FastAPI, tenancy: Tenancy, api: httpx.AsyncClient
) -> None:
    """Each hostile value of each query parameter of each GET route: a status below 500 and, for a 4xx,
    Novu's error body. The inbox's ``data`` 1,000 deep, ``createdGte=1e400`` and ``offset=2**63`` answered 500."""
    paths, token = await records(app, tenancy, api)
    routes = get_routes((await api.get("/openapi.json")).json())
    failures: list[str] = []
    sent = 0
    for route, parameters in routes:
        authorization = f"Bearer {token}" if route.startswith("/v1/inbox") else f"ApiKey {tenancy.api_key}"
        # Records the test does not make are named "unknown": a 404, still checked.
        path = re.sub(r"\{(\w+)\}", lambda match: quote(paths.get(match[1], "unknown"), safe=""), route)
        names = [quote(name, safe="[]") for name in parameters + (BRACKETED if "tags[]" in parameters else [])]
        queries = [f"{name}={value}" for name in names for value in VALUES]
        queries += [f"{name}=1&{name}={value}" for name in names for value in REPEATED]
        queries.append(f"unknown={REPEATED[-1]}")
        for query in queries:
            status, body = await get(app, path, query, authorization)
            sent += 1
            problem = _problem(status, body)
            if problem:
                failures.append(f"GET {route}?{query[:120]}: {problem}")
    assert sent > 3_000, sent
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:60])


def _problem(status: int, body: bytes) -> str | None:
    if status >= 500:
        return f"{status} {body[:200]!r}"
    if status >= 400:
        try:
            error = json.loads(body)
        except ValueError:
            return f"{status} without a JSON body: {body[:200]!r}"
        if error.get("statusCode") != status or not error.get("message") or "path" not in error:
            return f"{status} without Novu's error body: {body[:200]!r}"
    return None
