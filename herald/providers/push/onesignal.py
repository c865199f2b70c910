"""OneSignal Create Notification API."""

from __future__ import annotations

from typing import Any, ClassVar

from herald.providers.base import PushMessage, PushProvider, SendResult
from herald.providers.http import error_field, json_object, send_request

DEFAULT_BASE_URL = "https://onesignal.com"


class OneSignalProvider(PushProvider):
    """Credentials: applicationId (app id), apiKey (REST API key), apiVersion (``externalId`` to target
    external ids instead of subscription/player ids).

    Keys of the current form (``os_v2_…``) authenticate with ``Key``, legacy
    keys with ``Basic``; player ids and subscription ids are the same values.
    """

    provider_id: ClassVar[str] = "one-signal"
    display_name: ClassVar[str] = "OneSignal"
    required_credentials: ClassVar[tuple[str, ...]] = ("applicationId", "apiKey")
    optional_credentials: ClassVar[tuple[str, ...]] = ("apiVersion", "baseUrl")

    async def send(self, message: PushMessage) -> SendResult:
        tokens = self.check_tokens(message)
        app_id = self.require("applicationId")
        api_key = self.require("apiKey")
        overrides = message.overrides
        current_key = api_key.startswith("os_v2_")

        body: dict[str, Any] = {
            "app_id": app_id,
            "headings": {"en": message.title},
            "contents": {"en": message.content},
        }
        if self.credential("apiVersion") == "externalId":
            body["include_aliases"] = {"external_id": tokens}
            body["target_channel"] = "push"
        elif current_key:
            body["include_subscription_ids"] = tokens
            body["target_channel"] = "push"
        else:
            body["include_player_ids"] = tokens
        if message.data:
            body["data"] = message.data
        if overrides.get("subtitle") is not None:
            body["subtitle"] = {"en": overrides["subtitle"]}
        if overrides.get("sound") is not None:
            body["ios_sound"] = body["android_sound"] = overrides["sound"]
        if overrides.get("badge") is not None:
            body["ios_badgeType"], body["ios_badgeCount"] = "Increase", overrides["badge"]
        if self.idempotency_key is not None:
            # OneSignal keeps a key 30 days and answers a repeat with the notification it made the first time.
            body["idempotency_key"] = self.idempotency_key
        for key, wire in (
            ("channelId", "android_channel_id"),
            ("icon", "small_icon"),
            ("categoryId", "ios_category"),
            ("mutableContent", "mutable_content"),
        ):
            if overrides.get(key) is not None:
                body[wire] = overrides[key]

        response = await send_request(
            self.http,
            self.provider_id,
            "POST",
            f"{self.base_url(DEFAULT_BASE_URL)}/api/v1/notifications",
            json=body,
            headers={"authorization": f"{'Key' if current_key else 'Basic'} {api_key}", "accept": "application/json"},
        )
        answer = json_object(response)
        return self._result(answer, tokens, response.status_code)

    def _result(self, answer: dict[str, Any], tokens: list[str], status: int) -> SendResult:
        errors = answer.get("errors")
        notification_id = answer.get("id") or None
        if not notification_id:
            # 200 without an id: nobody was reachable ("All included players are not subscribed").
            why = error_field(errors) or "the answer has no notification id"
            raise self.error(f"no notification created: {why}", transient=False, status_code=status)
        invalid: list[str] = []
        if isinstance(errors, dict):
            for key in ("invalid_player_ids", "invalid_aliases", "invalid_external_user_ids"):
                found = errors.get(key)
                if isinstance(found, list):
                    invalid += [str(item) for item in found]
                elif isinstance(found, dict):
                    invalid += [str(item) for values in found.values() for item in values]
        return SendResult(
            provider_message_id=notification_id,
            raw=answer,
            failures=[f"token {token}: not subscribed" for token in invalid],
        )
