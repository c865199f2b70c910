"""Postmark Email API."""

from __future__ import annotations

import base64
from typing import Any, ClassVar

from herald.providers.base import EmailMessage, EmailProvider, SendResult
from herald.providers.email.mime import format_address
from herald.providers.http import excerpt, json_object, send_request

DEFAULT_BASE_URL = "https://api.postmarkapp.com"


class PostmarkProvider(EmailProvider):
    """Credentials: apiKey (server token), from, senderName."""

    provider_id: ClassVar[str] = "postmark"
    display_name: ClassVar[str] = "Postmark"
    required_credentials: ClassVar[tuple[str, ...]] = ("apiKey",)
    optional_credentials: ClassVar[tuple[str, ...]] = ("baseUrl",)

    async def send(self, message: EmailMessage) -> SendResult:
        token = self.require("apiKey")
        from_address, sender_name = self.sender(message)
        body: dict[str, Any] = {
            "From": format_address(from_address, sender_name),
            "To": ", ".join(message.to),
            "Subject": message.subject,
            "HtmlBody": message.html,
        }
        if message.text:
            body["TextBody"] = message.text
        if message.cc:
            body["Cc"] = ", ".join(message.cc)
        if message.bcc:
            body["Bcc"] = ", ".join(message.bcc)
        if message.reply_to:
            body["ReplyTo"] = message.reply_to
        if message.headers:
            body["Headers"] = [{"Name": name, "Value": value} for name, value in message.headers.items()]
        if message.attachments:
            body["Attachments"] = [
                {
                    "Name": attachment.name,
                    "Content": base64.b64encode(attachment.content).decode(),
                    "ContentType": attachment.mime,
                }
                for attachment in message.attachments
            ]

        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(DEFAULT_BASE_URL)}/email",
            json=body,
            headers={"x-postmark-server-token": token, "accept": "application/json"},
        )
        answer = json_object(response)
        # A refusal always carries a non-zero ErrorCode; never count one as sent.
        if answer.get("ErrorCode") not in (None, 0):
            raise self.error(
                f"refused the email: {excerpt(str(answer.get('Message')))} (ErrorCode {excerpt(str(answer.get('ErrorCode')))})",
                transient=False,
                status_code=response.status_code,
            )
        return SendResult(provider_message_id=answer.get("MessageID"), raw=answer)
