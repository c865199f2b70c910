"""Vonage (Nexmo) SMS API; Novu's provider id is ``nexmo``."""

from __future__ import annotations

from typing import ClassVar

from herald.providers.base import SendResult, SmsMessage, SmsProvider
from herald.providers.http import excerpt, json_object, send_request

DEFAULT_BASE_URL = "https://rest.nexmo.com"
# Per-message statuses that only say "not now": throttled, internal error.
_TRANSIENT_STATUSES = frozenset({"1", "5"})


class VonageProvider(SmsProvider):
    """Credentials: apiKey, secretKey (API secret), from."""

    provider_id: ClassVar[str] = "nexmo"
    display_name: ClassVar[str] = "Vonage (Nexmo)"
    required_credentials: ClassVar[tuple[str, ...]] = ("apiKey", "secretKey")
    optional_credentials: ClassVar[tuple[str, ...]] = ("baseUrl",)

    async def send(self, message: SmsMessage) -> SendResult:
        api_key = self.require("apiKey")
        api_secret = self.require("secretKey")
        self.check_recipient(message)
        form = {
            "api_key": api_key,
            "api_secret": api_secret,
            "from": self.sender(message),
            # Vonage takes E.164 digits without the leading plus.
            "to": message.to.strip().lstrip("+").replace(" ", ""),
            "text": message.content,
        }
        if not message.content.isascii():
            form["type"] = "unicode"

        response = await send_request(
            self.http, self.provider_id, "POST", f"{self.base_url(DEFAULT_BASE_URL)}/sms/json", data=form
        )
        answer = json_object(response)
        # Vonage answers 200 even when it refuses: each message part has its own status.
        parts = answer.get("messages") or []
        if not parts:
            raise self.error("answer without messages", transient=True, status_code=response.status_code)
        for part in parts:
            status = str(part.get("status", ""))
            if status != "0":
                raise self.error(
                    f"refused the message: {excerpt(str(part.get('error-text') or 'no error text'))} (status {status})",
                    transient=status in _TRANSIENT_STATUSES,
                    status_code=response.status_code,
                )
        return SendResult(provider_message_id=parts[0].get("message-id"), raw=answer)
