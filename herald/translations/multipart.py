"""Reading a multipart/form-data body (the translation uploads) with the standard library's MIME parser.

The request guard has already bounded the body's size; this only splits it into fields and files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesParser
from email.policy import HTTP

from herald.kit.errors import BadRequestError
from herald.translations.service import UploadedFile

MAX_PARTS = 100
"""Fields and files of one upload: more is refused rather than parsed."""


@dataclass
class Form:
    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, list[UploadedFile]] = field(default_factory=dict)

    def files_named(self, *names: str) -> list[UploadedFile]:
        return [file for name in names for file in self.files.get(name, [])]


def parse_form(content_type: str | None, body: bytes) -> Form:
    """Fields and files of a multipart/form-data body; 400 when the body is not one."""
    if (
        not content_type
        or not content_type.lower().startswith("multipart/form-data")
        or "boundary=" not in content_type
    ):
        raise BadRequestError("The request must be multipart/form-data with the files to upload")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise BadRequestError("The multipart/form-data body could not be read")
    parts = message.get_payload()
    if not isinstance(parts, list) or len(parts) > MAX_PARTS:
        raise BadRequestError(f"The upload must have between 1 and {MAX_PARTS} fields and files")
    form = Form()
    for part in parts:
        if not isinstance(part, Message):
            continue
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, tuple):  # an RFC 2231 value: (charset, language, text)
            name = name[2]
        if not isinstance(name, str):
            continue
        filename = part.get_filename()
        if filename is not None:  # named in answers (errors): text that encodes, whatever the header held
            filename = str(filename).encode("utf-8", "replace").decode("utf-8")
        raw = part.get_payload(decode=True)
        data = raw if isinstance(raw, bytes) else b""
        if filename is None:
            form.fields[name] = data.decode("utf-8", "replace")
        else:
            form.files.setdefault(name, []).append(UploadedFile(filename=filename, content=data))
    return form
