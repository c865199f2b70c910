"""Server-side request forgery: providers connect only where the outbound policy allows.

A listener on 127.0.0.1 stands for an internal service. With the default
policy nothing reaches it, whichever way its address is given (an HTTP
provider's baseUrl, a name that resolves to it, a chat webhook URL, the FCM
token endpoint, an SMTP host); with HERALD_OUTBOUND_ALLOW naming it, it does.
TLS still verifies the host name when the connection is made by address.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from herald.kit.outbound import OutboundPolicy
from herald.providers import ChatMessage, EmailMessage, ProviderError, PushMessage, create_http_client
from herald.providers.chat.slack import SlackProvider
from herald.providers.chat.webhook import ChatWebhookProvider
from herald.providers.email.nodemailer import SmtpProvider
from herald.providers.email.sendgrid import SendGridProvider
from herald.providers.push.apns import ApnsProvider
from herald.providers.push.fcm import FcmProvider
from tests.fixtures import peers
from tests.fixtures.peers import LOCAL_PEERS, CountingListener, EcKey, Http2Peer, RsaKey, SmtpPeer, TlsFiles

EMAIL = EmailMessage(to=["ada@example.com"], subject="Hi", html="<p>Hi</p>", text="Hi", from_address="herald@example.com")
SETTING_NAMED = "allow it with HERALD_OUTBOUND_ALLOW"


@pytest.fixture
def listener() -> Iterator[CountingListener]:
    server = CountingListener().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def strict_http() -> AsyncIterator[httpx.AsyncClient]:
    """The client as production builds it without HERALD_OUTBOUND_ALLOW."""
    async with create_http_client(timeout=5.0) as client:
        yield client


def resolve_names(monkeypatch: pytest.MonkeyPatch, names: dict[str, str]) -> list[str]:
    """Make the event loop's resolver answer ``names`` (name -> IPv4 address); the names looked up are recorded."""
    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo
    looked_up: list[str] = []

    async def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        looked_up.append(host)
        if host in names:
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (names[host], int(port)))]
        return await real(host, port, *args, **kwargs)

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    return looked_up


def assert_refused(error: ProviderError, provider_id: str, refused: str) -> None:
    assert error.transient is False
    assert error.message.startswith(f"{provider_id}: outbound policy refused ")
    assert refused in error.message
    assert error.message.endswith(SETTING_NAMED)


async def test_an_http_providers_base_url_on_loopback_is_refused(
    listener: CountingListener, strict_http: httpx.AsyncClient
) -> None:
    provider = SendGridProvider({"apiKey": "SG.k", "baseUrl": listener.url}, strict_http)

    with pytest.raises(ProviderError) as raised:
        await provider.send(EMAIL)

    assert_refused(raised.value, "sendgrid", "refused 127.0.0.1 (a loopback address)")
    assert listener.connections == 0


async def test_a_name_that_resolves_to_loopback_is_refused(
    listener: CountingListener, strict_http: httpx.AsyncClient
) -> None:
    provider = SendGridProvider({"apiKey": "SG.k", "baseUrl": f"http://localhost:{listener.port}"}, strict_http)

    with pytest.raises(ProviderError) as raised:
        await provider.send(EMAIL)

    assert_refused(raised.value, "sendgrid", "(localhost resolves to a loopback address)")
    assert listener.connections == 0


