"""Property-based checks of the whole API against its own OpenAPI document (GET /openapi.json).

schemathesis generates requests for every operation (bounded examples) and
checks each answer: never a 5xx, always a documented status, and a body that
matches the documented schema for that status.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from fastapi import FastAPI
from hypothesis import given
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from herald.kit.request_guard import MAX_JSON_DEPTH
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.fixtures.generated import bounded
from tests.fixtures.server import running_server

MAX_EXAMPLES = 6
# Cases per operation with a JSON body for the bodies the generator does not make (below).
EDGE_EXAMPLES = 3
DEEP = 900
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def server_url(app: FastAPI) -> Iterator[str]:
    # The fuzz sends hundreds of requests a second, bulk triggers among them (100 tokens each):
    # unlimited, so every generated request reaches its route (the limits: tests/kit/test_limits.py).
    settings = dataclasses.replace(app.state.settings, rate_limit_triggers=0, rate_limit_requests=0)
    with running_server(settings) as url:
        yield url


async def test_every_operation_conforms_to_the_openapi_document(
    app: FastAPI, server_url: str, tenancy: Tenancy, api
) -> None:
    # Some records to find, so that not every generated request ends in 404.
    await create_workflow(api)
    await create_subscriber(api, subscriberId="ada")
    # The document the service serves, as any client would read it.
    schema = await asyncio.to_thread(schemathesis.openapi.from_url, f"{server_url}/openapi.json")
    headers = {"Authorization": f"ApiKey {tenancy.api_key}"}
    failures: list[str] = []

    def exercise() -> None:
        http = requests.Session()
        for result in schema.get_all_operations():
            operation = result.ok()

            @given(case=operation.as_strategy())
            @bounded(MAX_EXAMPLES)
            def check(case: schemathesis.Case) -> None:
                response = case.call(base_url=server_url, session=http, headers=headers, timeout=30)
                case.validate_response(response, checks=CHECKS)

            try:
                check()
            except Exception as exc:  # collect every operation's failure, then report them all
                failures.append(f"{operation.method.upper()} {operation.path}: {exc}")

    await asyncio.to_thread(exercise)
    assert not failures, "\n\n".join(failures)


def edge_variants(body: Any) -> list[tuple[str, bytes]]:
    """The generated body with what hypothesis does not generate: values nested far past the request
    guard's 100 levels, values nested just within them, and lone UTF-16 surrogates (``\\udfff``)."""
    fields = body if isinstance(body, dict) and body else {"extra": body}
    nested = '{"a":' * DEEP + "1" + "}" * DEEP
    within = '{"a":' * (MAX_JSON_DEPTH - 3) + "1" + "}" * (MAX_JSON_DEPTH - 3)

    def with_each(text: str) -> bytes:
        placeholder = {key: "__VALUE__" for key in fields}
        return json.dumps(placeholder).replace('"__VALUE__"', text).encode()

    lone = {key: (f"{value}\udfff" if isinstance(value, str) else value) for key, value in fields.items()}
    return [
        ("deep", with_each(nested)),
        ("within", with_each(f'{{"v": {within}}}')),
        ("surrogate", json.dumps({**lone, "note": "x\udfff"}, ensure_ascii=True).encode()),
    ]


async def test_every_operation_answers_deep_and_unencodable_bodies_with_a_4xx(
    app: FastAPI, server_url: str, tenancy: Tenancy, api
) -> None:
    """A subscriber's data 900 deep or a lone surrogate answered 500: for every operation with a body,
    generated bodies with such values get Novu's error body (422 too deep, 400 for the surrogate), and
    values nested within the limit never a 5xx."""
    await create_workflow(api)
    await create_subscriber(api, subscriberId="ada")
    schema = await asyncio.to_thread(schemathesis.openapi.from_url, f"{server_url}/openapi.json")
    headers = {"Authorization": f"ApiKey {tenancy.api_key}", "content-type": "application/json"}
    failures: list[str] = []
    exercised: list[str] = []

    def exercise() -> None:
        http = requests.Session()
        for result in schema.get_all_operations():
            operation = result.ok()
            if not list(operation.body):
                continue
            exercised.append(f"{operation.method.upper()} {operation.path}")

            @given(case=operation.as_strategy())
            @bounded(EDGE_EXAMPLES)
            def check(case: schemathesis.Case) -> None:
                url = f"{server_url}{case.formatted_path}"
                for kind, raw in edge_variants(case.body):
                    response = http.request(case.method, url, params=case.query, data=raw, headers=headers, timeout=30)
                    assert response.status_code < 500, f"{kind}: {response.status_code} {response.text[:300]}"
                    if kind == "within":
                        continue
                    # 422 too deep, 400 for the surrogate (or 422 when the generated body also holds a NUL).
                    expected = {422} if kind == "deep" else {400, 422}
                    body = response.json()
                    assert response.status_code in expected and body["statusCode"] == response.status_code, f"{kind}: {response.text[:300]}"
                    assert isinstance(body["path"], str) and body["message"], body

            try:
                check()
            except Exception as exc:
                failures.append(f"{operation.method.upper()} {operation.path}: {exc}")

    await asyncio.to_thread(exercise)
    assert len(exercised) > 20, exercised
    assert not failures, "\n\n".join(failures)
