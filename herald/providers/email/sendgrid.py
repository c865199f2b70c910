"""SendGrid v3 Mail Send API."""

from __future__ import annotations

import base64
from typing import Any, ClassVar

from herald.providers.base import EmailMessage, EmailProvider, SendResult
from herald.providers.http import json_object, send_request

DEFAULT_BASE_URL = "https://api.sendgrid.com"
EU_BASE_URL = "https://api.eu.sendgrid.com"


class SendGridProvider(EmailProvider):
    """Credentials: apiKey, from, senderName, region (``eu`` for the EU data centre), ipPoolName."""

    provider_id: ClassVar[str] = "sendgrid"
    display_name: ClassVar[str] = "SendGrid"
    required_credentials: ClassVar[tuple[str, ...]] = ("apiKey",)
    optional_credentials: ClassVar[tuple[str, ...]] = ("ipPoolName", "region", "baseUrl")

    async def send(self, message: EmailMessage) -> SendResult:
        api_key = self.require("apiKey")
        from_address, sender_name = self.sender(message)
        default = EU_BASE_URL if (self.credential("region") or "").lower() == "eu" else DEFAULT_BASE_URL

        personalization: dict[str, Any] = {"to": [{"email": address} for address in message.to]}
        if message.cc:
            personalization["cc"] = [{"email": address} for address in message.cc]
        if message.bcc:
            personalization["bcc"] = [{"email": address} for address in message.bcc]
        sender: dict[str, str] = {"email": from_address}
        if sender_name:
            sender["name"] = sender_name
        # SendGrid wants text/plain before text/html and refuses empty values.
        content = [{"type": "text/plain", "value": message.text}] if message.text else []
        content.append({"type": "text/html", "value": message.html or " "})
        body: dict[str, Any] = {
            "personalizations": [personalization],
            "from": sender,
            "subject": message.subject,
            "content": content,
        }
        if message.reply_to:
            body["reply_to"] = {"email": message.reply_to}
        if message.headers:
            body["headers"] = dict(message.headers)
        if message.attachments:
            body["attachments"] = [
                {
                    "content": base64.b64encode(attachment.content).decode(),
                    "filename": attachment.name,
                    "type": attachment.mime,
                    "disposition": "attachment",
                }
                for attachment in message.attachments
            ]
        if ip_pool := self.credential("ipPoolName"):
            body["ip_pool_name"] = ip_pool

        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(default)}/v3/mail/send",
            json=body,
            headers={"authorization": f"Bearer {api_key}"},
        )
        # 202 with an empty body; the id is in a header.
        return SendResult(
            provider_message_id=response.headers.get("x-message-id"),
            raw=json_object(response) or {"status": response.status_code},
        )
