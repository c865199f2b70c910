"""Mattermost incoming webhooks."""

from __future__ import annotations

from typing import Any, ClassVar

from herald.providers.base import ChatMessage, ChatProvider, SendResult
from herald.providers.http import send_request


class MattermostProvider(ChatProvider):
    """Credentials: webhookUrl (fallback for the subscriber's)."""

    provider_id: ClassVar[str] = "mattermost"
    display_name: ClassVar[str] = "Mattermost"

    async def send(self, message: ChatMessage) -> SendResult:
        url = self.webhook_url(message)
        body: dict[str, Any] = {"text": message.content}
        if message.channel:
            body["channel"] = message.channel
        response = await send_request(self.http, self.provider_id, "POST", url, json=body)
        return SendResult(provider_message_id=None, raw={"status": response.status_code})
