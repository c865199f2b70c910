"""Amazon SNS Publish to a phone number, through the Query API signed with SigV4."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from typing import ClassVar
from urllib.parse import urlencode

import httpx

from herald.providers.base import ProviderError, SendResult, SmsMessage, SmsProvider
from herald.providers.http import error_text, excerpt, is_transient_status, send_raw
from herald.providers.signing import sigv4_headers

_THROTTLING_CODES = frozenset({"Throttling", "ThrottlingException", "ThrottledException", "KMSThrottling"})


class SnsProvider(SmsProvider):
    """Credentials: apiKey (access key id), secretKey (secret access key), region, from (optional:
    an E.164 origination number, or an alphanumeric sender id)."""

    provider_id: ClassVar[str] = "sns"
    display_name: ClassVar[str] = "Amazon SNS"
    required_credentials: ClassVar[tuple[str, ...]] = ("apiKey", "secretKey", "region")
    optional_credentials: ClassVar[tuple[str, ...]] = ("baseUrl",)

    async def send(self, message: SmsMessage) -> SendResult:
        access_key = self.require("apiKey")
        secret_key = self.require("secretKey")
        region = self.require("region")
        self.check_recipient(message)

        params = [
            ("Action", "Publish"),
            ("Version", "2010-03-31"),
            ("PhoneNumber", message.to),
            ("Message", message.content),
        ]
        sender = message.from_ or self.credential("from")
        if sender:
            attribute = "AWS.MM.SMS.OriginationNumber" if sender.startswith("+") else "AWS.SNS.SMS.SenderID"
            params += [
                ("MessageAttributes.entry.1.Name", attribute),
                ("MessageAttributes.entry.1.Value.DataType", "String"),
                ("MessageAttributes.entry.1.Value.StringValue", sender),
            ]
        payload = urlencode(params).encode()
        url = f"{self.base_url(f'https://sns.{region}.amazonaws.com')}/"
        headers = sigv4_headers(
            method="POST",
            url=url,
            body=payload,
            headers={"content-type": "application/x-www-form-urlencoded; charset=utf-8"},
            service="sns",
            region=region,
            access_key=access_key,
            secret_key=secret_key,
        )
        response = await send_raw(self.http, self.provider_id, "POST", url, content=payload, headers=headers)
        root = _parse_xml(response)
        if not response.is_success:
            raise self._error(response, root)
        message_id = _text(root, "MessageId")
        return SendResult(
            provider_message_id=message_id, raw={"MessageId": message_id, "RequestId": _text(root, "RequestId")}
        )

    def _error(self, response: httpx.Response, root: ElementTree.Element | None) -> ProviderError:
        code = _text(root, "Code")
        message = _text(root, "Message")
        # The XML error's Message (or a JSON error field), never the rest of the answer (see http.error_text).
        text = excerpt(message) if message else error_text(response)
        return self.error(
            f"answered {response.status_code}: {code + ': ' if code else ''}{text}",
            transient=is_transient_status(response.status_code) or code in _THROTTLING_CODES,
            status_code=response.status_code,
        )


def _parse_xml(response: httpx.Response) -> ElementTree.Element | None:
    try:
        return ElementTree.fromstring(response.content)
    except ElementTree.ParseError:
        return None


def _text(root: ElementTree.Element | None, tag: str) -> str | None:
    if root is None:
        return None
    element = root.find(f".//{{*}}{tag}")
    if element is None:
        element = root.find(f".//{tag}")
    return element.text if element is not None and element.text else None
