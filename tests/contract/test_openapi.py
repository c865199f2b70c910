"""Property-based checks of the whole API against its own OpenAPI document (GET /openapi.json).

schemathesis generates requests for every operation (bounded examples) and
checks each answer: never a 5xx, always a documented status, and a body that
matches the documented schema for that status.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

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

from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.fixtures.generated import bounded
from tests.fixtures.server import running_server

MAX_EXAMPLES = 15
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def server_url(app: FastAPI) -> Iterator[str]:
    with running_server(app.state.settings) as url:
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
