"""Refuse requests the store could not keep, before any route sees them.

- Body size: 100 KB, 20 MB under /v1/events (Novu's limits) and for
  POST /v1/subscribers/bulk (500 subscribers with their data outgrow 100 KB) → 413.
- NUL characters (``\\u0000`` in JSON, ``%00`` in the URL): PostgreSQL cannot
  store them in text or JSON, so they are refused on every store alike
  (422), instead of failing deep in a query.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

from herald.kit.asgi import header, read_body, replay_receive, send_error, send_json
from herald.kit.errors import error_body

METHODS_WITH_BODY = {"POST", "PUT", "PATCH", "DELETE"}
LARGE_BODY_PREFIXES = ("/v1/events", "/v1/subscribers/bulk")
# ``\u0000`` preceded by an even number of backslashes (so not ``\\u0000``, an escaped backslash).
_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000", re.IGNORECASE)
NUL_MESSAGE = "The request contains a NUL character (\\u0000), which cannot be stored"


def contains_nul(body: bytes) -> bool:
    return b"\x00" in body or (b"u0000" in body.lower() and _JSON_NUL.search(body) is not None)


class RequestGuardMiddleware:
    def __init__(self, app: ASGIApp, *, max_bytes: int, max_event_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_event_bytes = max_event_bytes

    def limit_for(self, path: str) -> int:
        return self.max_event_bytes if path.startswith(LARGE_BODY_PREFIXES) else self.max_bytes

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
        if contains_nul(body):
            await self._refuse_nul(scope, send, "body")
            return
        await self.app(scope, replay_receive(body, receive), send)

    async def _refuse_size(self, scope: Scope, send: Send, limit: int) -> None:
        await send_error(scope, send, 413, f"Request body is larger than the limit of {limit // 1024} KB for this route")

    async def _refuse_nul(self, scope: Scope, send: Send, where: str) -> None:
        body = error_body(422, scope.get("path", ""), "Validation Error")
        body["errors"] = {where: {"messages": [NUL_MESSAGE], "value": None}}
        await send_json(send, 422, body)
