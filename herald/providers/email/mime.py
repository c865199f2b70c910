"""The MIME form of an email, for SMTP and for APIs that take a raw message (SES)."""

from __future__ import annotations

from email.message import EmailMessage as MimeMessage
from email.utils import formataddr, formatdate, make_msgid

from herald.providers.base import EmailMessage

# Headers the builder writes itself; a caller's copy of one of them would be a duplicate.
_MANAGED_HEADERS = frozenset(
    {"from", "to", "cc", "bcc", "subject", "reply-to", "date", "message-id", "mime-version", "content-type"}
)


def format_address(address: str, name: str | None) -> str:
    return formataddr((name, address)) if name else address


def build_mime(message: EmailMessage, from_address: str, sender_name: str | None) -> MimeMessage:
    """multipart/alternative (text + html), wrapped in multipart/mixed when there are attachments.

    Bcc recipients are left out of the headers: they belong to the envelope only.
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
    domain = from_address.rpartition("@")[2] or None
    mime["Message-ID"] = make_msgid(domain=domain)
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
