"""Plivo Message API."""

from __future__ import annotations

from typing import ClassVar

from herald.providers.base import SendResult, SmsMessage, SmsProvider
from herald.providers.http import json_object, send_request

DEFAULT_BASE_URL = "https://api.plivo.com"


class PlivoProvider(SmsProvider):
    """Credentials: accountSid (Auth ID), token (Auth Token), from."""

    provider_id: ClassVar[str] = "plivo"
    display_name: ClassVar[str] = "Plivo"
    required_credentials: ClassVar[tuple[str, ...]] = ("accountSid", "token")
    optional_credentials: ClassVar[tuple[str, ...]] = ("baseUrl",)

    async def send(self, message: SmsMessage) -> SendResult:
        auth_id = self.require("accountSid")
        token = self.require("token")
        self.check_recipient(message)
        body = {"src": self.sender(message), "dst": message.to, "text": message.content}

        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(DEFAULT_BASE_URL)}/v1/Account/{auth_id}/Message/",
            json=body,
            auth=(auth_id, token),
        )
        answer = json_object(response)
        uuids = answer.get("message_uuid") or []
        return SendResult(provider_message_id=uuids[0] if uuids else None, raw=answer)
