"""MessageBird (Bird) SMS Messaging API."""

from __future__ import annotations

from typing import ClassVar

from herald.providers.base import SendResult, SmsMessage, SmsProvider
from herald.providers.http import json_object, send_request

DEFAULT_BASE_URL = "https://rest.messagebird.com"


class MessageBirdProvider(SmsProvider):
    """Credentials: accessKey, from (originator)."""

    provider_id: ClassVar[str] = "messagebird"
    display_name: ClassVar[str] = "MessageBird"
    required_credentials: ClassVar[tuple[str, ...]] = ("accessKey",)
    optional_credentials: ClassVar[tuple[str, ...]] = ("baseUrl",)

    async def send(self, message: SmsMessage) -> SendResult:
        access_key = self.require("accessKey")
        self.check_recipient(message)
        body = {"originator": self.sender(message), "recipients": [message.to], "body": message.content}

        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(DEFAULT_BASE_URL)}/messages",
            json=body,
            headers={"authorization": f"AccessKey {access_key}"},
        )
        answer = json_object(response)
        return SendResult(provider_message_id=answer.get("id"), raw=answer)
