"""HTTP/1.1 provider requests (aiohttp, providers/http1.py): what a provider sends and reads back is httpx's, the policy holds."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.responses import Response

from herald.kit.outbound import OutboundPolicy
from herald.providers import ChatMessage, ProviderError, create_http_client
from herald.providers.chat.webhook import ChatWebhookProvider
from herald.providers.http import send_raw
from herald.providers.http1 import json_content
from tests.fixtures import peers
from tests.fixtures.peers import LOCAL_PEERS, CountingListener, HttpPeer
from tests.providers.test_outbound import resolve_names


def httpx_json(value: Any) -> bytes:
    """The body httpx itself writes for ``json=value``."""
    return httpx.Request("POST", "http://example.test/", json=value).content


@pytest.mark.parametrize(
    "value",
    [
        {"personalizations": [{"to": [{"email": "ada@example.com"}]}], "subject": "Größe ✓ 日本", "n": 3},
        {"html": "<p>\"quoted\" \\ and\ncontrol \x01 chars</p>", "empty": {}, "list": [], "none": None, "yes": True},
        {"float": 0.1, "neg": -2.5, "int": 12345678901234, "zero": 0.0},
        {1: "integer keys", "b": 2},  # orjson refuses integer keys; json.dumps turns them into strings
        {"huge": 2**70},  # past 64 bits: orjson refuses, json.dumps writes it
        ["top", "level", "list"],
    ],
)
def test_json_bodies_are_what_httpx_would_send(value: Any) -> None:
    assert json.loads(json_content(value)) == json.loads(httpx_json(value))
    assert json_content(value) == httpx_json(value)


@pytest.mark.parametrize("value", [{"a": math.nan}, {"a": [1, {"b": math.inf}]}, [-math.inf]])
def test_a_float_that_is_not_a_number_is_refused_as_httpx_refuses_it(value: Any) -> None:
    with pytest.raises(ValueError):
        httpx_json(value)
    with pytest.raises(ValueError):
        json_content(value)


def test_null_in_a_body_is_kept() -> None:
    assert json_content({"a": None, "b": [None]}) == b'{"a":null,"b":[null]}'


async def test_a_json_request_carries_httpx_headers_and_body(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peer.route("POST", "/json", lambda recorded: Response(status_code=202, headers={"x-message-id": "m-1"}))
    body = {"subject": "Größe", "html": "<p>Hi</p>"}

    answer = await send_raw(http, "json", "POST", f"{peer.url}/json", json=body, headers={"authorization": "Bearer k"})

    [request] = peer.requests_to("/json")
    assert request.body == httpx_json(body)
    assert request.headers["content-type"] == "application/json"
    assert request.headers["content-length"] == str(len(request.body))
    assert request.headers["authorization"] == "Bearer k"
    assert request.headers["user-agent"].startswith("herald/")
    assert (answer.status_code, answer.headers["x-message-id"], answer.request.method) == (202, "m-1", "POST")


async def test_a_compressed_answer_is_decoded_once(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    """aiohttp is told not to decode: httpx decodes by content-encoding, as before; decoded twice it would fail."""
    payload = json.dumps({"errors": [{"message": "compressed"}]}).encode()
    peer.route(
        "POST",
        "/gzip",
        lambda recorded: Response(
            status_code=400, content=gzip.compress(payload), headers={"content-encoding": "gzip", "content-type": "application/json"}
        ),
    )

    answer = await send_raw(http, "gzip", "POST", f"{peer.url}/gzip", json={})

    assert answer.status_code == 400
    assert answer.json() == {"errors": [{"message": "compressed"}]}
    [request] = peer.requests_to("/gzip")
    assert "gzip" in request.headers["accept-encoding"]


async def test_query_parameters_and_form_bodies_are_encoded_as_httpx_encodes_them(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peer.route("POST", "/form", lambda recorded: Response(status_code=200, content=b"{}"))

    await send_raw(http, "form", "POST", f"{peer.url}/form", params={"to": "+1 555"}, data={"Body": "Hi & bye"})

    [request] = peer.requests_to("/form")
    assert request.query == {"to": "+1 555"}
    assert request.form_value("Body") == "Hi & bye"
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"


async def test_an_unsupported_scheme_and_a_missing_host_are_permanent_failures(http: httpx.AsyncClient) -> None:
    with pytest.raises(ProviderError) as unsupported:
        await send_raw(http, "p", "POST", "ftp://files.example/upload", json={})
    with pytest.raises(ProviderError) as hostless:
        await send_raw(http, "p", "POST", "http:///path", json={})

    assert unsupported.value.transient is False and "unsupported URL" in unsupported.value.message
    assert hostless.value.transient is False and "invalid URL" in hostless.value.message


async def test_a_server_that_closes_without_answering_is_a_transient_failure() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with create_http_client(timeout=5.0, outbound=LOCAL_PEERS) as http:
            with pytest.raises(ProviderError) as raised:
                await send_raw(http, "p", "GET", f"http://127.0.0.1:{port}/")
    finally:
        server.close()

    assert raised.value.transient is True and "could not reach http://127.0.0.1:" in raised.value.message


class RawHttpServer:
    """An HTTP/1.1 server on 127.0.0.1 (over TLS when given a context) that answers 200 and keeps each request's head as sent."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self, context: ssl.SSLContext | None = None) -> RawHttpServer:
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0, ssl=context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
            await reader.readexactly(lengths[0] if lengths else 0)
            self.heads.append(head)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def tls_http1_server(tmp_path: Any) -> AsyncIterator[tuple[RawHttpServer, Any]]:
    """A RawHttpServer over TLS with a certificate for localhost and 127.0.0.1."""
    tls = peers.self_signed_certificate(tmp_path)
    server = await RawHttpServer().start(tls.server_context())
    yield server, tls
    server.close()


