from __future__ import annotations

import httpx

from tests.conftest import assert_error


async def test_unknown_route_has_the_error_body(api: httpx.AsyncClient) -> None:
    assert_error(await api.get("/v1/nothing-here"), 404, "Cannot GET /v1/nothing-here")


async def test_method_not_allowed_has_the_error_body(api: httpx.AsyncClient) -> None:
    assert_error(await api.patch("/v1/integrations/active"), 405)


async def test_validation_error_names_each_field(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/integrations", json={"channel": 5})
    body = assert_error(response, 422, "Validation Error")
    assert body["errors"]["providerId"]["messages"] == ["providerId should not be null or undefined"]
    assert body["errors"]["channel"]["value"] == 5


async def test_a_body_that_is_not_json_is_shown_as_text(api: httpx.AsyncClient) -> None:
    body = b'{"providerId": "sendgrid", "channel": "email"}'
    response = await api.post("/v1/integrations", content=body, headers={"content-type": "text/plain"})
    errors = assert_error(response, 422, "Validation Error")["errors"]
    assert errors["general"]["value"] == body.decode()


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
