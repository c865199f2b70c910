"""Email providers: the SMTP provider against aiosmtpd, and what each HTTP API receives."""

from __future__ import annotations

import asyncio
import base64
import email
import threading
from collections.abc import Iterator
from email import policy
from email.message import EmailMessage as MimeMessage
from typing import Any

import httpx
import pytest

from herald.providers import Attachment, EmailMessage, ProviderError, SendIdentity
from herald.providers.email.brevo import BrevoProvider
from herald.providers.email.mailgun import MailgunProvider
from herald.providers.email.nodemailer import SmtpProvider
from herald.providers.email.postmark import PostmarkProvider
from herald.providers.email.resend import ResendProvider
from herald.providers.email.sendgrid import SendGridProvider
from herald.providers.email.ses import SesProvider
from tests.fixtures import peers
from tests.fixtures.peers import HttpPeer, SmtpPeer, TlsFiles, free_port, status_answer

# The peer allows AUTH without TLS on purpose (a local test server); aiosmtpd warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")

PDF = Attachment(name="invoice.pdf", mime="application/pdf", content=b"%PDF-1.4 fake invoice")


def full_message(**changes: Any) -> EmailMessage:
    message = EmailMessage(
        to=["ada@example.com", "grace@example.com"],
        subject="Your invoice",
        html="<p>Hello <b>Ada</b></p>",
        text="Hello Ada",
        from_address="billing@herald.test",
        sender_name="Herald Billing",
        reply_to="support@herald.test",
        cc=["cc@example.com"],
        bcc=["audit@example.com"],
        headers={"X-Campaign": "spring"},
        attachments=[PDF],
    )
    for key, value in changes.items():
        setattr(message, key, value)
    return message


def parse(data: bytes) -> MimeMessage:
    return email.message_from_bytes(data, policy=policy.default)  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# SMTP (nodemailer)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return peers.self_signed_certificate(tmp_path_factory.mktemp("tls"))


def smtp_peer(**kwargs: Any) -> Iterator[SmtpPeer]:
    server = SmtpPeer(**kwargs).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def plain_smtp() -> Iterator[SmtpPeer]:
    yield from smtp_peer()


@pytest.fixture
def auth_smtp() -> Iterator[SmtpPeer]:
    yield from smtp_peer(users={"mailer": "s3cret"})


@pytest.fixture
def starttls_smtp(tls_files: TlsFiles) -> Iterator[SmtpPeer]:
    yield from smtp_peer(starttls=tls_files)


@pytest.fixture
def implicit_tls_smtp(tls_files: TlsFiles) -> Iterator[SmtpPeer]:
    yield from smtp_peer(implicit_tls=tls_files)


def smtp(server: SmtpPeer, http: httpx.AsyncClient, **credentials: Any) -> SmtpProvider:
    return SmtpProvider({"host": "127.0.0.1", "port": str(server.port), **credentials}, http)


async def test_smtp_sends_multipart_alternative_with_attachment_and_bcc_only_in_the_envelope(
    plain_smtp: SmtpPeer, http: httpx.AsyncClient
) -> None:
    result = await smtp(plain_smtp, http).send(full_message())

    [mail] = plain_smtp.received
    assert mail.mail_from == "billing@herald.test"
    assert sorted(mail.rcpt_tos) == sorted(
        ["ada@example.com", "grace@example.com", "cc@example.com", "audit@example.com"]
    )
    parsed = parse(mail.data)
    assert parsed["From"] == "Herald Billing <billing@herald.test>"
    assert parsed["To"] == "ada@example.com, grace@example.com"
    assert parsed["Cc"] == "cc@example.com"
    assert parsed["Bcc"] is None
    assert parsed["Reply-To"] == "support@herald.test"
    assert parsed["Subject"] == "Your invoice"
    assert parsed["X-Campaign"] == "spring"
    assert parsed["Message-ID"] == result.provider_message_id
    assert parsed.get_content_type() == "multipart/mixed"
    alternative, attachment = parsed.iter_parts()
    assert alternative.get_content_type() == "multipart/alternative"
    text, html = alternative.iter_parts()
    assert (text.get_content_type(), text.get_content().strip()) == ("text/plain", "Hello Ada")
    assert (html.get_content_type(), html.get_content().strip()) == ("text/html", "<p>Hello <b>Ada</b></p>")
    assert attachment.get_filename() == "invoice.pdf"
    assert attachment.get_content_type() == "application/pdf"
    assert attachment.get_content() == PDF.content
    assert mail.tls is False and mail.login is None


