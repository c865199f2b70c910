"""Resend Emails API."""

from __future__ import annotations

import base64
from typing import Any, ClassVar

from herald.providers.base import EmailMessage, EmailProvider, SendResult
from herald.providers.email.mime import format_address
from herald.providers.http import error_field, error_from_response, json_object, send_raw

DEFAULT_BASE_URL = "https://api.resend.com"


class ResendProvider(EmailProvider):
    """Credentials: apiKey, from, senderName."""

    provider_id: ClassVar[str] = "resend"
    display_name: ClassVar[str] = "Resend"
    required_credentials: ClassVar[tuple[str, ...]] = ("apiKey",)
    optional_credentials: ClassVar[tuple[str, ...]] = ("baseUrl",)

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

        headers = {"authorization": f"Bearer {api_key}"}
        if self.idempotency_key is not None:
            # Resend keeps a key 24 hours and answers a repeat with the first answer, sending nothing.
            headers["idempotency-key"] = self.idempotency_key
        response = await send_raw(
            self.http, self.provider_id, "POST", f"{self.base_url(DEFAULT_BASE_URL)}/emails", json=body, headers=headers
        )
        answer = json_object(response)
        if response.status_code == 409 and answer.get("name") in _KEY_ANSWERS:
            return self._key_answer(answer, response.status_code)
        if not response.is_success:
            raise error_from_response(self.provider_id, response)
        return SendResult(provider_message_id=answer.get("id"), raw=answer)

    def _key_answer(self, answer: dict[str, Any], status: int) -> SendResult:
        """Resend's 409s about the idempotency key (its errors reference names both).

        ``invalid_idempotent_request``: a request with this key, and another
        body, was taken already. The key is this message's (its render differs
        from one attempt to the next when a template reads the time): Resend has
        the message, and sending it again would send it twice.
        ``concurrent_idempotent_requests``: the first request with this key is
        still being processed; a later try gets its answer.
        """
        if answer.get("name") == "concurrent_idempotent_requests":
            raise self.error(f"answered {status}: {error_field(answer) or answer['name']}", transient=True, status_code=status)
        return SendResult(provider_message_id=None, raw=answer, deduplicated=True)


_KEY_ANSWERS = frozenset({"invalid_idempotent_request", "concurrent_idempotent_requests"})
