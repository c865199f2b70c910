"""Refuse requests the store could not keep, before any route sees them.

- Body size: 100 KB (Novu's), ``HERALD_MAX_BODY`` (1 MB) under /v1/events and
  for POST /v1/subscribers/bulk (500 subscribers with their data outgrow
  100 KB) → 413; a declared ``Content-Length`` over it is refused before the
  body is read, a chunked body as soon as it grows past it.
- NUL characters (``\\u0000`` in JSON, ``%00`` in the URL): PostgreSQL cannot
  store them in text or JSON, so they are refused on every store alike
  (422), instead of failing deep in a query.
- JSON nested more than ``MAX_JSON_DEPTH`` levels (the body itself is the
  first): 422. Python's json module reads deeper bodies than orjson writes
  (255 levels), so such a body was read, then failed to be stored or
  answered (500); the trigger route's parser stops at about 250 and said
  the JSON was invalid. 100 is MongoDB's limit, so no body Novu's server can
  store is refused.
- A lone UTF-16 surrogate (``\\udfff`` escaped without its pair): it is no
  character, UTF-8 cannot encode it and neither store can keep it: 400, as
  for malformed JSON.

- A body under /v1 or /v2 that is not sent as JSON (no ``Content-Type``, or another one, such as
  a form's): 415, rather than parsing it as JSON all the same. The translations' uploads take
  multipart/form-data too; the providers' delivery reports keep whatever their senders use.

Both JSON checks look at the bytes first (a count of brackets, a search for
``\\ud``), so an ordinary trigger body is never parsed here (json_problem).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from herald.kit.asgi import header, read_body, replay_receive, send_error, send_json
from herald.kit.errors import error_body

METHODS_WITH_BODY = {"POST", "PUT", "PATCH", "DELETE"}
LARGE_BODY_PREFIXES = ("/v1/events", "/v1/subscribers/bulk")
# Providers' delivery webhooks (herald/deliveries/inbound.py): SendGrid posts its events
# in batches of up to 768 KB, more than other routes take, and they cannot be split.
PROVIDER_WEBHOOK_PREFIX = "/webhooks/"
PROVIDER_WEBHOOK_MAX_BYTES = 1024 * 1024
# The console's CSV import of subscribers (herald.subscribers.imports.MAX_FILE_BYTES, with room for the
# form around the file): the page itself says when a file is too large.
SUBSCRIBER_IMPORT_PATH = "/console/subscribers/import"
SUBSCRIBER_IMPORT_MAX_BYTES = 26 * 1024 * 1024
# ``\u0000`` preceded by an even number of backslashes (so not ``\\u0000``, an escaped backslash).
_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000", re.IGNORECASE)
NUL_MESSAGE = "The request contains a NUL character (\\u0000), which cannot be stored"
MAX_JSON_DEPTH = 100
DEPTH_MESSAGE = f"The request body is nested more than {MAX_JSON_DEPTH} levels deep"
SURROGATE_MESSAGE = (
    "Request body contains a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair), which is not a character"
)
TOO_DEEP, LONE_SURROGATE = "too deep", "lone surrogate"
API_PREFIXES = ("/v1/", "/v2/")
# Providers post their delivery reports here, in their own formats (herald/deliveries).
ANY_BODY_PREFIXES = ("/v2/inbound-webhooks/",)
MULTIPART_PREFIXES = ("/v2/translations",)


def unsupported_media_type(path: str, content_type: str | None) -> str | None:
    """Why a body sent with ``content_type`` to ``path`` is refused (415); None when it is taken."""
    if not path.startswith(API_PREFIXES) or path.startswith(ANY_BODY_PREFIXES):
        return None
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type == "application/json" or (media_type.startswith("application/") and media_type.endswith("+json")):
        return None
    if media_type == "multipart/form-data" and path.startswith(MULTIPART_PREFIXES):
        return None
    sent = f"it was sent as {media_type}" if media_type else "it was sent without a Content-Type"
    return f"Request body must be JSON, sent with Content-Type: application/json; {sent}"


def contains_nul(body: bytes) -> bool:
    return b"\x00" in body or (b"u0000" in body.lower() and _JSON_NUL.search(body) is not None)


def json_problem(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """TOO_DEEP when the JSON in ``body`` nests more than ``max_depth`` levels, LONE_SURROGATE for a lone surrogate.

    Only a body with more than ``max_depth`` opening brackets can be too deep,
    and only one with a ``\\ud`` escape can hold a surrogate: an ordinary
    trigger's body is settled by two counts and two searches. Others are
    parsed (orjson, which refuses lone surrogates) and their containers
    walked, which costs what the route's own parse of them costs. Anything
    that is no JSON is left for the route to refuse (400).
    """
    deep = body.count(b"{") + body.count(b"[") > max_depth
    escaped = b"\\ud" in body or b"\\uD" in body
    if not deep and not escaped:
        return None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        reason = str(exc)
        if "surrogate" in reason:
            return LONE_SURROGATE
        if "depth" in reason or "recursion" in reason:
            return TOO_DEEP
        # What orjson does not read but Python's json (the routes' parser) does: NaN, 1e400.
        try:
            value = json.loads(body)
        except RecursionError:
            return TOO_DEEP
        except ValueError:
            return None
        return _walk(value, max_depth if deep else None, escaped)
    return _walk(value, max_depth, False) if deep else None


def _walk(value: Any, max_depth: int | None, strings: bool) -> str | None:
    """TOO_DEEP when ``value`` nests deeper than ``max_depth`` (if given); LONE_SURROGATE for one in a string (if ``strings``)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if max_depth is not None and depth > max_depth:
                return TOO_DEEP
            for key, member in item.items():
                if strings and _has_surrogate(key):
                    return LONE_SURROGATE
                if isinstance(member, (dict, list)) or (strings and isinstance(member, str)):
                    stack.append((member, depth + 1))
        elif isinstance(item, list):
            if max_depth is not None and depth > max_depth:
                return TOO_DEEP
            stack.extend((member, depth + 1) for member in item if isinstance(member, (dict, list, str)))
        elif strings and isinstance(item, str) and _has_surrogate(item):
            return LONE_SURROGATE
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class RequestGuardMiddleware:
    def __init__(self, app: ASGIApp, *, max_bytes: int, max_event_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_event_bytes = max_event_bytes

    def limit_for(self, path: str) -> int:
        if path.startswith(LARGE_BODY_PREFIXES):
            return self.max_event_bytes
        if path.startswith(PROVIDER_WEBHOOK_PREFIX):
            return max(self.max_bytes, PROVIDER_WEBHOOK_MAX_BYTES)
        if path == SUBSCRIBER_IMPORT_PATH:
            return max(self.max_bytes, SUBSCRIBER_IMPORT_MAX_BYTES)
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
            await self._refuse_nul(scope, send, "url")
            return
        if scope["method"] not in METHODS_WITH_BODY:
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse_size(scope, send, limit)
            return
        body = await read_body(receive, limit)
        if body is None:
            await self._refuse_size(scope, send, limit)
            return
        if body:
            refused = unsupported_media_type(scope["path"], header(scope, b"content-type"))
            if refused is not None:
                await send_error(scope, send, 415, refused)
                return
        if contains_nul(body):
            await self._refuse_nul(scope, send, "body")
            return
        problem = json_problem(body)
        if problem is TOO_DEEP:
            refusal = error_body(422, scope.get("path", ""), "Validation Error")
            refusal["errors"] = {"body": {"messages": [DEPTH_MESSAGE], "value": None}}
            await send_json(send, 422, refusal)
            return
        if problem is LONE_SURROGATE:
            await send_error(scope, send, 400, SURROGATE_MESSAGE)
            return
        await self.app(scope, replay_receive(body, receive), send)

    async def _refuse_size(self, scope: Scope, send: Send, limit: int) -> None:
        await send_error(scope, send, 413, f"Request body is larger than the limit of {limit // 1024} KB for this route")

    async def _refuse_nul(self, scope: Scope, send: Send, where: str) -> None:
        body = error_body(422, scope.get("path", ""), "Validation Error")
        body["errors"] = {where: {"messages": [NUL_MESSAGE], "value": None}}
        await send_json(send, 422, body)
