"""Brevo (formerly Sendinblue) transactional email API; Novu's provider id is ``sendinblue``."""

from __future__ import annotations

import base64
from typing import Any, ClassVar

from herald.providers.base import EmailMessage, EmailProvider, SendResult
from herald.providers.http import error_from_response, json_object, send_raw

DEFAULT_BASE_URL = "https://api.brevo.com"


class BrevoProvider(EmailProvider):
    """Credentials: apiKey, from, senderName."""

    provider_id: ClassVar[str] = "sendinblue"
    display_name: ClassVar[str] = "Brevo"
    required_credentials: ClassVar[tuple[str, ...]] = ("apiKey",)
    optional_credentials: ClassVar[tuple[str, ...]] = ("baseUrl",)

    async def send(self, message: EmailMessage) -> SendResult:
        api_key = self.require("apiKey")
        from_address, sender_name = self.sender(message)
        sender: dict[str, str] = {"email": from_address}
        if sender_name:
            sender["name"] = sender_name
        body: dict[str, Any] = {
            "sender": sender,
            "to": [{"email": address} for address in message.to],
            "subject": message.subject,
            "htmlContent": message.html,
        }
        if message.text:
            body["textContent"] = message.text
        if message.cc:
            body["cc"] = [{"email": address} for address in message.cc]
        if message.bcc:
            body["bcc"] = [{"email": address} for address in message.bcc]
        if message.reply_to:
            body["replyTo"] = {"email": message.reply_to}
        if message.headers:
            body["headers"] = dict(message.headers)
        if self.idempotency_key is not None:
            # Brevo reads it among the headers, keeps it 30 minutes and refuses a repeat (duplicate_parameter).
            body["headers"] = {**body.get("headers", {}), "idempotencyKey": self.idempotency_key}
        if message.attachments:
            body["attachment"] = [
                {"name": attachment.name, "content": base64.b64encode(attachment.content).decode()}
                for attachment in message.attachments
            ]

        response = await send_raw(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(DEFAULT_BASE_URL)}/v3/smtp/email",
            json=body,
            headers={"api-key": api_key, "accept": "application/json"},
        )
        answer = json_object(response)
        if self.idempotency_key is not None and _repeated_key(response.status_code, answer):
            # Brevo took a request with this message's key already: it has the message (no id in this answer).
            return SendResult(provider_message_id=None, raw=answer, deduplicated=True)
        if not response.is_success:
            raise error_from_response(self.provider_id, response)
        return SendResult(provider_message_id=answer.get("messageId"), raw=answer)


def _repeated_key(status: int, answer: dict[str, Any]) -> bool:
    """Brevo's answer to a key it has seen: 400 ``duplicate_parameter``, "Email for the idempotency key has already been processed"."""
    message = answer.get("message")
    return status == 400 and answer.get("code") == "duplicate_parameter" and isinstance(message, str) and "idempotency key" in message.lower()
