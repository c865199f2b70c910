"""The MIME form of an email, for SMTP and for APIs that take a raw message (SES)."""

from __future__ import annotations

import base64
import secrets
from email.message import EmailMessage as MimeMessage
from email.utils import formataddr, formatdate, make_msgid

from herald.providers.base import EmailMessage

# Headers the builder writes itself; a caller's copy of one of them would be a duplicate.
_MANAGED_HEADERS = frozenset(
    {"from", "to", "cc", "bcc", "subject", "reply-to", "date", "message-id", "mime-version", "content-type"}
)


# RFC 5322's limit on a line; the builder by hand writes no longer one (it folds nothing).
_MAX_LINE = 998
_FIELD_NAME_CHARS = frozenset(chr(code) for code in range(33, 127)) - {":"}


def format_address(address: str, name: str | None) -> str:
    return formataddr((name, address)) if name else address


def build_mime(
    message: EmailMessage, from_address: str, sender_name: str | None, message_id: str | None = None
) -> MimeMessage:
    """multipart/alternative (text + html), wrapped in multipart/mixed when there are attachments.

    Bcc recipients are left out of the headers: they belong to the envelope only.
    ``message_id``: the Message-ID to write (one made afresh when None).
    """
    mime = MimeMessage()
    mime["From"] = format_address(from_address, sender_name)
    mime["To"] = ", ".join(message.to)
    if message.cc:
        mime["Cc"] = ", ".join(message.cc)
    if message.reply_to:
        mime["Reply-To"] = message.reply_to
    mime["Subject"] = message.subject
    mime["Date"] = formatdate(localtime=False, usegmt=True)
    mime["Message-ID"] = message_id or make_msgid(domain=from_address.rpartition("@")[2] or None)
    for name, value in message.headers.items():
        if name.lower() not in _MANAGED_HEADERS:
            mime[name] = value

    if message.text:
        mime.set_content(message.text)
        mime.add_alternative(message.html, subtype="html")
    else:
        mime.set_content(message.html, subtype="html")
    for attachment in message.attachments:
        maintype, _, subtype = attachment.mime.partition("/")
        mime.add_attachment(
            attachment.content,
            maintype=maintype or "application",
            subtype=subtype or "octet-stream",
            filename=attachment.name,
        )
    return mime


def render_mime(
    message: EmailMessage, from_address: str, sender_name: str | None, message_id: str | None = None
) -> tuple[bytes, str]:
    """The email as it goes over SMTP (CRLF lines), and its Message-ID (``message_id``, or one made afresh).

    The common email (headers of plain ASCII text, no attachments) is written
    here, by hand: the standard library's EmailMessage took 0.9 ms an email on
    the 2-core machine, parsing back every header it is given into its header
    objects, a fifth of a worker's CPU an email over SMTP (``python -m
    bench.email``); this takes a tenth of that. Only the assembly is done here:
    the address and date forms are the library's (``formataddr``,
    ``formatdate``, ``make_msgid``), and a body that is not short-lined ASCII
    goes as base64. Anything else (a header that needs RFC 2047 encoding or
    would need folding, attachments) is built by :func:`build_mime` and
    flattened by the library, as before.
    """
    sender = format_address(from_address, sender_name)
    message_id = message_id or make_msgid(domain=from_address.rpartition("@")[2] or None)
    headers = [("From", sender), ("To", ", ".join(message.to))]
    if message.cc:
        headers.append(("Cc", ", ".join(message.cc)))
    if message.reply_to:
        headers.append(("Reply-To", message.reply_to))
    headers += [("Subject", message.subject), ("Date", formatdate(localtime=False, usegmt=True)), ("Message-ID", message_id)]
    headers += [(name, value) for name, value in message.headers.items() if name.lower() not in _MANAGED_HEADERS]
    if message.attachments or not all(_plain_field(name, value) for name, value in headers):
        mime = build_mime(message, from_address, sender_name, message_id)
        return mime.as_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"), str(mime["Message-ID"])
    lines = [f"{name}: {value}" for name, value in headers]
    lines.append("MIME-Version: 1.0")
    html = _part("html", message.html)
    if not message.text:
        return "\r\n".join(lines).encode("ascii") + b"\r\n" + html, message_id
    text = _part("plain", message.text)
    boundary = _boundary(text, html)
    lines.append(f'Content-Type: multipart/alternative; boundary="{boundary}"')
    # The CRLF before a delimiter is the delimiter's (RFC 2046): each part keeps its own last line end.
    delimiter = b"--" + boundary.encode("ascii")
    head = "\r\n".join(lines).encode("ascii")
    body = delimiter + b"\r\n" + text + b"\r\n" + delimiter + b"\r\n" + html + b"\r\n" + delimiter + b"--\r\n"
    return head + b"\r\n\r\n" + body, message_id


def _plain_field(name: str, value: str) -> bool:
    """A header the builder by hand may write as it is: printable ASCII on one line of legal length."""
    return (
        bool(name)
        and all(char in _FIELD_NAME_CHARS for char in name)
        and value.isascii()
        and value.isprintable()
        and len(name) + 2 + len(value) <= _MAX_LINE
    )


def _part(subtype: str, content: str) -> bytes:
    """A text part's headers and body: 7bit when it is ASCII in short lines, base64 otherwise.

    Lines are split as the library splits them (on CR, LF and CRLF only) and
    ended with CRLF; base64 lines are 76 characters, as MIME asks.
    """
    lines = content.encode("utf-8").splitlines()
    body = b"\r\n".join(lines) + b"\r\n"  # text's canonical form, which base64 carries as it is
    if content.isascii() and all(len(line) <= _MAX_LINE for line in lines):
        encoding = "7bit"
    else:
        encoding, body = "base64", base64.encodebytes(body).replace(b"\n", b"\r\n")
    head = f'Content-Type: text/{subtype}; charset="utf-8"\r\nContent-Transfer-Encoding: {encoding}\r\n\r\n'
    return head.encode("ascii") + body


def _boundary(*parts: bytes) -> str:
    """A multipart boundary that no line of the parts begins with."""
    while True:
        boundary = f"=_{secrets.token_hex(16)}"
        if not any(b"--" + boundary.encode("ascii") in part for part in parts):
            return boundary
