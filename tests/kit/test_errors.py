from __future__ import annotations

import httpx

from herald.kit.request_guard import DEPTH_MESSAGE, MAX_JSON_DEPTH, SURROGATE_MESSAGE
from tests.conftest import assert_error
from tests.fixtures.builders import create_workflow


async def test_unknown_route_has_the_error_body(api: httpx.AsyncClient) -> None:
    assert_error(await api.get("/v1/nothing-here"), 404, "Cannot GET /v1/nothing-here")


async def test_method_not_allowed_has_the_error_body(api: httpx.AsyncClient) -> None:
    assert_error(await api.patch("/v1/integrations/active"), 405)


async def test_validation_error_names_each_field(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/integrations", json={"channel": 5})
    body = assert_error(response, 422, "Validation Error")
    assert body["errors"]["providerId"]["messages"] == ["providerId should not be null or undefined"]
    assert body["errors"]["channel"]["value"] == 5


async def test_a_body_not_sent_as_json_is_refused_not_read_as_json(api: httpx.AsyncClient) -> None:
    body = b'{"providerId": "sendgrid", "channel": "email"}'
    response = await api.post("/v1/integrations", content=body, headers={"content-type": "text/plain"})
    assert_error(response, 415, "Request body must be JSON, sent with Content-Type: application/json; it was sent as text/plain")


async def test_unexpected_failure_is_500_with_error_id(app, tenancy, caplog) -> None:
    from fastapi import APIRouter

    from herald.app import create_app

    # A separate app, so the route added here never reaches the shared app's OpenAPI document.
    failing = create_app(app.state.settings)
    router = APIRouter()

    @router.get("/v1/test-boom")
    async def boom() -> None:
        raise RuntimeError("boom")

    @router.post("/v1/test-boom-post")
    async def boom_post() -> None:
        raise RuntimeError("boom")

    failing.include_router(router)
    # raise_app_exceptions: the failure must be answered, not re-raised to the server (which
    # would log it a second time, as a traceback without the errorId).
    transport = httpx.ASGITransport(app=failing, raise_app_exceptions=True)
    try:
        async with httpx.AsyncClient(
            transport=transport, base_url="http://herald.test", headers={"Authorization": f"ApiKey {tenancy.api_key}"}
        ) as client:
            response = await client.get("/v1/test-boom")
            # With an idempotency key the request goes through the idempotency middleware too.
            posted = await client.post("/v1/test-boom-post", json={}, headers={"idempotency-key": "boom"})
    finally:
        await failing.state.engine.dispose()
    body = assert_error(response, 500)
    assert body["message"] == "Internal server error, contact support and provide them with the errorId"
    # One log line for it: the errorId with the traceback.
    [logged] = [record for record in caplog.records if body["errorId"] in record.getMessage()]
    assert logged.exc_info is not None and "boom" in str(logged.exc_info[1])
    assert assert_error(posted, 500)["errorId"]


async def test_nul_characters_are_refused_on_every_store(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v1/events/trigger", content=b'{"name": "a\\u0000b", "to": "ada"}', headers={"content-type": "application/json"}
    )
    assert assert_error(response, 422, "Validation Error")["errors"]["body"]["messages"]
    assert_error(await api.get("/v1/subscribers/ada%00"), 422)
    assert_error(await api.get("/v1/messages", params={"subscriberId": "a\x00"}), 422)
    # An escaped backslash followed by "u0000" is ordinary text.
    response = await api.post("/v1/topics", content=b'{"key": "k-nul-text", "name": "\\\\u0000"}', headers={"content-type": "application/json"})
    assert response.status_code == 201, response.text


def nested_json(depth: int, inner: str = "1") -> str:
    """``{"a": {"a": ... inner ...}}``, ``depth`` objects deep."""
    return '{"a":' * depth + inner + "}" * depth


JSON = {"content-type": "application/json"}


async def test_bodies_nested_too_deep_are_422_on_every_route(api: httpx.AsyncClient) -> None:
    """Python's json read 900 levels that orjson could not write: a subscriber's data answered 500."""
    workflow = await create_workflow(api)
    identifier = workflow["triggers"][0]["identifier"]
    for depth in (101, 300, 900, 2000):
        response = await api.post("/v1/subscribers", content=f'{{"subscriberId": "deep", "data": {nested_json(depth)}}}', headers=JSON)
        body = assert_error(response, 422, "Validation Error")
        assert body["errors"]["body"]["messages"] == [DEPTH_MESSAGE], body
        # The trigger route (answered past FastAPI's layers) and the bulk route, whose events are one level deeper.
        trigger = f'{{"name": "{identifier}", "to": "ada", "payload": {nested_json(depth)}}}'
        assert_error(await api.post("/v1/events/trigger", content=trigger, headers=JSON), 422)
        assert_error(await api.post("/v1/events/trigger/bulk", content=f'{{"events": [{trigger}]}}', headers=JSON), 422)
        assert_error(await api.put("/v1/subscribers/ada", content=f'{{"data": {nested_json(depth)}}}', headers=JSON), 422)


async def test_bodies_nested_up_to_the_limit_are_taken(api: httpx.AsyncClient) -> None:
    # The body is the first level: data nested 98 deep makes a body 100 deep (the data object, then 98 more, then the body).
    data = nested_json(MAX_JSON_DEPTH - 2)
    response = await api.post("/v1/subscribers", content=f'{{"subscriberId": "deep-ok", "data": {{"x": {data}}}}}', headers=JSON)
    assert response.status_code == 201, response.text
    response = await api.get("/v1/subscribers/deep-ok")
    assert response.status_code == 200, response.text
    # One level more is refused.
    response = await api.post("/v1/subscribers", content=f'{{"subscriberId": "deep-ok", "data": {{"x": {{"y": {data}}}}}}}', headers=JSON)
    assert_error(response, 422)
    # Many brackets side by side are no depth: a wide body with thousands of them is taken.
    response = await api.post("/v1/subscribers", json={"subscriberId": "wide", "data": {"rows": [[[i]] for i in range(2000)]}})
    assert response.status_code == 201, response.text
    # Brackets in strings are text.
    response = await api.post("/v1/subscribers", json={"subscriberId": "brackets", "data": {"note": "[" * 500 + '\\"{' * 200}})
    assert response.status_code == 201, response.text


async def test_lone_surrogates_are_400_not_500(api: httpx.AsyncClient) -> None:
    """A ``\\udfff`` escape without its pair is no character: storing it failed with a 500."""
    workflow = await create_workflow(api)
    identifier = workflow["triggers"][0]["identifier"]
    for body in (
        b'{"subscriberId": "sur", "firstName": "\\udfff"}',
        b'{"subscriberId": "sur", "firstName": "x\\uD800"}',
        b'{"subscriberId": "sur", "data": {"\\udfff": 1}}',
    ):
        response = await api.post("/v1/subscribers", content=body, headers=JSON)
        assert_error(response, 400, SURROGATE_MESSAGE)
    trigger = b'{"name": "%s", "to": "ada", "payload": {"text": "\\udfff"}}' % identifier.encode()
    assert_error(await api.post("/v1/events/trigger", content=trigger, headers=JSON), 400, SURROGATE_MESSAGE)
    assert_error(await api.post("/v1/events/trigger/bulk", content=b'{"events": [%s]}' % trigger, headers=JSON), 400)
    # A pair is a character (an emoji, as JSON encoders that escape everything send it), and
    # an escaped backslash before "udfff" is text.
    response = await api.post("/v1/subscribers", content=b'{"subscriberId": "sur", "firstName": "\\ud83d\\ude00 \\\\udfff"}', headers=JSON)
    assert response.status_code == 201, response.text
    assert response.json()["data"]["firstName"] == "\U0001f600 \\udfff"
    # A lone surrogate with NaN (which only Python's json reads) is still found.
    response = await api.post("/v1/subscribers", content=b'{"subscriberId": "sur", "firstName": "\\udfff", "data": {"n": NaN}}', headers=JSON)
    assert_error(response, 400)
