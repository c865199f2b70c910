"""Provider requests over HTTP/1.1 with aiohttp's client, behind the outbound policy.

Most provider requests are small POSTs to one origin over a kept-alive
connection, and on a busy worker the client's own work per request is a
large share of an email's CPU. Measured alone against a bare peer on the
2-core machine (2026-11-26), httpx over httpcore spent about 600 µs of CPU a
request (its connection pool's locks and checks, h11's pure-Python parser,
its request and response models), aiohttp's client, with its parser in C,
about 110 µs, and this module's path, httpx's models included, about 220 µs.
So HTTP/1.1 requests go through aiohttp, and httpx
keeps what aiohttp does not do: HTTP/2, which Apple's push service requires
(``send_raw(..., http2=True)``).

Providers still see httpx's models: the request is built as an
``httpx.Request`` (the same body bytes and headers as ``AsyncClient`` would
send, and ``response.request`` as before) and the answer comes back as an
``httpx.Response``, whose body httpx decodes by its ``content-encoding``
(aiohttp is told not to decode it, so what is accepted and what is decoded
stay one library's).

The outbound policy (kit/outbound.py) applies as it does to httpx's
connections: a name is resolved by :class:`PolicyResolver`, which checks every
address before aiohttp may connect to one of them, and aiohttp connects to
those addresses with the name kept for TLS (SNI and the certificate check).
aiohttp does not ask the resolver about an IP address written in the URL, so
:func:`check_literal_host` checks that one before the request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import socket
import ssl
from functools import lru_cache
from typing import Any

import aiohttp
import httpx
import orjson
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from herald.kit.outbound import OutboundPolicy
from herald.providers.answers import MAX_ANSWER_BYTES, bounded_answer

# httpx's transport keeps this many connections at most, and an idle one this long.
MAX_CONNECTIONS = 100
KEEPALIVE_SECONDS = 5.0
# Hosts whose literal-address check passed (or that are names, left to the resolver), kept up to this many.
CHECKED_HOSTS = 1024


class PolicyResolver(AbstractResolver):
    """Resolves a host name once and checks every address it resolved to (OutboundRefused otherwise)."""

    def __init__(self, policy: OutboundPolicy, timeout: float | None) -> None:
        self.policy = policy
        self.timeout = timeout

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        addresses = await self.policy.resolve(host, port, self.timeout)
        return [
            ResolveResult(hostname=host, host=str(sockaddr[0]), port=port, family=address_family, proto=0, flags=0)
            for address_family, sockaddr in addresses
        ]

    async def close(self) -> None:
        return None


def check_literal_host(policy: OutboundPolicy, host: str) -> None:
    """Check a URL's host that is an IP address (aiohttp connects to it without resolving); a name is left to the resolver."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return
    policy.check(host, [host])


