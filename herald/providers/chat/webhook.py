"""Generic chat webhook (``chat-webhook``): the message as JSON, optionally HMAC-signed."""

from __future__ import annotations

import json
from typing import ClassVar

from herald.providers.base import ChatMessage, ChatProvider, SendResult
from herald.providers.http import json_object, send_request
from herald.providers.signing import (
    WEBHOOK_SIGNATURE_HEADER,
    webhook_secret,
    webhook_signature,
)


class ChatWebhookProvider(ChatProvider):
    """Credentials: webhookUrl (fallback for the subscriber's), secretKey, hmac.

    Body: ``{"content", "webhookUrl", "channel"?, "title"?}``. The raw body
    is signed with HMAC-SHA256, hex digest in ``x-novu-signature``, as Novu's
    own chat-webhook does, when the integration has a secretKey; ``hmac``
    overrides that when given (see ``signing.webhook_secret``).
    """

    provider_id: ClassVar[str] = "chat-webhook"
    display_name: ClassVar[str] = "Chat Webhook"

    async def send(self, message: ChatMessage) -> SendResult:
        url = self.webhook_url(message)
        document = {
            "content": message.content,
            "webhookUrl": url,
            "channel": message.channel,
            "title": message.title,
        }
        body = json.dumps({key: value for key, value in document.items() if value is not None}).encode()
        headers = {"content-type": "application/json"}
        if secret := webhook_secret(self):
            headers[WEBHOOK_SIGNATURE_HEADER] = webhook_signature(body, secret)
        response = await send_request(self.http, self.provider_id, "POST", url, content=body, headers=headers)
        answer = json_object(response)
        message_id = answer.get("id")
        return SendResult(
            provider_message_id=str(message_id) if message_id is not None else None,
            raw=answer or {"status": response.status_code},
        )
