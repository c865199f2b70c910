"""One working set-up per HTTP provider: credentials aimed at the peer, a message, and the fake installed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from herald.providers import ChatMessage, EmailMessage, PushMessage, SmsMessage
from tests.fixtures import peers
from tests.fixtures.peers import EcKey, HttpPeer, RsaKey

APNS_TOKEN = "a" * 64
EXPO_TOKEN = "ExponentPushToken[xxxxxxxxxxxxxxxxxxxxxx]"


@dataclass
class Keys:
    rsa: RsaKey
    p8: EcKey


@dataclass
class Case:
    provider_id: str
    credentials: dict[str, Any]
    message: Any
    # The route the provider calls, for tests that put an error answer over it.
    endpoint: tuple[str, str]
    # Credentials the fake refuses (a wrong key), or None for unauthenticated webhooks.
    refused_credentials: dict[str, Any] | None
    state: Any = None
    # Incoming webhooks of Slack and Mattermost answer "ok" and nothing to identify the message by.
    answers_with_id: bool = True


def email() -> EmailMessage:
    return EmailMessage(
        to=["ada@example.com"],
        subject="Welcome",
        html="<p>Hello <b>Ada</b></p>",
        text="Hello Ada",
        from_address="team@herald.test",
        sender_name="Herald Team",
    )


def sms() -> SmsMessage:
    return SmsMessage(to="+15005550006", content="Your code is 123456", from_="+15005550001")


def chat(peer: HttpPeer, path: str) -> ChatMessage:
    return ChatMessage(content="Deploy finished", webhook_url=f"{peer.url}{path}")


def push(token: str) -> PushMessage:
    return PushMessage(tokens=[token], title="New message", content="Ada sent you a message", data={"threadId": "t1"})


def service_account(
    peer: HttpPeer,
    key: RsaKey,
    *,
    project_id: str = "herald-test",
    client_email: str = "fcm@herald-test.iam.gserviceaccount.com",
) -> str:
    return json.dumps(
        {
            "type": "service_account",
            "project_id": project_id,
            # A fresh id per set-up keeps cached access tokens from leaking between tests.
            "private_key_id": uuid.uuid4().hex,
            "private_key": key.private_pem,
            "client_email": client_email,
            "client_id": "1234567890",
            "token_uri": f"{peer.url}/token",
        }
    )


def _sendgrid(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_sendgrid(peer, api_key="SG.key")
    return Case(
        "sendgrid",
        {"apiKey": "SG.key", "baseUrl": peer.url},
        email(),
        ("POST", "/v3/mail/send"),
        {"apiKey": "SG.wrong"},
    )


def _mailgun(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_mailgun(peer, api_key="mg-key", domain="mg.herald.test")
    credentials = {"apiKey": "mg-key", "domain": "mg.herald.test", "user": "api", "baseUrl": peer.url}
    return Case("mailgun", credentials, email(), ("POST", "/v3/mg.herald.test/messages"), {"apiKey": "mg-wrong"})


def _postmark(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_postmark(peer, token="pm-token")
    return Case(
        "postmark", {"apiKey": "pm-token", "baseUrl": peer.url}, email(), ("POST", "/email"), {"apiKey": "pm-wrong"}
    )


def _resend(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_resend(peer, api_key="re_key")
    return Case(
        "resend", {"apiKey": "re_key", "baseUrl": peer.url}, email(), ("POST", "/emails"), {"apiKey": "re_wrong"}
    )


def _ses(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_ses(peer, access_key="AKIDEXAMPLE", secret_key="ses-secret", region="eu-west-1")
    credentials = {"apiKey": "AKIDEXAMPLE", "secretKey": "ses-secret", "region": "eu-west-1", "baseUrl": peer.url}
    return Case("ses", credentials, email(), ("POST", "/v2/email/outbound-emails"), {"secretKey": "not-the-secret"})


def _brevo(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_brevo(peer, api_key="xkeysib-key")
    return Case(
        "sendinblue",
        {"apiKey": "xkeysib-key", "baseUrl": peer.url},
        email(),
        ("POST", "/v3/smtp/email"),
        {"apiKey": "xkeysib-wrong"},
    )


def _twilio(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_twilio(peer, account_sid="AC123", token="tw-token")
    credentials = {"accountSid": "AC123", "token": "tw-token", "baseUrl": peer.url}
    return Case(
        "twilio", credentials, sms(), ("POST", "/2010-04-01/Accounts/AC123/Messages.json"), {"token": "tw-wrong"}
    )


def _vonage(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_vonage(peer, api_key="vn-key", api_secret="vn-secret")
    credentials = {"apiKey": "vn-key", "secretKey": "vn-secret", "baseUrl": peer.url}
    return Case("nexmo", credentials, sms(), ("POST", "/sms/json"), {"secretKey": "vn-wrong"})


def _plivo(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_plivo(peer, auth_id="MA123", token="pl-token")
    credentials = {"accountSid": "MA123", "token": "pl-token", "baseUrl": peer.url}
    return Case("plivo", credentials, sms(), ("POST", "/v1/Account/MA123/Message/"), {"token": "pl-wrong"})


def _sns(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_sns(peer, access_key="AKIDSNS", secret_key="sns-secret", region="us-east-1")
    credentials = {"apiKey": "AKIDSNS", "secretKey": "sns-secret", "region": "us-east-1", "baseUrl": peer.url}
    return Case("sns", credentials, sms(), ("POST", "/"), {"secretKey": "not-the-secret"})


def _telnyx(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_telnyx(peer, api_key="KEYtelnyx")
    credentials = {"apiKey": "KEYtelnyx", "messageProfileId": "profile-1", "baseUrl": peer.url}
    return Case("telnyx", credentials, sms(), ("POST", "/v2/messages"), {"apiKey": "KEYwrong"})


def _messagebird(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_messagebird(peer, access_key="live_key")
    return Case(
        "messagebird",
        {"accessKey": "live_key", "baseUrl": peer.url},
        sms(),
        ("POST", "/messages"),
        {"accessKey": "live_wrong"},
    )


def _slack(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_slack(peer)
    return Case(
        "slack",
        {},
        chat(peer, "/services/T000/B000/XXXX"),
        ("POST", "/services/T000/B000/XXXX"),
        None,
        answers_with_id=False,
    )


def _discord(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_discord(peer)
    return Case("discord", {}, chat(peer, "/api/webhooks/123/abc"), ("POST", "/api/webhooks/123/abc"), None)


def _msteams(peer: HttpPeer, keys: Keys) -> Case:
    path = "/webhookb2/abc/IncomingWebhook/def"
    peers.install_msteams(peer, webhook_path=path)
    return Case("msteams", {}, chat(peer, path), ("POST", path), None)


def _mattermost(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_mattermost(peer)
    return Case("mattermost", {}, chat(peer, "/hooks/xyz"), ("POST", "/hooks/xyz"), None, answers_with_id=False)


def _chat_webhook(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_signed_webhook(peer, path="/hooks/chat", secret="chat-secret")
    return Case(
        "chat-webhook",
        {"secretKey": "chat-secret"},
        chat(peer, "/hooks/chat"),
        ("POST", "/hooks/chat"),
        {"secretKey": "other-secret"},
    )


def _fcm(peer: HttpPeer, keys: Keys) -> Case:
    state = peers.install_fcm(
        peer, project_id="herald-test", client_email="fcm@herald-test.iam.gserviceaccount.com", key=keys.rsa
    )
    credentials = {"serviceAccount": service_account(peer, keys.rsa), "baseUrl": peer.url}
    # A service account whose key the token endpoint does not know.
    refused = {
        "serviceAccount": service_account(peer, keys.rsa, client_email="intruder@elsewhere.iam.gserviceaccount.com")
    }
    return Case(
        "fcm", credentials, push("fcm-token-1"), ("POST", "/v1/projects/{project}/messages:send"), refused, state
    )


def _apns(peer: HttpPeer, keys: Keys) -> Case:
    state = peers.install_apns(
        peer, key=keys.p8, key_id="KEY1234567", team_id="TEAM123456", bundle_id="test.herald.app"
    )
    credentials = {
        "secretKey": keys.p8.private_pem,
        "apiKey": "KEY1234567",
        "projectName": "TEAM123456",
        "applicationId": "test.herald.app",
        "baseUrl": peer.url,
    }
    return Case("apns", credentials, push(APNS_TOKEN), ("POST", "/3/device/{token}"), {"apiKey": "OTHERKEYID"}, state)


def _expo(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_expo(peer, access_token="expo-token")
    return Case(
        "expo",
        {"apiKey": "expo-token", "baseUrl": peer.url},
        push(EXPO_TOKEN),
        ("POST", "/--/api/v2/push/send"),
        {"apiKey": "expo-wrong"},
    )


def _onesignal(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_onesignal(peer, app_id="app-1", api_key="os-key", subscribed={"player-1", "player-2"})
    credentials = {"applicationId": "app-1", "apiKey": "os-key", "baseUrl": peer.url}
    return Case("one-signal", credentials, push("player-1"), ("POST", "/api/v1/notifications"), {"apiKey": "os-wrong"})


def _push_webhook(peer: HttpPeer, keys: Keys) -> Case:
    peers.install_signed_webhook(peer, path="/hooks/push", secret="push-secret")
    credentials = {"webhookUrl": f"{peer.url}/hooks/push", "secretKey": "push-secret"}
    return Case("push-webhook", credentials, push("device-1"), ("POST", "/hooks/push"), {"secretKey": "other-secret"})


CASES: dict[str, Callable[[HttpPeer, Keys], Case]] = {
    "sendgrid": _sendgrid,
    "mailgun": _mailgun,
    "postmark": _postmark,
    "resend": _resend,
    "ses": _ses,
    "sendinblue": _brevo,
    "twilio": _twilio,
    "nexmo": _vonage,
    "plivo": _plivo,
    "sns": _sns,
    "telnyx": _telnyx,
    "messagebird": _messagebird,
    "slack": _slack,
    "discord": _discord,
    "msteams": _msteams,
    "mattermost": _mattermost,
    "chat-webhook": _chat_webhook,
    "fcm": _fcm,
    "apns": _apns,
    "expo": _expo,
    "one-signal": _onesignal,
    "push-webhook": _push_webhook,
}
