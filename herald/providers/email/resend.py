"""Resend Emails API."""

from __future__ import annotations

import base64
from typing import Any, ClassVar

from herald.providers.base import EmailMessage, EmailProvider, SendResult
from herald.providers.email.mime import format_address
from herald.providers.http import json_object, send_request

DEFAULT_BASE_URL = "https://api.resend.com"


class ResendProvider(EmailProvider):
    """Credentials: apiKey, from, senderName."""

    provider_id: ClassVar[str] = "resend"
    display_name: ClassVar[str] = "Resend"
    required_credentials: ClassVar[tuple[str, ...]] = ("apiKey",)

    async def send(self, message: EmailMessage) -> SendResult:
        api_key = self.require("apiKey")
        from_address, sender_name = self.sender(message)
        body: dict[str, Any] = {
            "from": format_address(from_address, sender_name),
            "to": list(message.to),
            "subject": message.subject,
            "html": message.html,
        }
        if message.text:
            body["text"] = message.text
        if message.cc:
            body["cc"] = list(message.cc)
        if message.bcc:
            body["bcc"] = list(message.bcc)
        if message.reply_to:
            body["reply_to"] = message.reply_to
        if message.headers:
            body["headers"] = dict(message.headers)
        if message.attachments:
            body["attachments"] = [
                {
                    "filename": attachment.name,
                    "content": base64.b64encode(attachment.content).decode(),
                    "content_type": attachment.mime,
                }
                for attachment in message.attachments
            ]

        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(DEFAULT_BASE_URL)}/emails",
            json=body,
            headers={"authorization": f"Bearer {api_key}"},
        )
        answer = json_object(response)
        return SendResult(provider_message_id=answer.get("id"), raw=answer)