async def test_smtp_takes_the_sender_from_the_credentials_when_the_message_has_none(
    plain_smtp: SmtpPeer, http: httpx.AsyncClient
) -> None:
    message = EmailMessage(to=["ada@example.com"], subject="Hi", html="<p>Hi</p>", text="Hi")

    await smtp(plain_smtp, http, **{"from": "no-reply@herald.test", "senderName": "Herald"}).send(message)

    [mail] = plain_smtp.received
    assert mail.mail_from == "no-reply@herald.test"
    assert parse(mail.data)["From"] == "Herald <no-reply@herald.test>"


async def test_smtp_without_a_from_address_is_a_permanent_error(plain_smtp: SmtpPeer, http: httpx.AsyncClient) -> None:
    message = EmailMessage(to=["ada@example.com"], subject="Hi", html="<p>Hi</p>")

    with pytest.raises(ProviderError) as raised:
        await smtp(plain_smtp, http).send(message)

    assert raised.value.transient is False
    assert "credential from is missing" in raised.value.message
    assert plain_smtp.received == []


async def test_smtp_logs_in_with_user_and_password(auth_smtp: SmtpPeer, http: httpx.AsyncClient) -> None:
    await smtp(auth_smtp, http, user="mailer", password="s3cret").send(full_message(attachments=[]))

    [mail] = auth_smtp.received
    assert mail.login == "mailer"


async def test_smtp_wrong_password_is_a_permanent_error(auth_smtp: SmtpPeer, http: httpx.AsyncClient) -> None:
    with pytest.raises(ProviderError) as raised:
        await smtp(auth_smtp, http, user="mailer", password="wrong").send(full_message())

    assert raised.value.transient is False
    assert raised.value.status_code == 535
    assert "authentication failed" in raised.value.message
    assert auth_smtp.received == []


async def test_smtp_server_demanding_auth_refuses_an_anonymous_sender_permanently(
    auth_smtp: SmtpPeer, http: httpx.AsyncClient
) -> None:
    with pytest.raises(ProviderError) as raised:
        await smtp(auth_smtp, http).send(full_message())

    assert raised.value.transient is False
    assert raised.value.status_code == 530


async def test_smtp_require_tls_against_a_server_without_starttls_fails_permanently(
    plain_smtp: SmtpPeer, http: httpx.AsyncClient
) -> None:
    with pytest.raises(ProviderError) as raised:
        await smtp(plain_smtp, http, requireTls=True).send(full_message())

    assert raised.value.transient is False
    assert "STARTTLS" in raised.value.message
    assert plain_smtp.received == []


async def test_smtp_upgrades_with_starttls_when_offered(starttls_smtp: SmtpPeer, http: httpx.AsyncClient) -> None:
    await smtp(starttls_smtp, http, requireTls=True, tlsOptions={"rejectUnauthorized": False}).send(full_message())

    [mail] = starttls_smtp.received
    assert mail.tls is True


async def test_smtp_rejects_an_untrusted_certificate_by_default(
    starttls_smtp: SmtpPeer, http: httpx.AsyncClient
) -> None:
    with pytest.raises(ProviderError) as raised:
        await smtp(starttls_smtp, http).send(full_message())

    assert raised.value.transient is False
    assert "TLS" in raised.value.message
    assert starttls_smtp.received == []


async def test_smtp_ignore_tls_stays_in_plain_text(starttls_smtp: SmtpPeer, http: httpx.AsyncClient) -> None:
    await smtp(starttls_smtp, http, ignoreTls=True).send(full_message())

    [mail] = starttls_smtp.received
    assert mail.tls is False


async def test_smtp_secure_speaks_tls_from_the_first_byte(implicit_tls_smtp: SmtpPeer, http: httpx.AsyncClient) -> None:
    await smtp(implicit_tls_smtp, http, secure=True, tlsOptions={"rejectUnauthorized": False}).send(full_message())

    [mail] = implicit_tls_smtp.received
    assert mail.tls is True


async def test_smtp_reports_refused_recipients_when_others_were_accepted(
    plain_smtp: SmtpPeer, http: httpx.AsyncClient
) -> None:
    plain_smtp.refuse.add("grace@example.com")

    result = await smtp(plain_smtp, http).send(full_message())

    [mail] = plain_smtp.received
    assert "grace@example.com" not in mail.rcpt_tos
    assert result.failures == ["grace@example.com: 550 5.1.1 Mailbox unavailable"]