async def test_header_names_go_out_as_the_provider_wrote_them(http: httpx.AsyncClient) -> None:
    server = await RawHttpServer().start()
    try:
        await send_raw(http, "p", "POST", f"http://127.0.0.1:{server.port}/send", json={}, headers={"Authorization": "Bearer k", "X-Api-Key": "v"})
    finally:
        server.close()

    [head] = server.heads
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /send HTTP/1.1"
    assert b"Authorization: Bearer k" in lines and b"X-Api-Key: v" in lines
    assert [line for line in lines if line.lower().startswith(b"host:")] == [f"Host: 127.0.0.1:{server.port}".encode()]


async def test_tls_over_http1_verifies_the_host_name_when_connecting_by_address(
    tls_http1_server: tuple[RawHttpServer, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The certificate names localhost, not hooks.test, though both resolve to 127.0.0.1: the second is refused."""
    server, tls = tls_http1_server
    port = server.port
    looked_up = resolve_names(monkeypatch, {"localhost": "127.0.0.1", "hooks.test": "127.0.0.1"})
    trust = ssl.create_default_context(cafile=str(tls.cert))
    async with create_http_client(timeout=5.0, verify=trust, outbound=LOCAL_PEERS) as http:
        await ChatWebhookProvider({}, http).send(ChatMessage(content="x", webhook_url=f"https://localhost:{port}/hook"))
        with pytest.raises(ProviderError) as raised:
            await ChatWebhookProvider({}, http).send(ChatMessage(content="x", webhook_url=f"https://hooks.test:{port}/hook"))

    assert [head.split(b"\r\n")[0] for head in server.heads] == [b"POST /hook HTTP/1.1"]
    assert looked_up == ["localhost", "hooks.test"]
    assert "CERTIFICATE_VERIFY_FAILED" in raised.value.message and "hooks.test" in raised.value.message


async def test_a_literal_address_is_checked_before_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp does not ask the resolver about an address in the URL; the policy still sees it, every time."""
    async with create_http_client(timeout=5.0, outbound=OutboundPolicy.allowing(["10.0.0.0/8"])) as http:
        for _ in range(2):
            with pytest.raises(ProviderError) as raised:
                await send_raw(http, "p", "POST", "http://127.0.0.1:9/hook", json={})
            assert raised.value.transient is False and "refused 127.0.0.1 (a loopback address)" in raised.value.message


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "[::1]", "[::ffff:7f00:1]"])
async def test_other_spellings_of_loopback_reach_nothing(host: str) -> None:
    listener = CountingListener().start()
    try:
        async with create_http_client(timeout=5.0) as http:
            with pytest.raises(ProviderError) as raised:
                await send_raw(http, "p", "POST", f"http://{host}:{listener.port}/hook", json={})
    finally:
        listener.stop()

    assert raised.value.transient is False
    assert listener.connections == 0


async def test_an_answer_that_cannot_be_decoded_is_a_transient_failure_that_says_so(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peer.route("POST", "/broken", lambda recorded: Response(status_code=200, content=b"not gzip", headers={"content-encoding": "gzip"}))

    with pytest.raises(ProviderError) as raised:
        await send_raw(http, "p", "POST", f"{peer.url}/broken", json={})

    assert raised.value.transient is True
    assert raised.value.message.startswith(f"p: could not decode the answer from {peer.url}")
