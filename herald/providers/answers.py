"""How much of an answer Herald reads when it calls out: at most :data:`MAX_ANSWER_BYTES`, then it hangs up.

A provider's answer is read for its message id, and for a short excerpt of
its error text when it refuses (providers/http.py). Both are in its first
bytes. Whatever answers a call may not be the provider, though (a
``baseUrl``, a chat webhook or a token endpoint is written by the caller),
and an answer read whole is held whole: one of 200 MB grew a worker by
400 MB. So every path that reads an answer (HTTP/1.1 through aiohttp, HTTP/2
and the token endpoint through httpx, outbound webhooks, the fetches of
inbound webhooks) reads at most this much, decoded or not, and closes the
connection of an answer it did not finish, so the server cannot go on
writing to it. SMTP replies are bounded by aiosmtplib itself (32 KB a reply).

A cut answer is handed on as any other, with :data:`CUT_AT_LIMIT` in its
``extensions``: it is read for an id where it still parses (a JSON document
cut short does not), and otherwise decided as an answer that cannot be read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import httpx

MAX_ANSWER_BYTES = 1024 * 1024
# Set (True) in the extensions of an answer cut at MAX_ANSWER_BYTES.
CUT_AT_LIMIT = "herald.cut_at_limit"
# A compressed answer is inflated this many bytes of it at a time: a small answer that inflates to
# gigabytes (about a thousand times its size, at most, for deflate) stops at the limit too.
_INFLATE_PIECE = 4096
_BODY_HEADERS = frozenset({b"content-encoding", b"content-length", b"transfer-encoding"})


def answer_is_cut(response: httpx.Response) -> bool:
    """Whether ``response`` holds only the first :data:`MAX_ANSWER_BYTES` of what was answered."""
    return bool(response.extensions.get(CUT_AT_LIMIT))


def bounded_answer(
    status: int,
    headers: Sequence[tuple[bytes, bytes]],
    raw: bytes,
    *,
    cut: bool,
    request: httpx.Request | None,
    extensions: dict[str, Any] | None = None,
) -> httpx.Response:
    """An ``httpx.Response`` of ``raw`` (the answer's first bytes as sent), decoded to at most MAX_ANSWER_BYTES.

    An answer without a ``content-encoding`` is held as it came, as httpx
    would hold it. A compressed one is inflated a piece at a time and held
    decoded (its ``content-encoding`` dropped, since its content no longer is
    encoded). A decoding error is raised as httpx raises it, except at the end
    of an answer that was cut (a compressed stream cut short ends mid-block).
    """
    extensions = dict(extensions or {})
    if not _encoded(headers):
        if cut:
            extensions[CUT_AT_LIMIT] = True
        return httpx.Response(status, headers=headers, content=raw[:MAX_ANSWER_BYTES], request=request, extensions=extensions)
    response = httpx.Response(status, headers=headers, stream=_Pieces(raw), request=request, extensions=extensions)
    decoded = bytearray()
    try:
        for chunk in response.iter_bytes():
            decoded += chunk
            if len(decoded) > MAX_ANSWER_BYTES:
                cut = True
                break
    except httpx.DecodingError:
        if not cut:
            raise
    if cut:
        extensions[CUT_AT_LIMIT] = True
    kept = [(name, value) for name, value in response.headers.raw if name.lower() not in _BODY_HEADERS]
    return httpx.Response(status, headers=kept, content=bytes(decoded[:MAX_ANSWER_BYTES]), request=request, extensions=extensions)


async def read_streamed(response: httpx.Response) -> httpx.Response:
    """Read an httpx answer opened as a stream, at most MAX_ANSWER_BYTES of it, and close it.

    Closed before its end, httpcore drops the HTTP/1.1 connection (or resets the HTTP/2 stream).
    An answer its transport had read already (one made in memory) is returned as it is.
    """
    if response.is_stream_consumed:
        return response
    raw = bytearray()
    cut = False
    try:
        async for chunk in response.aiter_raw():
            raw += chunk
            if len(raw) > MAX_ANSWER_BYTES:
                cut = True
                break
    finally:
        await response.aclose()
    return bounded_answer(
        response.status_code, response.headers.raw, bytes(raw[:MAX_ANSWER_BYTES]), cut=cut, request=response.request, extensions=response.extensions
    )


def read_streamed_sync(response: httpx.Response) -> httpx.Response:
    """:func:`read_streamed` for httpx's synchronous client (the FCM token request runs in a thread)."""
    if response.is_stream_consumed:
        return response
    raw = bytearray()
    cut = False
    try:
        for chunk in response.iter_raw():
            raw += chunk
            if len(raw) > MAX_ANSWER_BYTES:
                cut = True
                break
    finally:
        response.close()
    return bounded_answer(
        response.status_code, response.headers.raw, bytes(raw[:MAX_ANSWER_BYTES]), cut=cut, request=response.request, extensions=response.extensions
    )


def _encoded(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    """Whether raw ``(name, value)`` header pairs (bytes) name a content-encoding other than identity."""
    for name, value in headers:
        if name.lower() == b"content-encoding" and value.strip().lower() not in (b"", b"identity"):
            return True
    return False


class _Pieces(httpx.SyncByteStream):
    """Bytes already read, handed to httpx's decoders a piece at a time."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def __iter__(self) -> Iterator[bytes]:
        view = memoryview(self.raw)
        for start in range(0, len(view), _INFLATE_PIECE):
            yield bytes(view[start : start + _INFLATE_PIECE])
