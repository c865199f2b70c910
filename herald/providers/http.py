"""The HTTP client providers share, and the mapping of HTTP failures to ProviderError."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import httpx

from herald import __version__
from herald.kit.crypto import mask_secret
from herald.providers.base import ProviderError

CONNECT_TIMEOUT = 5.0
TOTAL_TIMEOUT = 15.0
# Statuses worth retrying besides 5xx: request timeout, and rate limiting.
_TRANSIENT_4XX = frozenset({408, 429})
_ERROR_KEYS = (
    "message",
    "Message",
    "error_description",
    "error",
    "errors",
    "detail",
    "details",
    "title",
    "description",
    "reason",
    "error-text",
)


def create_http_client(
    *,
    timeout: float = TOTAL_TIMEOUT,
    connect_timeout: float = CONNECT_TIMEOUT,
    http2: bool = True,
    verify: ssl.SSLContext | bool = True,
) -> httpx.AsyncClient:
    """The client the engine hands to providers.

    ``timeout`` bounds every call as a whole (see :func:`send_request`) as
    well as each read and write; HTTP/2 is negotiated over TLS where the
    server offers it, which APNs requires. ``verify`` is the TLS trust (the
    system's by default; a test peer's own certificate in tests).
    """
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
        http2=http2,
        verify=verify,
        follow_redirects=False,
        headers={"user-agent": f"herald/{__version__}"},
    )


async def send_request(
    http: httpx.AsyncClient, provider_id: str, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    """Send one request; a success (2xx) answer is returned, anything else raises ProviderError."""
    response = await send_raw(http, provider_id, method, url, **kwargs)
    if not response.is_success:
        raise error_from_response(provider_id, response)
    return response


async def send_raw(http: httpx.AsyncClient, provider_id: str, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """Send one request and return whatever the server answered; failing to get an answer raises."""
    # httpx times each phase; the overall bound keeps a server that trickles
    # bytes from holding a worker longer than the read timeout.
    deadline = http.timeout.read or TOTAL_TIMEOUT
    try:
        async with asyncio.timeout(deadline):
            return await http.request(method, url, **kwargs)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise ProviderError(
            f"{provider_id}: no answer from {_origin(url)} within {deadline:g} s ({type(exc).__name__})",
            transient=True,
        ) from exc
    except httpx.UnsupportedProtocol as exc:
        raise ProviderError(f"{provider_id}: unsupported URL {_masked_url(url)!r}: {exc}", transient=False) from exc
    except httpx.InvalidURL as exc:
        raise ProviderError(f"{provider_id}: invalid URL {_masked_url(url)!r}: {exc}", transient=False) from exc
    except httpx.TransportError as exc:
        raise ProviderError(
            f"{provider_id}: could not reach {_origin(url)}: {exc or type(exc).__name__}", transient=True
        ) from exc


def error_from_response(provider_id: str, response: httpx.Response, text: str | None = None) -> ProviderError:
    """ProviderError for a non-success answer, carrying the provider's own error text."""
    status = response.status_code
    return ProviderError(
        f"{provider_id} answered {status}: {text or error_text(response)}",
        transient=is_transient_status(status),
        status_code=status,
    )


def is_transient_status(status: int) -> bool:
    return status >= 500 or status in _TRANSIENT_4XX


def error_text(response: httpx.Response) -> str:
    """The error message in a provider's answer, whatever its shape; the reason phrase when there is none."""
    body = json_body(response)
    text = _find_message(body) if body is not None else None
    if not text:
        text = response.text.strip()[:500]
    return text or response.reason_phrase or "no error text"


def json_body(response: httpx.Response) -> Any:
    """The decoded JSON answer, or None when the answer is not JSON."""
    try:
        return response.json()
    except ValueError:
        return None


def json_object(response: httpx.Response) -> dict[str, Any]:
    body = json_body(response)
    return body if isinstance(body, dict) else {}


def _find_message(body: Any, depth: int = 0) -> str | None:
    if depth > 4:
        return None
    if isinstance(body, str):
        return body.strip() or None
    if isinstance(body, list):
        parts = [part for part in (_find_message(item, depth + 1) for item in body) if part]
        return "; ".join(parts) or None
    if isinstance(body, dict):
        for key in _ERROR_KEYS:
            if key in body:
                found = _find_message(body[key], depth + 1)
                if found:
                    code = body.get("code") or body.get("ErrorCode") or body.get("errorCode")
                    if isinstance(code, (str, int)) and not isinstance(code, bool) and str(code) not in found:
                        return f"{found} (code {code})"
                    return found
    return None


def _origin(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return url
    return f"{parsed.scheme}://{parsed.netloc.decode()}" if parsed.host else url


def _masked_url(url: str) -> str:
    """A URL as an error message may show it: its origin, never its path (a webhook's path is its secret)."""
    origin = _origin(url)
    return f"{origin}/****" if origin != url else mask_secret(url)
