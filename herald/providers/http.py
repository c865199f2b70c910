"""The HTTP client providers share, and the mapping of HTTP failures to ProviderError."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import aiohttp
import httpcore
import httpx

from herald import __version__
from herald.kit.crypto import mask_secret
from herald.kit.outbound import GuardedAsyncBackend, OutboundPolicy, OutboundRefused
from herald.providers.answers import read_streamed
from herald.providers.base import ProviderError
from herald.providers.email.smtp_pool import SmtpPool
from herald.providers.http1 import Http1Client, build_request

CONNECT_TIMEOUT = 5.0
TOTAL_TIMEOUT = 15.0
# Statuses worth retrying besides 5xx: request timeout, and rate limiting.
_TRANSIENT_4XX = frozenset({408, 429})
# How much of a provider's error text is kept (execution details, errorText): a
# provider's own message fits; a page of whatever answered does not.
ERROR_EXCERPT_CHARS = 200
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


class OutboundClient(httpx.AsyncClient):
    """The providers' client: every connection it opens is checked by ``outbound`` (kit/outbound.py).

    :func:`send_raw` sends HTTP/1.1 requests through ``http1`` (aiohttp,
    providers/http1.py) and HTTP/2 ones through httpx's transport. Providers
    that connect without it (SMTP, the FCM token request) read the same policy
    from it (:func:`outbound_policy`).
    """

    def __init__(self, *, outbound: OutboundPolicy, transport: httpx.AsyncBaseTransport, http1: Http1Client, **kwargs: Any) -> None:
        super().__init__(transport=transport, **kwargs)
        self.outbound = outbound
        self.outbound_transport = transport
        self.http1 = http1
        # SMTP connections kept open between sends, per integration (providers/email/smtp_pool.py):
        # they live as long as the client, which the engine keeps for the worker's life.
        self.smtp_pool = SmtpPool()

    async def aclose(self) -> None:
        await self.smtp_pool.aclose()
        await self.http1.aclose()
        await super().aclose()

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.smtp_pool.aclose()
        await self.http1.aclose()
        await super().__aexit__(*exc_info)


class OutboundTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose network backend applies the outbound policy.

    httpx's transport takes no network backend, so its pool (httpcore's own)
    is built again here with the same TLS context, HTTP versions and limits,
    and a :class:`GuardedAsyncBackend`. It carries HTTP/2 (APNs) and the
    few HTTP/1.1 requests not sent through aiohttp (providers/http1.py): one
    connection an origin, where a pool of Herald's own, linear in its
    connections, measured no gain (docs/performance.md, overrides).
    """

    def __init__(
        self,
        policy: OutboundPolicy,
        *,
        verify: ssl.SSLContext | bool = True,
        http2: bool = True,
        limits: httpx.Limits | None = None,
    ) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)  # httpx's default
        super().__init__(verify=verify, http2=http2, limits=limits, trust_env=False)
        self.policy = policy
        self._pool = httpcore.AsyncConnectionPool(
            # SSL_CERT_FILE / SSL_CERT_DIR are still honoured, as httpx does by default.
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=True),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=http2,
            network_backend=GuardedAsyncBackend(policy),
        )


def create_http_client(
    *,
    timeout: float = TOTAL_TIMEOUT,
    connect_timeout: float = CONNECT_TIMEOUT,
    http2: bool = True,
    verify: ssl.SSLContext | bool = True,
    outbound: OutboundPolicy | None = None,
) -> OutboundClient:
    """The client the engine hands to providers.

    ``timeout`` bounds every call as a whole (see :func:`send_request`) as
    well as each read and write; HTTP/2 is negotiated over TLS where the
    server offers it, which APNs requires. ``verify`` is the TLS trust (the
    system's by default; a test peer's own certificate in tests).
    ``outbound`` is the outbound policy every connection is checked against
    (the strict default when None). Proxies named in the environment are not
    used: a proxy would connect on Herald's behalf to addresses never checked.
    """
    policy = outbound if outbound is not None else OutboundPolicy()
    connect = min(connect_timeout, timeout)
    return OutboundClient(
        outbound=policy,
        transport=OutboundTransport(policy, verify=verify, http2=http2),
        http1=Http1Client(policy, verify=verify, connect_timeout=connect, read_timeout=timeout),
        trust_env=False,
        timeout=httpx.Timeout(timeout, connect=connect),
        follow_redirects=False,
        headers={"user-agent": f"herald/{__version__}"},
    )


def outbound_policy(http: httpx.AsyncClient) -> OutboundPolicy:
    """The outbound policy ``http`` applies; the strict default for a client not made by create_http_client."""
    return http.outbound if isinstance(http, OutboundClient) else OutboundPolicy()