async def test_smtp_every_recipient_refused_is_permanent_and_deferred_is_transient(
    plain_smtp: SmtpPeer, http: httpx.AsyncClient
) -> None:
    message = full_message(to=["ada@example.com"], cc=[], bcc=[])
    plain_smtp.refuse.add("ada@example.com")
    with pytest.raises(ProviderError) as refused:
        await smtp(plain_smtp, http).send(message)

    plain_smtp.refuse.clear()
    plain_smtp.defer.add("ada@example.com")
    with pytest.raises(ProviderError) as deferred:
        await smtp(plain_smtp, http).send(message)

    assert (refused.value.transient, refused.value.status_code) == (False, 550)
    assert (deferred.value.transient, deferred.value.status_code) == (True, 450)
    assert plain_smtp.received == []


async def test_smtp_message_id_is_the_same_for_every_send_of_a_message(plain_smtp: SmtpPeer, http: httpx.AsyncClient) -> None:
    """Made from the message's identity (its job), not afresh: a copy sent again after a crash carries the first one's."""
    sent = []
    for identity in (SendIdentity("job-1", "email:smtp"), SendIdentity("job-1", "email:smtp-backup"), SendIdentity("job-2", "email:smtp")):
        provider = SmtpProvider({"host": "127.0.0.1", "port": str(plain_smtp.port), "ignoreTls": True}, http, identity=identity)
        sent.append((await provider.send(full_message(attachments=[]))).provider_message_id)

    ids = [parse(mail.data)["Message-ID"] for mail in plain_smtp.received]
    assert ids == sent
    assert ids[0] == ids[1] != ids[2]
    assert ids[0].endswith("@herald.test>")


async def test_smtp_sends_nothing_when_the_record_before_the_send_fails(plain_smtp: SmtpPeer, http: httpx.AsyncClient) -> None:
    """What ``before_handover`` raises (the engine: the job was taken over, the store is down) stops the send, and goes up as it is."""

    class TakenOver(Exception):
        pass

    async def refuse() -> None:
        raise TakenOver

    provider = SmtpProvider({"host": "127.0.0.1", "port": str(plain_smtp.port), "ignoreTls": True}, http, before_handover=refuse)
    with pytest.raises(TakenOver):
        await provider.send(full_message(attachments=[]))

    assert plain_smtp.received == [] and plain_smtp.connections() == 0


async def test_smtp_connection_lost_after_the_data_may_have_delivered(http: httpx.AsyncClient) -> None:
    """The server has the data and the connection drops before its reply: transient, and said to be maybe taken."""
    server = SmtpPeer()
    server.hold_data = threading.Event()
    server.start()
    try:
        sending = asyncio.ensure_future(smtp(server, http, ignoreTls=True).send(full_message(attachments=[])))
        while not server.received:
            await asyncio.sleep(0.01)
        server.drop_connections()
        with pytest.raises(ProviderError) as raised:
            await sending
    finally:
        server.hold_data.set()
        server.stop()

    assert raised.value.transient is True and raised.value.maybe_taken is True
    assert raised.value.message.endswith("the message's data had been sent, so the server may have taken it")


async def test_smtp_unreachable_server_is_transient(http: httpx.AsyncClient) -> None:
    provider = SmtpProvider({"host": "127.0.0.1", "port": str(free_port())}, http)

    with pytest.raises(ProviderError) as raised:
        await provider.send(full_message())

    assert raised.value.transient is True


async def test_smtp_without_a_host_is_a_permanent_error(http: httpx.AsyncClient) -> None:
    with pytest.raises(ProviderError) as raised:
        await SmtpProvider({"port": "25"}, http).send(full_message())

    assert raised.value.transient is False
    assert raised.value.message == "nodemailer: credential host is missing"


# ---------------------------------------------------------------------------
# HTTP email APIs
# ---------------------------------------------------------------------------


