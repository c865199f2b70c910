"""Twilio Programmable Messaging."""

from __future__ import annotations

from typing import ClassVar

from herald.providers.base import SendResult, SmsMessage, SmsProvider
from herald.providers.http import json_object, send_request

DEFAULT_BASE_URL = "https://api.twilio.com"


class TwilioProvider(SmsProvider):
    """Credentials: accountSid, token (auth token), from (a number, or a Messaging Service SID ``MG…``)."""

    provider_id: ClassVar[str] = "twilio"
    display_name: ClassVar[str] = "Twilio"
    required_credentials: ClassVar[tuple[str, ...]] = ("accountSid", "token")
    optional_credentials: ClassVar[tuple[str, ...]] = ("baseUrl",)

    async def send(self, message: SmsMessage) -> SendResult:
        account_sid = self.require("accountSid")
        token = self.require("token")
        self.check_recipient(message)
        sender = self.sender(message)
        form = {"To": message.to, "Body": message.content}
        if sender.startswith("MG") and len(sender) == 34:  # a Messaging Service SID
            form["MessagingServiceSid"] = sender
        else:
            form["From"] = sender

        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(DEFAULT_BASE_URL)}/2010-04-01/Accounts/{account_sid}/Messages.json",
            data=form,
            auth=(account_sid, token),
        )
        answer = json_object(response)
        return SendResult(provider_message_id=answer.get("sid"), raw=answer)
