"""Expo push service."""

from __future__ import annotations

from typing import Any, ClassVar

from herald.providers.base import ProviderError, PushMessage, PushProvider, SendResult
from herald.providers.http import excerpt, json_object, send_request

DEFAULT_BASE_URL = "https://exp.host"
BATCH_SIZE = 100  # Expo's limit of messages per request
# Overrides Expo's message format knows; anything else would be refused.
_MESSAGE_FIELDS = frozenset(
    {
        "ttl",
        "expiration",
        "priority",
        "subtitle",
        "sound",
        "badge",
        "interruptionLevel",
        "channelId",
        "icon",
        "richContent",
        "categoryId",
        "mutableContent",
        "_contentAvailable",
    }
)
_TRANSIENT_TICKET_ERRORS = frozenset({"MessageRateExceeded"})


class ExpoProvider(PushProvider):
    """Credentials: apiKey (the access token, when push security is on for the project)."""

    provider_id: ClassVar[str] = "expo"
    optional_credentials: ClassVar[tuple[str, ...]] = ("apiKey", "baseUrl")
    display_name: ClassVar[str] = "Expo Push"

    async def send(self, message: PushMessage) -> SendResult:
        tokens = self.check_tokens(message)
        headers = {"accept": "application/json"}
        if access_token := self.credential("apiKey"):
            headers["authorization"] = f"Bearer {access_token}"
        extra = {key: value for key, value in message.overrides.items() if key in _MESSAGE_FIELDS}
        url = f"{self.base_url(DEFAULT_BASE_URL)}/--/api/v2/push/send"

        outcomes: list[tuple[str, str | None | ProviderError]] = []
        for start in range(0, len(tokens), BATCH_SIZE):
            batch = tokens[start : start + BATCH_SIZE]
            messages: list[dict[str, Any]] = [
                {"to": token, "title": message.title, "body": message.content, "data": message.data, **extra}
                for token in batch
            ]
            response = await send_request(self.http, self.provider_id, "POST", url, json=messages, headers=headers)
            tickets = json_object(response).get("data")
            if not isinstance(tickets, list) or len(tickets) != len(batch):
                raise self.error(
                    f"unexpected answer: {response.status_code} without a ticket for each message", transient=True, status_code=response.status_code
                )
            outcomes += [(token, self._ticket_outcome(ticket)) for token, ticket in zip(batch, tickets, strict=True)]
        return self.settle(outcomes)

    def _ticket_outcome(self, ticket: Any) -> str | None | ProviderError:
        if isinstance(ticket, dict) and ticket.get("status") == "ok":
            return ticket.get("id")
        ticket = ticket if isinstance(ticket, dict) else {}
        details = ticket.get("details") if isinstance(ticket.get("details"), dict) else {}
        code = details.get("error")
        text = ticket.get("message") or "no error text"
        return self.error(
            excerpt(f"ticket error: {str(code) + ': ' if code else ''}{text}"),
            transient=code in _TRANSIENT_TICKET_ERRORS,
        )
