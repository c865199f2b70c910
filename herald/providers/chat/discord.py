"""Discord webhooks."""

from __future__ import annotations

from typing import ClassVar

import httpx

from herald.providers.base import ChatMessage, ChatProvider, SendResult
from herald.providers.http import json_object, send_request


class DiscordProvider(ChatProvider):
    """Credentials: webhookUrl (fallback for the subscriber's)."""

    provider_id: ClassVar[str] = "discord"
    display_name: ClassVar[str] = "Discord"

    async def send(self, message: ChatMessage) -> SendResult:
        url = self.webhook_url(message)
        # wait=true makes Discord answer with the created message (and its id) instead of 204.
        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            url,
            params=_with_wait(url),
            json={"content": message.content},
        )
        answer = json_object(response)
        return SendResult(provider_message_id=answer.get("id"), raw=answer or {"status": response.status_code})


def _with_wait(url: str) -> dict[str, str]:
    try:
        existing = dict(httpx.URL(url).params)
    except httpx.InvalidURL:
        existing = {}
    return {**existing, "wait": "true"}