def json_content(value: Any) -> bytes:
    """``value`` as httpx's ``json=`` encodes it (compact, UTF-8, NaN refused), by orjson where it can.

    A provider's body carries the rendered email; json.dumps took about a
    twentieth of a worker's CPU an HTTP email. orjson writes the same JSON for
    what it accepts (a float may be spelled shorter: 1e-7 for 1e-07); what it
    refuses (integer keys, integers past 64 bits) and floats that are not
    numbers go through json.dumps exactly as httpx does.
    """
    try:
        content = orjson.dumps(value)
    except TypeError:
        content = None
    if content is None or (b"null" in content and _has_non_finite(value)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    return content


def _has_non_finite(value: Any) -> bool:
    """Whether a float NaN or infinity is in ``value`` (orjson writes them as null; httpx refuses them)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_non_finite(item) for item in value)
    return False


@lru_cache(maxsize=512)
def parsed_url(url: str) -> httpx.URL:
    """httpx's parse of a URL, kept: a provider sends to a handful of URLs, and httpx's parser costs tens of µs."""
    return httpx.URL(url)


class Http1Client:
    """aiohttp sessions for one providers' client, one per event loop (a session belongs to the loop it was made in)."""

    def __init__(self, policy: OutboundPolicy, *, verify: ssl.SSLContext | bool, connect_timeout: float | None, read_timeout: float | None) -> None:
        self.policy = policy
        # A context of its own: httpcore sets ALPN (h2) on the context it is given, and a server
        # that chose h2 would get HTTP/1.1 from aiohttp.
        self._ssl_context = httpx.create_ssl_context(verify=verify, trust_env=True)
        self._connect_timeout = connect_timeout
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._checked_hosts: set[str] = set()

    def session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                ssl=self._ssl_context,
                resolver=PolicyResolver(self.policy, self._connect_timeout),
                # Every new connection resolves (and checks) afresh, as httpx's did.
                use_dns_cache=False,
                limit=MAX_CONNECTIONS,
                keepalive_timeout=KEEPALIVE_SECONDS,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                # No cookie travels from one provider's answer to another's request.
                cookie_jar=aiohttp.DummyCookieJar(),
                # httpx decodes the body (see the module's docstring); the request's headers are httpx's.
                auto_decompress=False,
                skip_auto_headers=("Content-Type", "User-Agent", "Accept", "Accept-Encoding"),
                trust_env=False,
            )
            self._loop = loop
        return self._session

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and read its answer, at most MAX_ANSWER_BYTES (providers/answers.py); aiohttp's errors and OutboundRefused pass to the caller."""
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"the URL's scheme must be http or https, not {url.scheme!r}")
        if not url.host:
            raise httpx.InvalidURL("the URL has no host")
        if url.host not in self._checked_hosts:
            check_literal_host(self.policy, url.host)
            if len(self._checked_hosts) >= CHECKED_HOSTS:
                self._checked_hosts.clear()
            self._checked_hosts.add(url.host)
        # The names as the provider wrote them (httpx's own list lower-cases them); aiohttp writes the Host.
        encoding = request.headers.encoding
        headers = [
            (name.decode(encoding), value.decode(encoding)) for name, value in request.headers.raw if name.lower() != b"host"
        ]
        async with self.session().request(
            request.method,
            URL(str(url), encoded=True),
            headers=headers,
            data=request.read() or None,
            allow_redirects=False,
        ) as answer:
            body, cut = await _read_bounded(answer)
            if cut:
                # Not handed back to the pool half read: closed, so the server stops writing to it.
                answer.close()
            return bounded_answer(
                answer.status,
                answer.raw_headers,
                body,
                cut=cut,
                request=request,
                extensions={"http_version": b"HTTP/1.1", "reason_phrase": (answer.reason or "").encode("latin-1", "replace")},
            )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed and self._loop is asyncio.get_running_loop():
            await session.close()


async def _read_bounded(answer: aiohttp.ClientResponse) -> tuple[bytes, bool]:
    """The answer's first MAX_ANSWER_BYTES as sent, and whether there was more.

    An answer that states a length within the limit (nearly every provider's)
    is read in one call, as before.
    """
    length = answer.content_length
    if length is not None and length <= MAX_ANSWER_BYTES:
        return await answer.read(), False
    body = bytearray()
    while len(body) <= MAX_ANSWER_BYTES:
        chunk = await answer.content.read(MAX_ANSWER_BYTES + 1 - len(body))
        if not chunk:
            return bytes(body), False
        body += chunk
    return bytes(body[:MAX_ANSWER_BYTES]), True


def build_request(http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Request:
    """The request ``http.build_request`` would make (the client's headers under the call's, its timeouts), with the URL's parse kept."""
    headers = http.headers.copy()
    extra = kwargs.pop("headers", None)
    if extra:
        headers.update(extra)
    if "json" in kwargs:
        value = kwargs.pop("json")
        if value is not None and kwargs.get("content") is None:
            kwargs["content"] = json_content(value)
            if "content-type" not in headers:
                headers["content-type"] = "application/json"
    return httpx.Request(method, parsed_url(url), headers=headers, extensions={"timeout": http.timeout.as_dict()}, **kwargs)