async def test_a_name_that_resolves_to_the_metadata_address_is_refused(
    strict_http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_names(monkeypatch, {"hooks.example": "169.254.169.254"})

    with pytest.raises(ProviderError) as raised:
        await ChatWebhookProvider({}, strict_http).send(ChatMessage(content="x", webhook_url="http://hooks.example/latest/meta-data/"))

    assert_refused(raised.value, "chat-webhook", "refused 169.254.169.254 (hooks.example resolves to the cloud metadata address)")


@pytest.mark.parametrize("provider_cls", [ChatWebhookProvider, SlackProvider])
async def test_a_chat_webhook_url_on_loopback_is_refused(
    provider_cls: type, listener: CountingListener, strict_http: httpx.AsyncClient
) -> None:
    with pytest.raises(ProviderError) as raised:
        await provider_cls({}, strict_http).send(ChatMessage(content="x", webhook_url=f"{listener.url}/hook"))

    assert_refused(raised.value, provider_cls.provider_id, "refused 127.0.0.1 (a loopback address)")
    assert listener.connections == 0


async def test_an_ipv4_mapped_ipv6_webhook_url_is_refused(strict_http: httpx.AsyncClient) -> None:
    with pytest.raises(ProviderError) as raised:
        await ChatWebhookProvider({}, strict_http).send(ChatMessage(content="x", webhook_url="http://[::ffff:127.0.0.1]:9/hook"))

    assert_refused(raised.value, "chat-webhook", "refused ::ffff:127.0.0.1 (a loopback address)")


async def test_the_fcm_token_endpoint_on_loopback_is_refused(
    listener: CountingListener, rsa_key: RsaKey, strict_http: httpx.AsyncClient
) -> None:
    account = {
        "type": "service_account",
        "project_id": "p",
        "private_key": rsa_key.private_pem,
        "client_email": "fcm@p.iam.gserviceaccount.com",
        "token_uri": f"{listener.url}/token",
    }
    provider = FcmProvider({"serviceAccount": json.dumps(account)}, strict_http)

    with pytest.raises(ProviderError) as raised:
        await provider.send(PushMessage(tokens=["t"], title="t", content="c"))

    assert_refused(raised.value, "fcm", "refused 127.0.0.1 (a loopback address)")
    assert listener.connections == 0


async def test_an_smtp_host_on_loopback_is_refused(strict_http: httpx.AsyncClient) -> None:
    smtp = SmtpPeer().start()
    try:
        for host in ("127.0.0.1", "localhost"):
            with pytest.raises(ProviderError) as raised:
                await SmtpProvider({"host": host, "port": str(smtp.port), "ignoreTls": True}, strict_http).send(EMAIL)
            assert_refused(raised.value, "nodemailer", "a loopback address")
        assert smtp.received == []
    finally:
        smtp.stop()


async def test_an_smtp_host_on_loopback_is_not_even_connected_to(
    listener: CountingListener, strict_http: httpx.AsyncClient
) -> None:
    with pytest.raises(ProviderError):
        await SmtpProvider({"host": "127.0.0.1", "port": str(listener.port)}, strict_http).send(EMAIL)

    assert listener.connections == 0


async def test_allowed_addresses_are_reached(listener: CountingListener) -> None:
    smtp = SmtpPeer().start()
    try:
        async with create_http_client(timeout=5.0, outbound=OutboundPolicy.allowing(["127.0.0.1"])) as http:
            await ChatWebhookProvider({}, http).send(ChatMessage(content="x", webhook_url=f"{listener.url}/hook"))
            await SmtpProvider({"host": "127.0.0.1", "port": str(smtp.port), "ignoreTls": True}, http).send(EMAIL)
    finally:
        smtp.stop()

    assert listener.connections == 1
    [mail] = smtp.received
    assert mail.rcpt_tos == ["ada@example.com"]


async def test_a_host_name_entry_lets_that_name_through(listener: CountingListener, monkeypatch: pytest.MonkeyPatch) -> None:
    resolve_names(monkeypatch, {"hooks.internal": "127.0.0.1", "other.internal": "127.0.0.1"})
    async with create_http_client(timeout=5.0, outbound=OutboundPolicy.allowing(["hooks.internal"])) as http:
        await ChatWebhookProvider({}, http).send(ChatMessage(content="x", webhook_url=f"http://hooks.internal:{listener.port}/h"))
        with pytest.raises(ProviderError) as raised:
            await ChatWebhookProvider({}, http).send(ChatMessage(content="x", webhook_url=f"http://other.internal:{listener.port}/h"))

    assert listener.connections == 1
    assert_refused(raised.value, "chat-webhook", "(other.internal resolves to a loopback address)")


async def test_environment_proxies_do_not_carry_requests_around_the_policy(
    listener: CountingListener, strict_http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy on an allowed address would connect anywhere on Herald's behalf.
    monkeypatch.setenv("HTTP_PROXY", "http://93.184.216.34:3128")
    monkeypatch.setenv("ALL_PROXY", "http://93.184.216.34:3128")
    async with create_http_client(timeout=5.0) as http:
        with pytest.raises(ProviderError) as raised:
            await ChatWebhookProvider({}, http).send(ChatMessage(content="x", webhook_url=f"{listener.url}/hook"))

    assert_refused(raised.value, "chat-webhook", "refused 127.0.0.1")


# TLS: connected by the checked address, verified against the name -------------


@pytest.fixture(scope="module")
def h2_peer() -> Iterator[Http2Peer]:
    server = Http2Peer().start()
    yield server
    server.stop()


async def test_tls_still_verifies_the_host_name_when_connecting_by_address(
    h2_peer: Http2Peer, p8_key: EcKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The peer's certificate names localhost and 127.0.0.1, not apns.test: checked against the
    address, the second send would pass; checked against the name, as it must be, it fails."""
    looked_up = resolve_names(monkeypatch, {"localhost": "127.0.0.1", "apns.test": "127.0.0.1"})
    peers.install_apns(h2_peer, key=p8_key, key_id="KEY1234567", team_id="TEAM123456", bundle_id="test.herald.app")
    credentials = {
        "secretKey": p8_key.private_pem,
        "apiKey": "KEY1234567",
        "projectName": "TEAM123456",
        "applicationId": "test.herald.app",
    }
    message = PushMessage(tokens=["a" * 64], title="t", content="c")
    async with create_http_client(timeout=5.0, verify=h2_peer.client_context(), outbound=LOCAL_PEERS) as http:
        result = await ApnsProvider({**credentials, "baseUrl": f"https://localhost:{h2_peer.port}"}, http).send(message)
        with pytest.raises(ProviderError) as raised:
            await ApnsProvider({**credentials, "baseUrl": f"https://apns.test:{h2_peer.port}"}, http).send(message)

    assert result.provider_message_id
    assert looked_up == ["localhost", "apns.test"]  # once each, then connected by address
    assert "CERTIFICATE_VERIFY_FAILED" in raised.value.message and "apns.test" in raised.value.message
    h2_peer.reset()


async def test_smtp_tls_still_verifies_the_host_name_when_connecting_by_address(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tls: TlsFiles = peers.self_signed_certificate(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.cert))  # the system trust, as aiosmtplib reads it
    resolve_names(monkeypatch, {"localhost": "127.0.0.1", "mail.test": "127.0.0.1"})
    smtp = SmtpPeer(implicit_tls=tls).start()
    try:
        async with create_http_client(timeout=5.0, outbound=LOCAL_PEERS) as http:
            await SmtpProvider({"host": "localhost", "port": str(smtp.port), "secure": True}, http).send(EMAIL)
            with pytest.raises(ProviderError) as raised:
                await SmtpProvider({"host": "mail.test", "port": str(smtp.port), "secure": True}, http).send(EMAIL)
    finally:
        smtp.stop()

    [mail] = smtp.received
    assert mail.tls is True
    assert raised.value.transient is False
    assert "mail.test" in raised.value.message and "CERTIFICATE_VERIFY_FAILED" in raised.value.message


# What comes back of an answer ------------------------------------------------


async def test_a_non_json_error_answer_is_not_repeated(listener: CountingListener) -> None:
    page = CountingListener(answer=b"<html>internal admin: token=abc123</html>", content_type="text/html")
    page._answer = page._answer.replace(b"200 OK", b"502 Bad Gateway")
    page.start()
    try:
        async with create_http_client(timeout=5.0, outbound=LOCAL_PEERS) as http:
            with pytest.raises(ProviderError) as raised:
                await ChatWebhookProvider({}, http).send(ChatMessage(content="x", webhook_url=f"{page.url}/hook"))
    finally:
        page.stop()

    assert raised.value.message == "chat-webhook answered 502: Bad Gateway (no JSON error field)"
