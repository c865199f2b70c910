"""Telnyx Messaging API v2."""

from __future__ import annotations

from typing import Any, ClassVar

from herald.providers.base import SendResult, SmsMessage, SmsProvider
from herald.providers.http import json_object, send_request

DEFAULT_BASE_URL = "https://api.telnyx.com"


class TelnyxProvider(SmsProvider):
    """Credentials: apiKey, from, messageProfileId (optional when ``from`` is a number of a profile)."""

    provider_id: ClassVar[str] = "telnyx"
    display_name: ClassVar[str] = "Telnyx"
    required_credentials: ClassVar[tuple[str, ...]] = ("apiKey",)
    optional_credentials: ClassVar[tuple[str, ...]] = ("messageProfileId", "baseUrl")

    async def send(self, message: SmsMessage) -> SendResult:
        api_key = self.require("apiKey")
        self.check_recipient(message)
        body: dict[str, Any] = {"from": self.sender(message), "to": message.to, "text": message.content}
        if profile := self.credential("messageProfileId"):
            body["messaging_profile_id"] = profile

        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(DEFAULT_BASE_URL)}/v2/messages",
            json=body,
            headers={"authorization": f"Bearer {api_key}"},
        )
        answer = json_object(response)
        data = answer.get("data")
        message_id = data.get("id") if isinstance(data, dict) else None
        return SendResult(provider_message_id=message_id, raw=answer)