async def send_request(
    http: httpx.AsyncClient, provider_id: str, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    """Send one request; a success (2xx) answer is returned, anything else raises ProviderError."""
    response = await send_raw(http, provider_id, method, url, **kwargs)
    if not response.is_success:
        raise error_from_response(provider_id, response)
    return response


async def send_raw(
    http: httpx.AsyncClient, provider_id: str, method: str, url: str, *, http2: bool = False, **kwargs: Any
) -> httpx.Response:
    """Send one request and return whatever the server answered; failing to get an answer raises.

    ``http2``: the request goes over httpx's transport, which negotiates
    HTTP/2 over TLS (Apple's push service speaks nothing else); every other
    request of the providers' client goes over HTTP/1.1 (providers/http1.py).
    """
    # The client times each phase; the overall bound keeps a server that trickles
    # bytes from holding a worker longer than the read timeout.
    deadline = http.timeout.read or TOTAL_TIMEOUT
    try:
        async with asyncio.timeout(deadline):
            if isinstance(http, OutboundClient):
                return await _exchange(http, method, url, http2=http2, **kwargs)
            async with http.stream(method, url, **kwargs) as response:
                return await read_streamed(response)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise ProviderError(
            f"{provider_id}: no answer from {_origin(url)} within {deadline:g} s ({type(exc).__name__})",
            transient=True,
        ) from exc
    except httpx.UnsupportedProtocol as exc:
        raise ProviderError(f"{provider_id}: unsupported URL {_masked_url(url)!r}: {exc}", transient=False) from exc
    except (httpx.InvalidURL, aiohttp.InvalidURL) as exc:
        raise ProviderError(f"{provider_id}: invalid URL {_masked_url(url)!r}: {exc}", transient=False) from exc
    except httpx.DecodingError as exc:
        raise ProviderError(f"{provider_id}: could not decode the answer from {_origin(url)}: {exc}", transient=True) from exc
    except (httpx.TransportError, aiohttp.ClientError) as exc:
        raise ProviderError(
            f"{provider_id}: could not reach {_origin(url)}: {exc or type(exc).__name__}", transient=True
        ) from exc
    except OutboundRefused as exc:
        raise refused_error(provider_id, exc) from None


async def _exchange(
    http: OutboundClient, method: str, url: str, *, http2: bool, auth: tuple[str, str] | None = None, **kwargs: Any
) -> httpx.Response:
    """One request without ``AsyncClient.send``'s layers around it.

    ``send`` runs each request through an auth flow, a redirect loop, the
    cookie jar and the event hooks. The providers' client uses none of them:
    no client-wide auth, redirects never followed, no hooks, and no cookies,
    which must not travel from one provider's answer to another's request.
    The request is built as the client builds it (its base headers), a Basic
    ``auth`` pair is applied by httpx's own BasicAuth, and the body is read
    before returning, as ``request`` does, at most MAX_ANSWER_BYTES of it
    (providers/answers.py).
    """
    request = build_request(http, method, url, **kwargs)
    if auth is not None:
        request = next(httpx.BasicAuth(*auth).auth_flow(request))
    if not http2:
        return await http.http1.send(request)
    response = await http.outbound_transport.handle_async_request(request)
    response.request = request
    return await read_streamed(response)


def refused_error(provider_id: str, refused: OutboundRefused) -> ProviderError:
    """The permanent failure of a send the outbound policy refused."""
    return ProviderError(f"{provider_id}: {refused}", transient=False)


def error_from_response(provider_id: str, response: httpx.Response, text: str | None = None) -> ProviderError:
    """ProviderError for a non-success answer, carrying the provider's own error text."""
    status = response.status_code
    return ProviderError(
        f"{provider_id} answered {status}: {excerpt(text) if text else error_text(response)}",
        transient=is_transient_status(status),
        status_code=status,
    )


def is_transient_status(status: int) -> bool:
    return status >= 500 or status in _TRANSIENT_4XX


def error_text(response: httpx.Response) -> str:
    """The error message in a provider's JSON answer, whatever its shape, cut to a short excerpt.

    Nothing else of the answer is repeated: whatever answered may not be the
    provider (a URL pointing at some other service), and what the failure
    records is shown to API callers. An answer without a JSON error field is
    described by its reason phrase.
    """
    text = error_field(json_body(response))
    if text:
        return text
    return f"{response.reason_phrase or 'no reason phrase'} (no JSON error field)"


def error_field(body: Any) -> str | None:
    """A short excerpt of the error message in a decoded JSON answer (see :func:`error_text`), or None."""
    text = _find_message(body) if body is not None else None
    return excerpt(text) if text else None


def excerpt(text: str, limit: int = ERROR_EXCERPT_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


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
