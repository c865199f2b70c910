"""Microsoft Teams incoming webhooks (Office 365 connectors and Power Automate workflows)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from herald.providers.base import ChatMessage, ChatProvider, SendResult
from herald.providers.http import send_request


class MsTeamsProvider(ChatProvider):
    """Credentials: webhookUrl (fallback for the subscriber's).

    Content that is a JSON object is posted as it is (a MessageCard or an
    Adaptive Card message written by the workflow author); plain text is
    wrapped in an Adaptive Card, which both kinds of Teams webhook accept.
    """

    provider_id: ClassVar[str] = "msteams"
    display_name: ClassVar[str] = "Microsoft Teams"

    async def send(self, message: ChatMessage) -> SendResult:
        url = self.webhook_url(message)
        response = await send_request(self.http, self.provider_id, "POST", url, json=_payload(message))
        return SendResult(
            provider_message_id=response.headers.get("request-id"),
            raw={"status": response.status_code},
        )


def _payload(message: ChatMessage) -> dict[str, Any]:
    try:
        written = json.loads(message.content)
    except ValueError:
        written = None
    if isinstance(written, dict):
        return written
    blocks: list[dict[str, Any]] = []
    if message.title:
        blocks.append({"type": "TextBlock", "text": message.title, "weight": "Bolder", "size": "Medium", "wrap": True})
    blocks.append({"type": "TextBlock", "text": message.content, "wrap": True})
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": {
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.4",
                    "body": blocks,
                },
            }
        ],
    }
