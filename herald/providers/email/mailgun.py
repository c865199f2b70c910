"""Mailgun Messages API."""

from __future__ import annotations

from typing import Any, ClassVar

from herald.providers.base import EmailMessage, EmailProvider, SendResult
from herald.providers.email.mime import format_address
from herald.providers.http import json_object, send_request

DEFAULT_BASE_URL = "https://api.mailgun.net"
EU_BASE_URL = "https://api.eu.mailgun.net"


class MailgunProvider(EmailProvider):
    """Credentials: apiKey, domain, user (basic-auth user name, ``api`` when absent), from, senderName,
    region (``eu`` for api.eu.mailgun.net) or baseUrl."""

    provider_id: ClassVar[str] = "mailgun"
    display_name: ClassVar[str] = "Mailgun"
    required_credentials: ClassVar[tuple[str, ...]] = ("apiKey", "domain")
    optional_credentials: ClassVar[tuple[str, ...]] = ("user", "region", "baseUrl")

    async def send(self, message: EmailMessage) -> SendResult:
        api_key = self.require("apiKey")
        domain = self.require("domain")
        from_address, sender_name = self.sender(message)
        default = EU_BASE_URL if (self.credential("region") or "").lower() == "eu" else DEFAULT_BASE_URL

        form: dict[str, Any] = {
            "from": format_address(from_address, sender_name),
            "to": list(message.to),
            "subject": message.subject,
            "html": message.html,
        }
        if message.text:
            form["text"] = message.text
        if message.cc:
            form["cc"] = list(message.cc)
        if message.bcc:
            form["bcc"] = list(message.bcc)
        if message.reply_to:
            form["h:Reply-To"] = message.reply_to
        for name, value in message.headers.items():
            form[f"h:{name}"] = value
        # Attachments turn the form into multipart/form-data; otherwise it is urlencoded.
        files = [
            ("attachment", (attachment.name, attachment.content, attachment.mime)) for attachment in message.attachments
        ]

        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(default)}/v3/{domain}/messages",
            data=form,
            files=files or None,
            auth=(self.credential("user") or "api", api_key),
        )
        body = json_object(response)
        return SendResult(provider_message_id=body.get("id"), raw=body)
