"""CORS for the inbox routes only: an Inbox runs in a browser, on the application's origin.

The inbox routes take a bearer token, never cookies, so any origin may call
them unless ``HERALD_CORS_ORIGINS`` names the ones allowed. Every other route
(API keys, server to server) answers no browser preflight.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

INBOX_PREFIX = "/v1/inbox"


class InboxCORSMiddleware:
    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=list(origins),
            allow_methods=["GET", "POST", "PATCH", "PUT", "DELETE", "OPTIONS"],
            allow_headers=["*"],
            allow_credentials=False,
            max_age=600,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == INBOX_PREFIX or path.startswith(INBOX_PREFIX + "/"):
            await self.cors(scope, receive, send)
            return
        await self.app(scope, receive, send)
