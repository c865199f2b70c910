"""Chat providers: webhook payloads, Slack's Web API, and the signed generic webhook."""

from __future__ import annotations

import json

import httpx
import pytest

from herald.providers import ChatMessage, ProviderError
from herald.providers.chat.discord import DiscordProvider
from herald.providers.chat.mattermost import MattermostProvider
from herald.providers.chat.msteams import MsTeamsProvider
from herald.providers.chat.slack import SlackProvider
from herald.providers.chat.webhook import ChatWebhookProvider
from tests.fixtures import peers
from tests.fixtures.peers import HttpPeer, hmac_hex, status_answer


async def test_slack_webhook_posts_text(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_slack(peer)

    result = await SlackProvider({}, http).send(
        ChatMessage(content="Deploy finished", webhook_url=f"{peer.url}/services/T000/B000/XXXX")
    )

    [request] = peer.requests
    assert request.json() == {"text": "Deploy finished"}
    assert result.provider_message_id is None
    assert result.raw == {"status": 200}


async def test_slack_webhook_refusal_is_permanent_with_slacks_text(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_slack(peer)

    with pytest.raises(ProviderError) as raised:
        await SlackProvider({}, http).send(ChatMessage(content="", webhook_url=f"{peer.url}/services/T000/B000/XXXX"))

    assert raised.value.message == "slack answered 400: invalid_payload"
    assert raised.value.transient is False


async def test_slack_with_a_bot_token_and_channel_uses_chat_post_message(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    peers.install_slack(peer, bot_token="xoxb-1", channels=("C0123",))
    provider = SlackProvider({"token": "xoxb-1", "channelId": "C0123", "baseUrl": peer.url}, http)

    result = await provider.send(ChatMessage(content="Deploy finished"))

    [request] = peer.requests
    assert request.path == "/api/chat.postMessage"
    assert request.json() == {"channel": "C0123", "text": "Deploy finished"}
    assert result.provider_message_id == result.raw["ts"]  # type: ignore[index]


async def test_slack_web_api_refusal_in_a_200_answer_is_an_error(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_slack(peer, bot_token="xoxb-1", channels=("C0123",))
    provider = SlackProvider({"token": "xoxb-1", "baseUrl": peer.url}, http)

    with pytest.raises(ProviderError) as missing:
        await provider.send(ChatMessage(content="hi", channel="C9999"))
    peer.route("POST", "/api/chat.postMessage", status_answer(200, {"ok": False, "error": "internal_error"}))
    with pytest.raises(ProviderError) as internal:
        await provider.send(ChatMessage(content="hi", channel="C0123"))

    assert (missing.value.transient, missing.value.message) == (
        False,
        "slack: chat.postMessage refused: channel_not_found",
    )
    assert internal.value.transient is True


async def test_discord_asks_for_the_created_message_and_keeps_the_urls_query(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    peers.install_discord(peer)

    result = await DiscordProvider({}, http).send(
        ChatMessage(content="Deploy finished", webhook_url=f"{peer.url}/api/webhooks/123/abc?thread_id=777")
    )

    [request] = peer.requests
    assert request.query == {"thread_id": "777", "wait": "true"}
    assert request.json() == {"content": "Deploy finished"}
    assert result.provider_message_id and result.provider_message_id.isdigit()


async def test_discord_error_is_reported(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_discord(peer)

    with pytest.raises(ProviderError) as raised:
        await DiscordProvider({}, http).send(ChatMessage(content="", webhook_url=f"{peer.url}/api/webhooks/123/abc"))

    assert raised.value.message == "discord answered 400: Cannot send an empty message (code 50006)"


async def test_msteams_wraps_text_in_an_adaptive_card(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    path = "/webhookb2/abc/IncomingWebhook/def"
    peers.install_msteams(peer, webhook_path=path)

    result = await MsTeamsProvider({}, http).send(
        ChatMessage(content="All systems green", title="Status", webhook_url=f"{peer.url}{path}")
    )

    [request] = peer.requests
    [attachment] = request.json()["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard"
    assert [block["text"] for block in card["body"]] == ["Status", "All systems green"]
    assert result.provider_message_id  # the request-id header


async def test_msteams_posts_a_card_written_in_the_content_as_it_is(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    path = "/webhookb2/abc/IncomingWebhook/def"
    peers.install_msteams(peer, webhook_path=path)
    card = {"@type": "MessageCard", "@context": "https://schema.org/extensions", "summary": "s", "text": "Deployed"}

    await MsTeamsProvider({}, http).send(ChatMessage(content=json.dumps(card), webhook_url=f"{peer.url}{path}"))

    [request] = peer.requests
    assert request.json() == card


async def test_mattermost_posts_text_and_channel(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_mattermost(peer)

    await MattermostProvider({}, http).send(
        ChatMessage(content="Deployed", channel="town-square", webhook_url=f"{peer.url}/hooks/xyz")
    )

    [request] = peer.requests
    assert request.json() == {"text": "Deployed", "channel": "town-square"}


async def test_chat_webhook_signs_the_raw_body_with_the_secret_key(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_signed_webhook(peer, path="/hooks/chat", secret="chat-secret")
    url = f"{peer.url}/hooks/chat"

    result = await ChatWebhookProvider({"secretKey": "chat-secret"}, http).send(
        ChatMessage(content="Deployed", channel="ops", title="CI", webhook_url=url)
    )

    [request] = peer.requests
    assert request.json() == {"content": "Deployed", "webhookUrl": url, "channel": "ops", "title": "CI"}
    assert request.headers["x-novu-signature"] == hmac_hex("chat-secret", request.body)
    assert result.provider_message_id and result.provider_message_id.startswith("hook-")


async def test_chat_webhook_with_hmac_on_signs_with_the_api_key(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_signed_webhook(peer, path="/hooks/chat", secret="the-api-key")

    await ChatWebhookProvider({"hmac": True, "apiKey": "the-api-key"}, http).send(
        ChatMessage(content="Deployed", webhook_url=f"{peer.url}/hooks/chat")
    )

    [request] = peer.requests
    assert request.headers["x-novu-signature"] == hmac_hex("the-api-key", request.body)


async def test_chat_webhook_without_a_secret_sends_unsigned(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_signed_webhook(peer, path="/hooks/chat", secret=None)

    await ChatWebhookProvider({}, http).send(ChatMessage(content="Deployed", webhook_url=f"{peer.url}/hooks/chat"))

    [request] = peer.requests
    assert "x-novu-signature" not in request.headers


@pytest.mark.parametrize("hmac_off", [False, "false"])
async def test_chat_webhook_with_hmac_off_sends_unsigned_even_with_a_secret(
    peer: HttpPeer, http: httpx.AsyncClient, hmac_off: object
) -> None:
    peers.install_signed_webhook(peer, path="/hooks/chat", secret=None)

    await ChatWebhookProvider({"hmac": hmac_off, "secretKey": "chat-secret"}, http).send(
        ChatMessage(content="Deployed", webhook_url=f"{peer.url}/hooks/chat")
    )

    [request] = peer.requests
    assert "x-novu-signature" not in request.headers


async def test_chat_webhook_with_hmac_on_and_no_secret_is_a_permanent_error(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    with pytest.raises(ProviderError) as raised:
        await ChatWebhookProvider({"hmac": "true"}, http).send(
            ChatMessage(content="x", webhook_url=f"{peer.url}/hooks/chat")
        )

    assert raised.value.transient is False
    assert raised.value.message == "chat-webhook: hmac is on but credential secretKey is missing"
    assert peer.requests == []


async def test_the_subscribers_webhook_wins_and_the_integrations_is_the_fallback(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    peers.install_mattermost(peer, webhook_path="/hooks/subscriber")
    peers.install_mattermost(peer, webhook_path="/hooks/integration")
    provider = MattermostProvider({"webhookUrl": f"{peer.url}/hooks/integration"}, http)

    await provider.send(ChatMessage(content="one", webhook_url=f"{peer.url}/hooks/subscriber"))
    await provider.send(ChatMessage(content="two"))

    assert [request.path for request in peer.requests] == ["/hooks/subscriber", "/hooks/integration"]


@pytest.mark.parametrize(
    "provider_cls", [SlackProvider, DiscordProvider, MsTeamsProvider, MattermostProvider, ChatWebhookProvider]
)
async def test_no_webhook_url_anywhere_is_a_permanent_error(provider_cls: type, http: httpx.AsyncClient) -> None:
    with pytest.raises(ProviderError) as raised:
        await provider_cls({}, http).send(ChatMessage(content="hello"))

    assert raised.value.transient is False
    assert "no webhook URL" in raised.value.message


async def test_an_invalid_webhook_url_is_a_permanent_error(http: httpx.AsyncClient) -> None:
    with pytest.raises(ProviderError) as raised:
        await DiscordProvider({}, http).send(ChatMessage(content="hello", webhook_url="ftp://example.test/hook"))

    assert raised.value.transient is False
