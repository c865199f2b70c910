"""What every HTTP provider promises, checked against a fake of its API.

A send that the provider's API accepts returns its message id; a refused
credential is a permanent error; a 5xx, a 429, a stalled answer and an
unreachable host are transient errors.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest

from herald.providers import Provider, ProviderError, SendResult, provider_class
from tests.fixtures.peers import HttpPeer, free_port, stalled_answer, status_answer
from tests.providers.cases import CASES, Case, Keys

PROVIDER_IDS = sorted(CASES)
# Their webhook address is the secret; there is no credential to get wrong.
UNAUTHENTICATED_WEBHOOKS = frozenset({"slack", "discord", "msteams", "mattermost"})


def build(case: Case, http: httpx.AsyncClient, **credential_changes: object) -> Provider[Any]:
    cls = provider_class(case.provider_id)
    assert cls is not None, case.provider_id
    return cls({**case.credentials, **credential_changes}, http)


def unreachable(case: Case, port: int) -> Case:
    """The same set-up aimed at a port nobody listens on."""
    dead = f"http://127.0.0.1:{port}"
    credentials = dict(case.credentials)
    message = case.message
    if "baseUrl" in credentials:
        credentials["baseUrl"] = dead
    if "webhookUrl" in credentials:
        credentials["webhookUrl"] = dead + "/hook"
    if getattr(message, "webhook_url", None):
        message = dataclasses.replace(message, webhook_url=dead + "/hook")
    return dataclasses.replace(case, credentials=credentials, message=message)


@pytest.mark.parametrize("provider_id", PROVIDER_IDS)
async def test_accepted_send_returns_the_providers_message_id(
    provider_id: str, peer: HttpPeer, keys: Keys, http: httpx.AsyncClient
) -> None:
    case = CASES[provider_id](peer, keys)

    result = await build(case, http).send(case.message)

    assert isinstance(result, SendResult)
    assert result.failures == []
    if case.answers_with_id:
        assert result.provider_message_id
    method, _ = case.endpoint
    assert [request.method for request in peer.requests if request.path != "/token"] == [method]


@pytest.mark.parametrize("provider_id", [pid for pid in PROVIDER_IDS if pid not in UNAUTHENTICATED_WEBHOOKS])
async def test_refused_credentials_are_a_permanent_error(
    provider_id: str, peer: HttpPeer, keys: Keys, http: httpx.AsyncClient
) -> None:
    case = CASES[provider_id](peer, keys)
    assert case.refused_credentials is not None

    with pytest.raises(ProviderError) as raised:
        await build(case, http, **case.refused_credentials).send(case.message)

    assert raised.value.transient is False
    assert raised.value.message.startswith(provider_id)
    assert raised.value.status_code in (200, 400, 401, 403)


@pytest.mark.parametrize("provider_id", PROVIDER_IDS)
async def test_server_error_is_transient_and_carries_the_providers_text(
    provider_id: str, peer: HttpPeer, keys: Keys, http: httpx.AsyncClient
) -> None:
    case = CASES[provider_id](peer, keys)
    peer.route(*case.endpoint, status_answer(503, {"message": "upstream is down for maintenance"}))

    with pytest.raises(ProviderError) as raised:
        await build(case, http).send(case.message)

    assert raised.value.transient is True
    assert raised.value.status_code == 503
    assert "upstream is down for maintenance" in raised.value.message


@pytest.mark.parametrize("provider_id", PROVIDER_IDS)
async def test_rate_limit_is_transient(provider_id: str, peer: HttpPeer, keys: Keys, http: httpx.AsyncClient) -> None:
    case = CASES[provider_id](peer, keys)
    peer.route(*case.endpoint, status_answer(429, "Too Many Requests", headers={"retry-after": "1"}))

    with pytest.raises(ProviderError) as raised:
        await build(case, http).send(case.message)

    assert raised.value.transient is True
    assert raised.value.status_code == 429


@pytest.mark.parametrize("provider_id", PROVIDER_IDS)
async def test_client_error_is_permanent(provider_id: str, peer: HttpPeer, keys: Keys, http: httpx.AsyncClient) -> None:
    case = CASES[provider_id](peer, keys)
    peer.route(*case.endpoint, status_answer(400, {"message": "the request is malformed"}))

    with pytest.raises(ProviderError) as raised:
        await build(case, http).send(case.message)

    assert raised.value.transient is False
    assert raised.value.status_code == 400
    assert "the request is malformed" in raised.value.message


@pytest.mark.parametrize("provider_id", PROVIDER_IDS)
async def test_stalled_answer_is_a_transient_timeout(
    provider_id: str, peer: HttpPeer, keys: Keys, impatient_http: httpx.AsyncClient
) -> None:
    case = CASES[provider_id](peer, keys)
    peer.route(*case.endpoint, stalled_answer(2.0))

    with pytest.raises(ProviderError) as raised:
        await build(case, impatient_http).send(case.message)

    assert raised.value.transient is True
    assert raised.value.status_code is None


@pytest.mark.parametrize("provider_id", PROVIDER_IDS)
async def test_unreachable_host_is_transient(
    provider_id: str, peer: HttpPeer, keys: Keys, http: httpx.AsyncClient
) -> None:
    # For fcm the token endpoint stays reachable; the send endpoint is gone.
    case = unreachable(CASES[provider_id](peer, keys), free_port())

    with pytest.raises(ProviderError) as raised:
        await build(case, http).send(case.message)

    assert raised.value.transient is True


@pytest.mark.parametrize("provider_id", PROVIDER_IDS)
async def test_required_credentials_are_those_send_cannot_do_without(
    provider_id: str, peer: HttpPeer, keys: Keys, http: httpx.AsyncClient
) -> None:
    """``required_credentials`` (what creating an active integration checks) says what ``send`` requires: each one
    left out fails before any request, and a working set-up has them all."""
    case = CASES[provider_id](peer, keys)
    cls = provider_class(provider_id)
    assert cls is not None
    assert set(cls.required_credentials) <= {name for name, value in case.credentials.items() if value}
    for name in cls.required_credentials:
        peer.reset()
        with pytest.raises(ProviderError) as raised:
            await build(case, http, **{name: ""}).send(case.message)
        assert f"credential {name} is missing" in raised.value.message
        assert raised.value.transient is False
        assert peer.requests == []


SECRET = "internal-service-secret-7f3a"


@pytest.mark.parametrize("provider_id", PROVIDER_IDS)
@pytest.mark.parametrize(
    "answer",
    [
        status_answer(200, {"secret": SECRET, "data": {"token": SECRET}}),
        status_answer(400, f"<html><body>internal admin page, {SECRET}</body></html>"),
        status_answer(500, {"config": {"password": SECRET}}),
    ],
    ids=["200-json", "400-html", "500-json-without-error-field"],
)
async def test_an_answer_from_something_else_is_not_repeated(
    provider_id: str, answer: Any, peer: HttpPeer, keys: Keys, http: httpx.AsyncClient
) -> None:
    """A baseUrl or webhook URL may point at a service that is not the provider: its answer stays out of errors."""
    case = CASES[provider_id](peer, keys)
    peer.route(*case.endpoint, answer)

    try:
        result = await build(case, http).send(case.message)
    except ProviderError as error:
        assert SECRET not in error.message
    else:
        assert SECRET not in str(result.provider_message_id)
