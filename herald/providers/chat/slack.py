"""Slack: an incoming webhook, or chat.postMessage when the integration has a bot token."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from herald.providers.base import ChatMessage, ChatProvider, SendResult
from herald.providers.http import error_from_response, excerpt, json_object, send_raw, send_request

DEFAULT_BASE_URL = "https://slack.com"
# Web API errors that say "try again later"; every other one is a refusal.
_TRANSIENT_API_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
# Incoming webhooks refuse in plain text with one error code (invalid_payload,
# no_service, channel_is_archived, ...); only such a code is repeated in the error.
_WEBHOOK_ERROR_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


class SlackProvider(ChatProvider):
    """Credentials: webhookUrl (fallback for the subscriber's), or token (bot token ``xoxb-…``) plus
    channelId (fallback for the message's channel)."""

    provider_id: ClassVar[str] = "slack"
    optional_credentials: ClassVar[tuple[str, ...]] = ("token", "apiToken", "channelId", "baseUrl")
    display_name: ClassVar[str] = "Slack"

    async def send(self, message: ChatMessage) -> SendResult:
        token = self.credential("token") or self.credential("apiToken")
        channel = message.channel or self.credential("channelId")
        if token and channel:
            return await self._post_message(token, channel, message)

        url = self.webhook_url(message)
        response = await send_raw(self.http, self.provider_id, "POST", url, json={"text": message.content})
        if not response.is_success:
            code = response.text.strip()
            raise error_from_response(self.provider_id, response, code if _WEBHOOK_ERROR_CODE.fullmatch(code) else None)
        # The webhook answers a plain "ok" and no message id.
        return SendResult(provider_message_id=None, raw={"status": response.status_code})

    async def _post_message(self, token: str, channel: str, message: ChatMessage) -> SendResult:
        body: dict[str, Any] = {"channel": channel, "text": message.content}
        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(DEFAULT_BASE_URL)}/api/chat.postMessage",
            json=body,
            headers={"authorization": f"Bearer {token}"},
        )
        answer = json_object(response)
        # The Web API answers 200 for refusals too; "ok" tells them apart.
        if not answer.get("ok"):
            error = excerpt(str(answer.get("error") or "no error text"))
            raise self.error(
                f"chat.postMessage refused: {error}",
                transient=error in _TRANSIENT_API_ERRORS,
                status_code=response.status_code,
            )
        return SendResult(provider_message_id=answer.get("ts"), raw=answer)
