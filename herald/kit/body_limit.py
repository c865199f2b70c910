"""Request body size limits: 100 KB, 20 MB under /v1/events (Novu's limits)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from herald.kit.asgi import header, read_body, replay_receive, send_error

METHODS_WITH_BODY = {"POST", "PUT", "PATCH", "DELETE"}
LARGE_BODY_PREFIXES = ("/v1/events",)


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_bytes: int, max_event_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_event_bytes = max_event_bytes

    def limit_for(self, path: str) -> int:
        return self.max_event_bytes if path.startswith(LARGE_BODY_PREFIXES) else self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in METHODS_WITH_BODY:
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, send, limit)
            return
        body = await read_body(receive, limit)
        if body is None:
            await self._refuse(scope, send, limit)
            return
        await self.app(scope, replay_receive(body, receive), send)

    async def _refuse(self, scope: Scope, send: Send, limit: int) -> None:
        await send_error(
            scope, send, 413, f"Request body is larger than the limit of {limit // 1024} KB for this route"
        )
