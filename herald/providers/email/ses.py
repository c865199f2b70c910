"""Amazon SES v2 SendEmail, signed with AWS Signature Version 4."""

from __future__ import annotations

import base64
import json
from typing import Any, ClassVar

from herald.providers.base import EmailMessage, EmailProvider, SendResult
from herald.providers.email.mime import build_mime, format_address
from herald.providers.http import error_from_response, error_text, json_object, send_raw
from herald.providers.signing import sigv4_headers

# SES answers 400 for these, but they only say "not now".
_THROTTLING_ERRORS = frozenset({"LimitExceededException", "TooManyRequestsException", "ThrottlingException"})


class SesProvider(EmailProvider):
    """Credentials: apiKey (access key id), secretKey (secret access key), region, from, senderName."""

    provider_id: ClassVar[str] = "ses"
    display_name: ClassVar[str] = "Amazon SES"
    required_credentials: ClassVar[tuple[str, ...]] = ("apiKey", "secretKey", "region")
    optional_credentials: ClassVar[tuple[str, ...]] = ("baseUrl",)

    async def send(self, message: EmailMessage) -> SendResult:
        access_key = self.require("apiKey")
        secret_key = self.require("secretKey")
        region = self.require("region")
        from_address, sender_name = self.sender(message)

        destination: dict[str, list[str]] = {"ToAddresses": list(message.to)}
        if message.cc:
            destination["CcAddresses"] = list(message.cc)
        if message.bcc:
            destination["BccAddresses"] = list(message.bcc)
        body: dict[str, Any] = {
            "FromEmailAddress": format_address(from_address, sender_name),
            "Destination": destination,
        }
        if message.reply_to:
            body["ReplyToAddresses"] = [message.reply_to]
        if message.attachments or message.headers:
            # Attachments and custom headers need the raw MIME form.
            mime = build_mime(message, from_address, sender_name)
            body["Content"] = {"Raw": {"Data": base64.b64encode(mime.as_bytes()).decode()}}
        else:
            email_body = {"Html": {"Data": message.html, "Charset": "UTF-8"}}
            if message.text:
                email_body["Text"] = {"Data": message.text, "Charset": "UTF-8"}
            body["Content"] = {"Simple": {"Subject": {"Data": message.subject, "Charset": "UTF-8"}, "Body": email_body}}

        url = f"{self.base_url(f'https://email.{region}.amazonaws.com')}/v2/email/outbound-emails"
        payload = json.dumps(body).encode()
        headers = sigv4_headers(
            method="POST",
            url=url,
            body=payload,
            headers={"content-type": "application/json"},
            service="ses",
            region=region,
            access_key=access_key,
            secret_key=secret_key,
        )
        response = await send_raw(self.http, self.provider_id, "POST", url, content=payload, headers=headers)
        if not response.is_success:
            error_type = response.headers.get("x-amzn-errortype", "").split(":")[0]
            text = f"{error_type}: {error_text(response)}" if error_type else None
            error = error_from_response(self.provider_id, response, text)
            if error_type in _THROTTLING_ERRORS:
                error.transient = True
            raise error
        answer = json_object(response)
        return SendResult(provider_message_id=answer.get("MessageId"), raw=answer)
