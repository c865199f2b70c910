"""The email's MIME form as SMTP sends it: what a mail reader parses out of it is what was sent."""

from __future__ import annotations

import email
from email import policy
from email.message import EmailMessage as ParsedMessage

import pytest

from herald.providers.base import Attachment, EmailMessage
from herald.providers.email.mime import render_mime


def parse(data: bytes) -> ParsedMessage:
    parsed = email.message_from_bytes(data, policy=policy.default)
    assert isinstance(parsed, ParsedMessage)
    return parsed


def text(part: ParsedMessage) -> str:
    """A text part's content with its line ends as a reader sees them (the wire's CRLF is read as LF)."""
    return part.get_content().replace("\r\n", "\n")


def bodies(parsed: ParsedMessage) -> dict[str, str]:
    return {part.get_content_type(): text(part) for part in parsed.walk() if not part.is_multipart()}


def test_plain_email_round_trips_with_crlf_lines() -> None:
    message = EmailMessage(
        to=["a@example.com", "b@example.com"],
        cc=["c@example.com"],
        reply_to="replies@example.com",
        subject="Your order 42",
        html="<p>Hello</p>\n<p>again</p>",
        text="Hello\r\nagain\rthird\n",
        headers={"X-Campaign": "spring", "Subject": "ignored: the builder writes its own"},
    )
    data, message_id = render_mime(message, "shop@example.com", "The Shop")
    assert b"\n" not in data.replace(b"\r\n", b"")  # every line ends with CRLF
    parsed = parse(data)
    assert parsed["From"] == "The Shop <shop@example.com>"
    assert parsed["To"] == "a@example.com, b@example.com"
    assert parsed["Cc"] == "c@example.com"
    assert parsed["Reply-To"] == "replies@example.com"
    assert parsed["Subject"] == "Your order 42"
    assert parsed.get_all("Subject") == ["Your order 42"]
    assert parsed["X-Campaign"] == "spring"
    assert parsed["Message-ID"] == message_id and message_id.endswith("@example.com>")
    assert parsed["Date"] and parsed["MIME-Version"] == "1.0"
    assert parsed.get_content_type() == "multipart/alternative"
    assert bodies(parsed) == {"text/plain": "Hello\nagain\nthird\n", "text/html": "<p>Hello</p>\n<p>again</p>\n"}
    assert "Bcc" not in parsed


def test_html_only_email_is_a_single_part() -> None:
    parsed = parse(render_mime(EmailMessage(to=["a@example.com"], subject="Hi", html="<b>hi</b>"), "s@example.com", None)[0])
    assert parsed.get_content_type() == "text/html"
    assert parsed["From"] == "s@example.com"
    assert text(parsed) == "<b>hi</b>\n"


def test_unicode_and_long_lines_go_as_base64() -> None:
    long_line = "x" * 1200
    message = EmailMessage(to=["a@example.com"], subject="Hi", html=f"<p>{long_line}</p>", text="Grüße, 日本 🎉")
    data, _ = render_mime(message, "s@example.com", "Zoë Café")
    assert max(len(line) for line in data.split(b"\r\n")) <= 998
    parsed = parse(data)
    assert str(parsed["From"]) == "Zoë Café <s@example.com>"
    assert bodies(parsed) == {"text/plain": "Grüße, 日本 🎉\n", "text/html": f"<p>{long_line}</p>\n"}


@pytest.mark.parametrize(
    "message",
    [
        EmailMessage(to=["a@example.com"], subject="Café ☕ ready", html="<p>hi</p>", text="hi"),
        EmailMessage(to=["a@example.com"], subject="s " * 600, html="<p>hi</p>", text="hi"),
        EmailMessage(to=["a@example.com"], subject="Hi", html="<p>hi</p>", headers={"X-Note": "naïve"}),
        EmailMessage(
            to=["a@example.com"],
            subject="Hi",
            html="<p>hi</p>",
            text="hi",
            attachments=[Attachment(name="a.txt", mime="text/plain", content=b"file body")],
        ),
    ],
    ids=["unicode subject", "subject longer than a line", "unicode header", "attachment"],
)
def test_what_needs_encoding_is_built_by_the_library(message: EmailMessage) -> None:
    data, message_id = render_mime(message, "s@example.com", None)
    assert max(len(line) for line in data.split(b"\r\n")) <= 998
    parsed = parse(data)
    assert " ".join(parsed["Subject"].split()) == " ".join(message.subject.split())
    assert parsed["Message-ID"] == message_id
    for name, value in message.headers.items():
        assert parsed[name] == value
    if message.attachments:
        [attachment] = [part for part in parsed.walk() if part.get_filename()]
        assert attachment.get_filename() == "a.txt" and attachment.get_content() == "file body"


def test_a_body_line_cannot_forge_the_boundary() -> None:
    message = EmailMessage(to=["a@example.com"], subject="Hi", html="<p>x</p>", text="--=_\n--=_0\nend")
    parsed = parse(render_mime(message, "s@example.com", None)[0])
    assert bodies(parsed)["text/plain"] == "--=_\n--=_0\nend\n"
