"""SMS providers: what each API receives, and their provider-specific answers."""

from __future__ import annotations

import httpx
import pytest

from herald.providers import ProviderError, SmsMessage
from herald.providers.sms.messagebird import MessageBirdProvider
from herald.providers.sms.plivo import PlivoProvider
from herald.providers.sms.sns import SnsProvider
from herald.providers.sms.telnyx import TelnyxProvider
from herald.providers.sms.twilio import TwilioProvider
from herald.providers.sms.vonage import VonageProvider
from tests.fixtures import peers
from tests.fixtures.peers import HttpPeer, status_answer

MESSAGE = SmsMessage(to="+15005550006", content="Your code is 123456")


async def test_twilio_posts_the_form_with_basic_auth(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_twilio(peer, account_sid="AC123", token="tw-token")
    provider = TwilioProvider(
        {"accountSid": "AC123", "token": "tw-token", "from": "+15005550001", "baseUrl": peer.url}, http
    )

    result = await provider.send(MESSAGE)

    [request] = peer.requests
    assert request.path == "/2010-04-01/Accounts/AC123/Messages.json"
    assert dict(request.form) == {"To": "+15005550006", "From": "+15005550001", "Body": "Your code is 123456"}
    assert result.provider_message_id and result.provider_message_id.startswith("SM")


async def test_twilio_sends_through_a_messaging_service_when_from_is_one(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    peers.install_twilio(peer, account_sid="AC123", token="tw-token")
    service_sid = "MG" + "0" * 32
    provider = TwilioProvider(
        {"accountSid": "AC123", "token": "tw-token", "from": service_sid, "baseUrl": peer.url}, http
    )

    await provider.send(MESSAGE)

    [request] = peer.requests
    assert request.form_value("MessagingServiceSid") == service_sid
    assert request.form_value("From") is None


async def test_twilio_error_carries_twilios_message_and_code(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_twilio(peer, account_sid="AC123", token="tw-token")
    provider = TwilioProvider({"accountSid": "AC123", "token": "tw-token", "baseUrl": peer.url}, http)

    with pytest.raises(ProviderError) as raised:
        await provider.send(SmsMessage(to="+15005550006", content="", from_="+15005550001"))

    assert raised.value.message == "twilio answered 400: Message body is required. (code 21602)"
    assert raised.value.transient is False


async def test_sms_without_a_sender_is_a_permanent_error(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    provider = TwilioProvider({"accountSid": "AC123", "token": "tw-token", "baseUrl": peer.url}, http)

    with pytest.raises(ProviderError) as raised:
        await provider.send(MESSAGE)

    assert raised.value.transient is False
    assert "credential from is missing" in raised.value.message
    assert peer.requests == []


async def test_vonage_posts_digits_without_plus_and_marks_unicode(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_vonage(peer, api_key="vn-key", api_secret="vn-secret")
    provider = VonageProvider(
        {"apiKey": "vn-key", "secretKey": "vn-secret", "from": "Herald", "baseUrl": peer.url}, http
    )

    result = await provider.send(SmsMessage(to="+44 7700 900000", content="Grüße"))

    [request] = peer.requests
    assert dict(request.form) == {
        "api_key": "vn-key",
        "api_secret": "vn-secret",
        "from": "Herald",
        "to": "447700900000",
        "text": "Grüße",
        "type": "unicode",
    }
    assert result.provider_message_id == result.raw["messages"][0]["message-id"]  # type: ignore[index]


@pytest.mark.parametrize(("status", "text", "transient"), [("1", "Throttled", True), ("7", "Number barred", False)])
async def test_vonage_refusal_in_a_200_answer_is_an_error(
    peer: HttpPeer, http: httpx.AsyncClient, status: str, text: str, transient: bool
) -> None:
    peer.route(
        "POST",
        "/sms/json",
        status_answer(200, {"message-count": "1", "messages": [{"status": status, "error-text": text}]}),
    )
    provider = VonageProvider({"apiKey": "k", "secretKey": "s", "from": "Herald", "baseUrl": peer.url}, http)

    with pytest.raises(ProviderError) as raised:
        await provider.send(MESSAGE)

    assert raised.value.transient is transient
    assert raised.value.message == f"nexmo: refused the message: {text} (status {status})"


async def test_plivo_posts_json_to_the_account(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_plivo(peer, auth_id="MA123", token="pl-token")
    provider = PlivoProvider(
        {"accountSid": "MA123", "token": "pl-token", "from": "+15005550001", "baseUrl": peer.url}, http
    )

    result = await provider.send(MESSAGE)

    [request] = peer.requests
    assert request.json() == {"src": "+15005550001", "dst": "+15005550006", "text": "Your code is 123456"}
    assert result.provider_message_id == result.raw["message_uuid"][0]  # type: ignore[index]


SNS = {"apiKey": "AKIDSNS", "secretKey": "sns-secret", "region": "us-east-1"}


@pytest.mark.parametrize(
    ("sender", "attribute"),
    [("+15005550001", "AWS.MM.SMS.OriginationNumber"), ("HERALD", "AWS.SNS.SMS.SenderID"), (None, None)],
)
async def test_sns_publishes_to_the_phone_number(
    peer: HttpPeer, http: httpx.AsyncClient, sender: str | None, attribute: str | None
) -> None:
    peers.install_sns(peer, access_key="AKIDSNS", secret_key="sns-secret", region="us-east-1")
    credentials = {**SNS, "baseUrl": peer.url}
    if sender:
        credentials["from"] = sender

    result = await SnsProvider(credentials, http).send(MESSAGE)

    [request] = peer.requests
    assert request.form_value("Action") == "Publish"
    assert request.form_value("PhoneNumber") == "+15005550006"
    assert request.form_value("Message") == "Your code is 123456"
    assert request.form_value("MessageAttributes.entry.1.Name") == attribute
    if sender:
        assert request.form_value("MessageAttributes.entry.1.Value.StringValue") == sender
    assert result.provider_message_id and len(result.provider_message_id) == 36


async def test_sns_throttling_is_transient_and_other_refusals_permanent(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    def error_xml(code: str, message: str) -> str:
        return f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error></ErrorResponse>"

    provider = SnsProvider({**SNS, "baseUrl": peer.url}, http)
    peer.route("POST", "/", status_answer(400, error_xml("Throttling", "Rate exceeded")))
    with pytest.raises(ProviderError) as throttled:
        await provider.send(MESSAGE)
    peer.route("POST", "/", status_answer(400, error_xml("InvalidParameter", "Invalid parameter: PhoneNumber")))
    with pytest.raises(ProviderError) as invalid:
        await provider.send(MESSAGE)

    assert throttled.value.transient is True
    assert throttled.value.message == "sns: answered 400: Throttling: Rate exceeded"
    assert invalid.value.transient is False
    assert "InvalidParameter: Invalid parameter: PhoneNumber" in invalid.value.message


async def test_telnyx_posts_json_with_the_messaging_profile(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_telnyx(peer, api_key="KEYtelnyx")
    credentials = {"apiKey": "KEYtelnyx", "messageProfileId": "profile-1", "from": "+15005550001", "baseUrl": peer.url}

    result = await TelnyxProvider(credentials, http).send(MESSAGE)

    [request] = peer.requests
    assert request.json() == {
        "from": "+15005550001",
        "to": "+15005550006",
        "text": "Your code is 123456",
        "messaging_profile_id": "profile-1",
    }
    assert result.provider_message_id == result.raw["data"]["id"]  # type: ignore[index]


async def test_telnyx_error_detail_is_reported(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_telnyx(peer, api_key="KEYtelnyx")

    with pytest.raises(ProviderError) as raised:
        await TelnyxProvider({"apiKey": "KEYother", "from": "+1", "baseUrl": peer.url}, http).send(MESSAGE)

    assert raised.value.message == "telnyx answered 401: The API key is invalid. (code 10009)"


async def test_messagebird_posts_originator_and_recipients(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_messagebird(peer, access_key="live_key")
    provider = MessageBirdProvider({"accessKey": "live_key", "from": "Herald", "baseUrl": peer.url}, http)

    result = await provider.send(MESSAGE)

    [request] = peer.requests
    assert request.json() == {"originator": "Herald", "recipients": ["+15005550006"], "body": "Your code is 123456"}
    assert result.provider_message_id


async def test_sms_without_a_recipient_is_a_permanent_error(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    provider = PlivoProvider({"accountSid": "MA123", "token": "t", "from": "+1", "baseUrl": peer.url}, http)

    with pytest.raises(ProviderError) as raised:
        await provider.send(SmsMessage(to=" ", content="hi"))

    assert raised.value.transient is False
    assert peer.requests == []


@pytest.mark.parametrize(
    ("provider_cls", "credentials", "expected_url"),
    [
        (
            TwilioProvider,
            {"accountSid": "AC1", "token": "t", "from": "+1"},
            "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages.json",
        ),
        (VonageProvider, {"apiKey": "k", "secretKey": "s", "from": "+1"}, "https://rest.nexmo.com/sms/json"),
        (
            PlivoProvider,
            {"accountSid": "MA1", "token": "t", "from": "+1"},
            "https://api.plivo.com/v1/Account/MA1/Message/",
        ),
        (
            SnsProvider,
            {"apiKey": "k", "secretKey": "s", "region": "eu-central-1"},
            "https://sns.eu-central-1.amazonaws.com/",
        ),
        (TelnyxProvider, {"apiKey": "k", "from": "+1"}, "https://api.telnyx.com/v2/messages"),
        (MessageBirdProvider, {"accessKey": "k", "from": "+1"}, "https://rest.messagebird.com/messages"),
    ],
)
async def test_default_hosts(provider_cls: type, credentials: dict[str, str], expected_url: str) -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        # Enough of each API's success answer for the provider to read.
        return httpx.Response(200, json={"messages": [{"status": "0", "message-id": "1"}]}, text=None)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handle), timeout=5) as client:
        await provider_cls(credentials, client).send(MESSAGE)

    assert [str(request.url) for request in seen] == [expected_url]