async def test_sendgrid_request(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_sendgrid(peer, api_key="SG.key")
    provider = SendGridProvider({"apiKey": "SG.key", "baseUrl": peer.url, "ipPoolName": "transactional"}, http)

    result = await provider.send(full_message())

    [request] = peer.requests
    body = request.json()
    assert body["personalizations"] == [
        {
            "to": [{"email": "ada@example.com"}, {"email": "grace@example.com"}],
            "cc": [{"email": "cc@example.com"}],
            "bcc": [{"email": "audit@example.com"}],
        }
    ]
    assert body["from"] == {"email": "billing@herald.test", "name": "Herald Billing"}
    assert body["reply_to"] == {"email": "support@herald.test"}
    assert body["subject"] == "Your invoice"
    assert body["content"] == [
        {"type": "text/plain", "value": "Hello Ada"},
        {"type": "text/html", "value": "<p>Hello <b>Ada</b></p>"},
    ]
    assert body["headers"] == {"X-Campaign": "spring"}
    assert body["ip_pool_name"] == "transactional"
    [attachment] = body["attachments"]
    assert base64.b64decode(attachment["content"]) == PDF.content
    assert (attachment["filename"], attachment["type"]) == ("invoice.pdf", "application/pdf")
    assert result.provider_message_id and result.provider_message_id.startswith("sg-")


async def test_mailgun_request_is_a_form_and_becomes_multipart_with_attachments(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    peers.install_mailgun(peer, api_key="mg-key", domain="mg.herald.test")
    provider = MailgunProvider({"apiKey": "mg-key", "domain": "mg.herald.test", "baseUrl": peer.url}, http)

    await provider.send(full_message(attachments=[]))
    result = await provider.send(full_message())

    plain, multipart = peer.requests
    assert plain.headers["content-type"].startswith("application/x-www-form-urlencoded")
    assert multipart.headers["content-type"].startswith("multipart/form-data")
    for request in (plain, multipart):
        assert request.form_value("from") == "Herald Billing <billing@herald.test>"
        assert request.form_values("to") == ["ada@example.com", "grace@example.com"]
        assert request.form_values("cc") == ["cc@example.com"]
        assert request.form_values("bcc") == ["audit@example.com"]
        assert request.form_value("text") == "Hello Ada"
        assert request.form_value("html") == "<p>Hello <b>Ada</b></p>"
        assert request.form_value("h:Reply-To") == "support@herald.test"
        assert request.form_value("h:X-Campaign") == "spring"
    assert multipart.form_value("attachment") == ("invoice.pdf", "application/pdf", PDF.content)
    assert result.provider_message_id and result.provider_message_id.endswith("@mg.herald.test>")


async def test_postmark_request(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_postmark(peer, token="pm-token")

    result = await PostmarkProvider({"apiKey": "pm-token", "baseUrl": peer.url}, http).send(full_message())

    [request] = peer.requests
    body = request.json()
    assert body["From"] == "Herald Billing <billing@herald.test>"
    assert body["To"] == "ada@example.com, grace@example.com"
    assert (body["Cc"], body["Bcc"], body["ReplyTo"]) == ("cc@example.com", "audit@example.com", "support@herald.test")
    assert (body["HtmlBody"], body["TextBody"]) == ("<p>Hello <b>Ada</b></p>", "Hello Ada")
    assert body["Headers"] == [{"Name": "X-Campaign", "Value": "spring"}]
    assert body["Attachments"] == [
        {"Name": "invoice.pdf", "Content": base64.b64encode(PDF.content).decode(), "ContentType": "application/pdf"}
    ]
    assert result.provider_message_id == result.raw["MessageID"]  # type: ignore[index]


async def test_postmark_refusal_in_a_success_answer_is_not_counted_as_sent(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    peer.route(
        "POST",
        "/email",
        status_answer(200, {"ErrorCode": 406, "Message": "You tried to send to an inactive recipient."}),
    )

    with pytest.raises(ProviderError) as raised:
        await PostmarkProvider({"apiKey": "pm-token", "baseUrl": peer.url}, http).send(full_message())

    assert raised.value.transient is False
    assert "inactive recipient" in raised.value.message


async def test_resend_request(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_resend(peer, api_key="re_key")

    result = await ResendProvider({"apiKey": "re_key", "baseUrl": peer.url}, http).send(full_message())

    [request] = peer.requests
    body = request.json()
    assert body["from"] == "Herald Billing <billing@herald.test>"
    assert body["to"] == ["ada@example.com", "grace@example.com"]
    assert (body["cc"], body["bcc"], body["reply_to"]) == (
        ["cc@example.com"],
        ["audit@example.com"],
        "support@herald.test",
    )
    assert (body["html"], body["text"]) == ("<p>Hello <b>Ada</b></p>", "Hello Ada")
    assert body["headers"] == {"X-Campaign": "spring"}
    assert body["attachments"][0]["filename"] == "invoice.pdf"
    assert base64.b64decode(body["attachments"][0]["content"]) == PDF.content
    assert result.provider_message_id


async def test_resend_invalid_key_answer_is_permanent_with_resends_text(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    peers.install_resend(peer, api_key="re_key")

    with pytest.raises(ProviderError) as raised:
        await ResendProvider({"apiKey": "re_other", "baseUrl": peer.url}, http).send(full_message())

    assert (raised.value.transient, raised.value.status_code) == (False, 403)
    assert raised.value.message == "resend answered 403: API key is invalid"


SES_CREDENTIALS = {"apiKey": "AKIDEXAMPLE", "secretKey": "ses-secret", "region": "eu-west-1"}


async def test_ses_simple_request_is_signed_for_the_region(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_ses(peer, access_key="AKIDEXAMPLE", secret_key="ses-secret", region="eu-west-1")
    message = full_message(attachments=[], headers={})

    result = await SesProvider({**SES_CREDENTIALS, "baseUrl": peer.url}, http).send(message)

    [request] = peer.requests
    assert (
        "/20" in request.headers["authorization"] and "/eu-west-1/ses/aws4_request" in request.headers["authorization"]
    )
    body = request.json()
    assert body["FromEmailAddress"] == "Herald Billing <billing@herald.test>"
    assert body["Destination"] == {
        "ToAddresses": ["ada@example.com", "grace@example.com"],
        "CcAddresses": ["cc@example.com"],
        "BccAddresses": ["audit@example.com"],
    }
    assert body["ReplyToAddresses"] == ["support@herald.test"]
    simple = body["Content"]["Simple"]
    assert simple["Subject"]["Data"] == "Your invoice"
    assert simple["Body"]["Html"]["Data"] == "<p>Hello <b>Ada</b></p>"
    assert simple["Body"]["Text"]["Data"] == "Hello Ada"
    assert result.provider_message_id and result.provider_message_id.startswith("0100018c-")


async def test_ses_sends_raw_mime_when_there_are_attachments(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_ses(peer, access_key="AKIDEXAMPLE", secret_key="ses-secret", region="eu-west-1")

    await SesProvider({**SES_CREDENTIALS, "baseUrl": peer.url}, http).send(full_message())

    [request] = peer.requests
    body = request.json()
    assert "Simple" not in body["Content"]
    mime = parse(base64.b64decode(body["Content"]["Raw"]["Data"]))
    assert mime["Subject"] == "Your invoice"
    assert mime["X-Campaign"] == "spring"
    assert mime["Bcc"] is None
    assert body["Destination"]["BccAddresses"] == ["audit@example.com"]
    assert [part.get_filename() for part in mime.iter_attachments()] == ["invoice.pdf"]


async def test_ses_throttling_is_transient_although_answered_400(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peer.route(
        "POST",
        "/v2/email/outbound-emails",
        status_answer(
            400, {"message": "Maximum sending rate exceeded."}, headers={"x-amzn-ErrorType": "LimitExceededException:"}
        ),
    )

    with pytest.raises(ProviderError) as raised:
        await SesProvider({**SES_CREDENTIALS, "baseUrl": peer.url}, http).send(full_message())

    assert raised.value.transient is True
    assert "LimitExceededException: Maximum sending rate exceeded." in raised.value.message


async def test_brevo_request(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_brevo(peer, api_key="xkeysib-key")

    result = await BrevoProvider({"apiKey": "xkeysib-key", "baseUrl": peer.url}, http).send(full_message())

    [request] = peer.requests
    body = request.json()
    assert body["sender"] == {"email": "billing@herald.test", "name": "Herald Billing"}
    assert body["to"] == [{"email": "ada@example.com"}, {"email": "grace@example.com"}]
    assert (body["cc"], body["bcc"]) == ([{"email": "cc@example.com"}], [{"email": "audit@example.com"}])
    assert body["replyTo"] == {"email": "support@herald.test"}
    assert (body["htmlContent"], body["textContent"]) == ("<p>Hello <b>Ada</b></p>", "Hello Ada")
    assert body["attachment"] == [{"name": "invoice.pdf", "content": base64.b64encode(PDF.content).decode()}]
    assert result.provider_message_id and result.provider_message_id.endswith("@smtp-relay.mailin.fr>")


# Without baseUrl the provider's own (regional) host is used: checked with a
# transport that records the request instead of leaving the machine.


def recording_client(answer: httpx.Response, seen: list[httpx.Request]) -> httpx.AsyncClient:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer

    return httpx.AsyncClient(transport=httpx.MockTransport(handle), timeout=5)


@pytest.mark.parametrize(
    ("provider_cls", "credentials", "answer", "expected_url"),
    [
        (SendGridProvider, {"apiKey": "k"}, httpx.Response(202), "https://api.sendgrid.com/v3/mail/send"),
        (
            SendGridProvider,
            {"apiKey": "k", "region": "eu"},
            httpx.Response(202),
            "https://api.eu.sendgrid.com/v3/mail/send",
        ),
        (
            MailgunProvider,
            {"apiKey": "k", "domain": "d.test"},
            httpx.Response(200, json={"id": "x"}),
            "https://api.mailgun.net/v3/d.test/messages",
        ),
        (
            MailgunProvider,
            {"apiKey": "k", "domain": "d.test", "region": "eu"},
            httpx.Response(200, json={"id": "x"}),
            "https://api.eu.mailgun.net/v3/d.test/messages",
        ),
        (
            PostmarkProvider,
            {"apiKey": "k"},
            httpx.Response(200, json={"MessageID": "x", "ErrorCode": 0}),
            "https://api.postmarkapp.com/email",
        ),
        (ResendProvider, {"apiKey": "k"}, httpx.Response(200, json={"id": "x"}), "https://api.resend.com/emails"),
        (
            SesProvider,
            {"apiKey": "k", "secretKey": "s", "region": "ap-south-1"},
            httpx.Response(200, json={"MessageId": "x"}),
            "https://email.ap-south-1.amazonaws.com/v2/email/outbound-emails",
        ),
        (
            BrevoProvider,
            {"apiKey": "k"},
            httpx.Response(201, json={"messageId": "x"}),
            "https://api.brevo.com/v3/smtp/email",
        ),
    ],
)
async def test_default_hosts(
    provider_cls: type, credentials: dict[str, str], answer: httpx.Response, expected_url: str
) -> None:
    seen: list[httpx.Request] = []
    async with recording_client(answer, seen) as client:
        await provider_cls(credentials, client).send(full_message())

    assert [str(request.url) for request in seen] == [expected_url]


# ---------------------------------------------------------------------------
# Idempotency keys: the same message's sends are one message to the provider
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("provider_class", [ResendProvider, BrevoProvider], ids=["resend", "brevo"])
async def test_a_provider_that_takes_a_key_gets_the_same_key_for_the_same_message_and_sends_it_once(
    peer: HttpPeer, http: httpx.AsyncClient, provider_class: type
) -> None:
    sends = (peers.install_resend if provider_class is ResendProvider else peers.install_brevo)(peer, api_key="k-1")
    message_one, message_two = SendIdentity("job-1", "email:mail"), SendIdentity("job-2", "email:mail")

    def provider(identity: SendIdentity) -> Any:
        return provider_class({"apiKey": "k-1", "baseUrl": peer.url}, http, identity=identity)

    first = await provider(message_one).send(full_message())
    again = await provider(message_one).send(full_message())
    other = await provider(message_two).send(full_message())

    assert sends.keys == [message_one.idempotency_key, message_one.idempotency_key, message_two.idempotency_key]
    assert sends.sent == 2
    assert first.provider_message_id and other.provider_message_id != first.provider_message_id
    if provider_class is ResendProvider:
        assert (again.provider_message_id, again.deduplicated) == (first.provider_message_id, False)
    else:
        # Brevo refuses a repeat (duplicate_parameter) without the first answer's id.
        assert (again.provider_message_id, again.deduplicated) == (None, True)


async def test_resend_answers_about_a_key_are_a_message_sent_already_or_one_still_being_sent(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    """409 invalid_idempotent_request (the key's first request had another body): Resend has it; 409 concurrent: try later."""
    peers.install_resend(peer, api_key="k-1")
    identity = SendIdentity("job-1", "email:mail")
    provider = ResendProvider({"apiKey": "k-1", "baseUrl": peer.url}, http, identity=identity)
    await provider.send(full_message())

    changed = await provider.send(full_message(subject="Rendered again at another time"))
    peer.route(
        "POST",
        "/emails",
        status_answer(409, {"statusCode": 409, "name": "concurrent_idempotent_requests", "message": "Same idempotency key used while original request is still in progress."}),
    )
    with pytest.raises(ProviderError) as raised:
        await provider.send(full_message())

    assert (changed.provider_message_id, changed.deduplicated) == (None, True)
    assert raised.value.transient is True and raised.value.status_code == 409
    assert "still in progress" in raised.value.message
