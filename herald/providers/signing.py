"""Request signing: AWS Signature Version 4 (SES, SNS) and the webhook HMAC Novu's generic webhooks send."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from herald.providers.base import Provider

# Header of Novu's chat-webhook and push-webhook providers: the hex HMAC-SHA256
# of the raw JSON body under the integration's secret key.
WEBHOOK_SIGNATURE_HEADER = "x-novu-signature"


def webhook_signature(body: bytes, secret: str) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_secret(provider: Provider[Any]) -> str | None:
    """The HMAC key of a generic webhook integration, or None to send unsigned.

    ``hmac`` decides when it is given: ``false`` sends unsigned even with a
    secretKey; ``true`` signs with secretKey (else apiKey) and refuses to
    send without either. Without ``hmac`` the body is signed when there is a
    secretKey, as Novu's chat-webhook and push-webhook do, so receivers that
    check the signature keep working.
    """
    if provider.credentials.get("hmac") not in (None, "") and not provider.flag("hmac"):
        return None
    secret = provider.credential("secretKey")
    if secret:
        return secret
    if provider.flag("hmac"):
        secret = provider.credential("apiKey")
        if not secret:
            raise provider.error("hmac is on but credential secretKey is missing", transient=False)
    return secret


def sigv4_headers(
    *,
    method: str,
    url: str,
    body: bytes,
    headers: dict[str, str],
    service: str,
    region: str,
    access_key: str,
    secret_key: str,
    session_token: str | None = None,
) -> dict[str, str]:
    """``headers`` plus the SigV4 ``Authorization`` and ``X-Amz-Date`` (and session token) for this request."""
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    SigV4Auth(Credentials(access_key, secret_key, session_token), service, region).add_auth(request)
    return {name: value for name, value in request.headers.items()}
