"""A provider's answer is read to MAX_ANSWER_BYTES at most, then the connection is closed (providers/answers.py).

Each path that reads an answer meets a server that offers FLOOD_BYTES (200 MB),
streamed. What is asserted is how much the server managed to write before the
client hung up (or stopped granting HTTP/2 flow control), not memory or time:
read whole, the server writes all of it.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from starlette.responses import Response

from herald.providers import EmailMessage, ProviderError, PushMessage, create_http_client
from herald.providers.answers import MAX_ANSWER_BYTES, answer_is_cut
from herald.providers.email.nodemailer import SmtpProvider
from herald.providers.email.resend import ResendProvider
from herald.providers.http import send_raw
from herald.providers.push.fcm import FcmProvider
from tests.fixtures.peers import (
    FLOOD_BYTES,
    FLOOD_IN_FLIGHT,
    LOCAL_PEERS,
    FloodingHttp2Server,
    FloodingHttpServer,
    FloodingSmtpServer,
    HttpPeer,
    RsaKey,
)

EMAIL = EmailMessage(to=["ada@example.com"], subject="Hi", html="<p>Hi</p>", from_address="herald@example.com")


@pytest.mark.parametrize("chunked", [False, True], ids=["with-a-length", "chunked"])
async def test_an_answer_past_the_limit_is_cut_and_its_connection_closed(http: httpx.AsyncClient, chunked: bool) -> None:
    server = await FloodingHttpServer(chunked=chunked).start()
    try:
        answer = await send_raw(http, "p", "POST", f"{server.url}/send", json={})
        written = await server.wait_finished()
    finally:
        server.close()

    assert answer.status_code == 200
    assert answer_is_cut(answer) and len(answer.content) == MAX_ANSWER_BYTES
    assert answer.content.startswith(b'{"id": "flood-1"')
    assert written < FLOOD_IN_FLIGHT < FLOOD_BYTES


async def test_a_compressed_answer_is_cut_once_decoded(http: httpx.AsyncClient) -> None:
    """16 MB of zeros deflated to 16 KB: the limit applies to what it inflates to."""
    server = await FloodingHttpServer(gzip=True).start()
    try:
        answer = await send_raw(http, "p", "POST", f"{server.url}/send", json={})
    finally:
        server.close()

    assert answer_is_cut(answer) and len(answer.content) == MAX_ANSWER_BYTES
    assert "content-encoding" not in answer.headers  # held decoded


@pytest.mark.parametrize("size", [MAX_ANSWER_BYTES, MAX_ANSWER_BYTES + 1])
async def test_the_limit_is_exact(peer: HttpPeer, http: httpx.AsyncClient, size: int) -> None:
    peer.route("POST", "/sized", lambda recorded: Response(content=b"x" * size, media_type="text/plain"))

    answer = await send_raw(http, "p", "POST", f"{peer.url}/sized", json={})

    assert len(answer.content) == MAX_ANSWER_BYTES
    assert answer_is_cut(answer) is (size > MAX_ANSWER_BYTES)


async def test_a_cut_success_is_a_send_without_an_id_and_a_cut_error_is_judged_by_its_status(http: httpx.AsyncClient) -> None:
    """A JSON answer cut short does not parse: the status decides, as for any answer that cannot be read."""
    accepted = await FloodingHttpServer(status=200).start()
    failing = await FloodingHttpServer(status=503).start()
    try:
        result = await ResendProvider({"apiKey": "re_x", "baseUrl": accepted.url}, http).send(EMAIL)
        with pytest.raises(ProviderError) as raised:
            await ResendProvider({"apiKey": "re_x", "baseUrl": failing.url}, http).send(EMAIL)
        written = [await accepted.wait_finished(), await failing.wait_finished()]
    finally:
        accepted.close()
        failing.close()

    assert result.provider_message_id is None
    assert raised.value.transient is True and raised.value.status_code == 503
    assert raised.value.message == "resend answered 503: Flooding (no JSON error field)"
    assert max(written) < FLOOD_IN_FLIGHT


async def test_an_http2_answer_past_the_limit_is_cut() -> None:
    """APNs' path (httpx, HTTP/2): the stream is left unread past the limit, so flow control stops the server."""
    server = await FloodingHttp2Server().start()
    try:
        async with create_http_client(timeout=10.0, verify=server.client_context(), outbound=LOCAL_PEERS) as client:
            answer = await send_raw(client, "apns", "POST", f"{server.url}/3/device/t", json={}, http2=True)
        written = await server.wait_finished()
    finally:
        server.close()

    assert answer.extensions["http_version"] == b"HTTP/2"
    assert answer_is_cut(answer) and len(answer.content) == MAX_ANSWER_BYTES
    assert written < FLOOD_IN_FLIGHT < FLOOD_BYTES


async def test_an_smtp_reply_past_its_limit_fails_and_the_connection_is_closed(http: httpx.AsyncClient) -> None:
    """aiosmtplib refuses a reply over 32 KB; the send fails for good (the server's replies cannot be read) and hangs up."""
    server = await FloodingSmtpServer().start()
    try:
        provider = SmtpProvider({"host": "127.0.0.1", "port": str(server.port), "ignoreTls": True}, http)
        with pytest.raises(ProviderError) as raised:
            await provider.send(EMAIL)
        written = await server.wait_finished()
    finally:
        server.close()

    assert raised.value.transient is False and "Response too long" in raised.value.message
    assert written < FLOOD_IN_FLIGHT < FLOOD_BYTES


async def test_the_fcm_token_endpoint_answer_is_cut(http: httpx.AsyncClient, rsa_key: RsaKey) -> None:
    """The token endpoint (google-auth over httpx's synchronous client) answering without end: no token, and it hangs up."""
    server = await FloodingHttpServer().start()
    account = {
        "type": "service_account",
        "project_id": "p",
        "private_key_id": uuid.uuid4().hex,
        "private_key": rsa_key.private_pem,
        "client_email": "fcm@p.iam.gserviceaccount.com",
        "token_uri": f"{server.url}/token",
    }
    try:
        with pytest.raises(ProviderError) as raised:
            await FcmProvider({"serviceAccount": json.dumps(account)}, http).send(PushMessage(tokens=["t"], title="t", content="c"))
        written = await server.wait_finished()
    finally:
        server.close()

    assert raised.value.transient is True
    assert raised.value.message == "fcm: the token endpoint gave no token: answered 200 without an access token"
    assert written < FLOOD_IN_FLIGHT < FLOOD_BYTES
