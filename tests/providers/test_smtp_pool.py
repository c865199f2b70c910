"""SMTP connections kept open between sends (providers/email/smtp_pool.py), counted at an aiosmtpd peer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from herald.providers import EmailMessage, create_http_client
from herald.providers.email.nodemailer import SmtpProvider
from tests.fixtures.peers import LOCAL_PEERS, SmtpPeer

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")


def message(number: int) -> EmailMessage:
    return EmailMessage(
        to=[f"reader{number}@example.com"],
        subject=f"Message {number}",
        html=f"<p>Number {number}</p>",
        from_address="news@herald.test",
    )


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """A client of this test's own, so its pool starts empty."""
    async with create_http_client(timeout=5.0, outbound=LOCAL_PEERS) as http:
        yield http


@pytest.fixture
def peer() -> Iterator[SmtpPeer]:
    server = SmtpPeer(users={"mailer": "s3cret", "other": "different"}).start()
    yield server
    server.stop()


def provider(peer: SmtpPeer, http: httpx.AsyncClient, integration_id: str = "int-1", **more: Any) -> SmtpProvider:
    credentials = {"host": "127.0.0.1", "port": str(peer.port), "user": "mailer", "password": "s3cret", **more}
    return SmtpProvider(credentials, http, integration_id=integration_id)


async def test_many_messages_through_one_integration_share_a_few_connections(
    peer: SmtpPeer, client: httpx.AsyncClient
) -> None:
    sender = provider(peer, client)
    # One after the other: one connection carries them all.
    for number in range(10):
        await sender.send(message(number))
    assert len(peer.received) == 10
    assert peer.connections() == 1
    # Concurrently: no more than the pool's bound, each connection one send at a time.
    results = await asyncio.gather(*(provider(peer, client).send(message(number)) for number in range(10, 50)))
    assert len(results) == 50 - 10
    assert len(peer.received) == 50
    assert {mail.login for mail in peer.received} == {"mailer"}
    assert 1 <= peer.connections() <= 1 + client.smtp_pool.size  # type: ignore[attr-defined]
    assert sorted(mail.rcpt_tos[0] for mail in peer.received) == sorted(
        f"reader{number}@example.com" for number in range(50)
    )


async def test_a_connection_the_server_dropped_is_replaced_transparently(
    peer: SmtpPeer, client: httpx.AsyncClient
) -> None:
    await provider(peer, client).send(message(1))
    first = peer.connections()
    peer.drop_connections()
    await asyncio.sleep(0.05)
    await provider(peer, client).send(message(2))
    assert [mail.rcpt_tos for mail in peer.received] == [["reader1@example.com"], ["reader2@example.com"]]
    assert first == 1 and peer.connections() == 2


async def test_a_dropped_connection_not_yet_noticed_is_replaced_too(peer: SmtpPeer, client: httpx.AsyncClient) -> None:
    """The server's close has not reached the client when it sends: the first command fails, the send goes again."""
    await provider(peer, client).send(message(1))
    [pooled] = client.smtp_pool._slots[next(iter(client.smtp_pool._slots))].idle  # type: ignore[attr-defined]
    # The connection looks open to the pool, but its next write meets a closed socket.
    pooled.client.transport.get_extra_info("socket").shutdown(2)  # type: ignore[union-attr]
    await provider(peer, client).send(message(2))
    assert [mail.rcpt_tos for mail in peer.received] == [["reader1@example.com"], ["reader2@example.com"]]
    assert peer.connections() == 2


async def test_changed_credentials_do_not_reuse_the_old_connection(peer: SmtpPeer, client: httpx.AsyncClient) -> None:
    await provider(peer, client).send(message(1))
    await provider(peer, client).send(message(2))
    await provider(peer, client, user="other", password="different").send(message(3))
    await provider(peer, client, user="other", password="different").send(message(4))
    assert [mail.login for mail in peer.received] == ["mailer", "mailer", "other", "other"]
    by_connection = {mail.peer for mail in peer.received[:2]}, {mail.peer for mail in peer.received[2:]}
    assert len(by_connection[0]) == 1 and len(by_connection[1]) == 1
    assert by_connection[0] != by_connection[1]
    # The old credentials' connection was closed, not kept beside the new one.
    assert client.smtp_pool.idle_count() == 1  # type: ignore[attr-defined]


async def test_two_integrations_do_not_share_connections(peer: SmtpPeer, client: httpx.AsyncClient) -> None:
    await provider(peer, client, integration_id="int-a").send(message(1))
    await provider(peer, client, integration_id="int-b").send(message(2))
    assert peer.connections() == 2


async def test_a_failed_send_closes_its_connection(peer: SmtpPeer, client: httpx.AsyncClient) -> None:
    peer.refuse.add("reader1@example.com")
    with pytest.raises(Exception, match="refused"):
        await provider(peer, client).send(message(1))
    assert client.smtp_pool.idle_count() == 0  # type: ignore[attr-defined]
    await provider(peer, client).send(message(2))
    assert [mail.rcpt_tos for mail in peer.received] == [["reader2@example.com"]]


async def test_a_connection_idle_too_long_is_closed_and_the_next_send_opens_another(
    peer: SmtpPeer, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from herald.providers.email import smtp_pool

    monkeypatch.setattr(smtp_pool, "SWEEP_SECONDS", 0.0)
    client.smtp_pool.idle_seconds = 0.2  # type: ignore[attr-defined]
    await provider(peer, client).send(message(1))
    await provider(peer, client).send(message(2))
    assert peer.connections() == 1
    await asyncio.sleep(0.4)
    await provider(peer, client).send(message(3))
    assert peer.connections() == 2
    assert client.smtp_pool.idle_count() == 1  # type: ignore[attr-defined]


async def test_a_connection_carries_at_most_max_sends_messages(peer: SmtpPeer, client: httpx.AsyncClient) -> None:
    client.smtp_pool.max_sends = 3  # type: ignore[attr-defined]
    for number in range(7):
        await provider(peer, client).send(message(number))
    assert len(peer.received) == 7
    assert peer.connections() == 3
