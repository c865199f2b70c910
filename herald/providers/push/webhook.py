"""Generic push webhook (``push-webhook``): the notification as JSON, optionally HMAC-signed."""

from __future__ import annotations

import json
from typing import ClassVar

from herald.providers.base import PushMessage, PushProvider, SendResult
from herald.providers.http import json_object, send_request
from herald.providers.signing import (
    WEBHOOK_SIGNATURE_HEADER,
    webhook_secret,
    webhook_signature,
)


class PushWebhookProvider(PushProvider):
    """Credentials: webhookUrl, secretKey, hmac.

    Body, as Novu's push-webhook sends it: ``{"target": [tokens], "title",
    "content", "payload", "overrides"}``. Signed like chat-webhook: hex
    HMAC-SHA256 of the raw body in ``x-novu-signature``, when there is a
    secretKey or ``hmac`` is true, and never when ``hmac`` is false.
    """

    provider_id: ClassVar[str] = "push-webhook"
    display_name: ClassVar[str] = "Push Webhook"
    required_credentials: ClassVar[tuple[str, ...]] = ("webhookUrl",)

    async def send(self, message: PushMessage) -> SendResult:
        tokens = self.check_tokens(message)
        url = self.require("webhookUrl")
        body = json.dumps(
            {
                "target": tokens,
                "title": message.title,
                "content": message.content,
                "payload": message.data,
                "overrides": message.overrides,
            }
        ).encode()
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
