"""The registry, the credential checks every provider makes before sending, and the HTTP error mapping."""

from __future__ import annotations

import inspect
import re
from typing import Any

import httpx
import pytest

from herald.providers import (
    PROVIDERS,
    ChatMessage,
    EmailMessage,
    ProviderError,
    PushMessage,
    SmsMessage,
    create_http_client,
    provider_class,
    providers_for_channel,
)
from herald.providers.base import Provider
from herald.providers.email.brevo import BrevoProvider
from herald.providers.http import error_text, send_request
from herald.providers.sms.vonage import VonageProvider

NOVU_IDS = {
    "email": {"nodemailer", "sendgrid", "mailgun", "postmark", "resend", "ses", "sendinblue"},
    "sms": {"twilio", "nexmo", "plivo", "sns", "telnyx", "messagebird"},
    "chat": {"slack", "discord", "msteams", "mattermost", "chat-webhook"},
    "push": {"fcm", "apns", "expo", "one-signal", "push-webhook"},
}

MESSAGES: dict[str, Any] = {
    "email": EmailMessage(to=["ada@example.com"], subject="s", html="<p>h</p>", from_address="a@herald.test"),
    "sms": SmsMessage(to="+15005550006", content="hi", from_="+15005550001"),
    "chat": ChatMessage(content="hi"),
    "push": PushMessage(tokens=["t1"], title="t", content="c"),
}

# What each provider reports first when its credentials are empty.
FIRST_MISSING = {
    "nodemailer": "credential host is missing",
    "sendgrid": "credential apiKey is missing",
    "mailgun": "credential apiKey is missing",
    "postmark": "credential apiKey is missing",
    "resend": "credential apiKey is missing",
    "ses": "credential apiKey is missing",
    "sendinblue": "credential apiKey is missing",
    "twilio": "credential accountSid is missing",
    "nexmo": "credential apiKey is missing",
    "plivo": "credential accountSid is missing",
    "sns": "credential apiKey is missing",
    "telnyx": "credential apiKey is missing",
    "messagebird": "credential accessKey is missing",
    "slack": "no webhook URL",
    "discord": "no webhook URL",
    "msteams": "no webhook URL",
    "mattermost": "no webhook URL",
    "chat-webhook": "no webhook URL",
    "fcm": "credential serviceAccount is missing",
    "apns": "credential secretKey is missing",
    "one-signal": "credential applicationId is missing",
    "push-webhook": "credential webhookUrl is missing",
}


def test_every_provider_is_registered_under_novus_id_and_channel() -> None:
    assert {channel: {cls.provider_id for cls in providers_for_channel(channel)} for channel in NOVU_IDS} == NOVU_IDS
    assert set(PROVIDERS) == set().union(*NOVU_IDS.values())
    for provider_id, cls in PROVIDERS.items():
        assert provider_class(provider_id) is cls
        assert cls.display_name


def test_current_brand_names_resolve_to_novus_ids() -> None:
    assert provider_class("brevo") is BrevoProvider
    assert provider_class("vonage") is VonageProvider


def test_unknown_provider_has_no_class() -> None:
    assert provider_class("carrier-pigeon") is None
    assert providers_for_channel("in_app") == []


def refuse_network(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"no request should be made, got {request.method} {request.url}")


# expo is left out: its access token is optional and it needs nothing else.
@pytest.mark.parametrize("provider_id", sorted(FIRST_MISSING))
async def test_missing_credentials_fail_permanently_before_any_request(provider_id: str) -> None:
    cls = PROVIDERS[provider_id]
    expected = FIRST_MISSING[provider_id]

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse_network)) as client:
        with pytest.raises(ProviderError) as raised:
            await cls({}, client).send(MESSAGES[cls.channel])

    assert raised.value.transient is False
    assert raised.value.status_code is None
    assert raised.value.message.startswith(f"{provider_id}: ")
    assert expected in raised.value.message


async def test_blank_credentials_count_as_missing() -> None:
    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse_network)) as client:
        with pytest.raises(ProviderError) as raised:
            await PROVIDERS["sendgrid"]({"apiKey": "   "}, client).send(MESSAGES["email"])

    assert raised.value.message == "sendgrid: credential apiKey is missing"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"errors": [{"message": "The from address does not match", "field": "from"}]},
            "The from address does not match",
        ),
        ({"error": {"code": 404, "message": "Not found", "status": "NOT_FOUND"}}, "Not found (code 404)"),
        ({"ErrorCode": 300, "Message": "Invalid email request"}, "Invalid email request (code 300)"),
        ({"error": "invalid_grant", "error_description": "Bad JWT"}, "Bad JWT"),
        ({"errors": ["one", "two"]}, "one; two"),
        # Nothing else of an answer is repeated: it may not come from the provider at all.
        ({"nothing": "useful"}, "Bad Request (no JSON error field)"),
        ({"message": "x" * 5000}, "x" * 199 + "…"),
    ],
)
def test_error_text_finds_the_message_in_common_error_shapes(body: Any, expected: str) -> None:
    assert error_text(httpx.Response(400, json=body)) == expected


def test_error_text_of_a_plain_or_empty_answer_is_its_reason_phrase() -> None:
    assert error_text(httpx.Response(401, text="Forbidden")) == "Unauthorized (no JSON error field)"
    assert error_text(httpx.Response(502)) == "Bad Gateway (no JSON error field)"
    assert error_text(httpx.Response(200, text="<html>internal admin page</html>")) == "OK (no JSON error field)"


async def test_invalid_url_is_permanent() -> None:
    async with create_http_client() as client:
        with pytest.raises(ProviderError) as raised:
            await send_request(client, "discord", "POST", "http://", json={})

    assert raised.value.transient is False


async def test_shared_client_timeouts() -> None:
    # Creating it also proves the HTTP/2 support (package h2) is installed.
    async with create_http_client() as client:
        assert (client.timeout.connect, client.timeout.read, client.timeout.write) == (5.0, 15.0, 15.0)
        assert client.follow_redirects is False


# Read by a provider but no field of a form: an object set through the API (SMTP's TLS options).
NOT_IN_FORMS = {"tlsOptions"}


@pytest.mark.parametrize("provider_id", sorted(PROVIDERS))
def test_each_provider_declares_every_credential_it_reads(provider_id: str) -> None:
    """The console's form of a provider asks for what it declares: a credential it reads but does not declare could not be set there."""
    cls = PROVIDERS[provider_id]
    # The provider's own code and its channel's base class (Provider's helpers read only what they are asked).
    classes = [klass for klass in cls.__mro__ if klass.__module__.startswith("herald.providers") and klass is not Provider]
    source = "".join(inspect.getsource(klass) for klass in classes)
    read = set(re.findall(r'(?:credential|require|flag)\("([A-Za-z]+)"', source))
    if "self.base_url(" in source:
        read.add("baseUrl")
    # The channel's own (``from``, ``senderName``, ``webhookUrl``) are read by the channel's base class.
    declared = cls.declared_credentials()
    assert read - NOT_IN_FORMS <= set(declared), (provider_id, sorted(read - set(declared)))
    assert declared[: len(cls.required_credentials)] == cls.required_credentials
    assert len(declared) == len(set(declared))
