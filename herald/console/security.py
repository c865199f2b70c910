"""The console's response headers and its CSRF rule.

Headers: every console response carries :data:`CONTENT_SECURITY_POLICY` (no
inline script or style anywhere, nothing from another origin, no framing; the
one exception, :data:`EMAIL_FRAME_POLICY`, is an email alone for the editor's own sandboxed frame),
``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: same-origin``;
pages (everything but ``/console/static``) add ``Cache-Control: no-store``, so
a shared machine's back button shows nothing of a signed-out session.

CSRF: every POST, PUT, PATCH or DELETE under /console must carry the token of
its browser, as the form field ``csrf_token`` or the header ``X-CSRF-Token``
(scripts), else it answers 403. A signed-in browser's token is its session's
(``console_sessions.csrf_token``); before sign-in (the sign-in, set-up and
invite pages) it is a random token in the cookie :data:`PRE_SESSION_COOKIE`,
which the form must repeat (double submit): another site can make a browser
send the cookie but cannot read it to put it in the form. The check runs as a
dependency of the whole console app (herald.console.app), so a route cannot
forget it. The session cookie's ``SameSite=Lax`` is the second line.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from base64 import b64encode
from collections.abc import Iterable
from html.parser import HTMLParser

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.kit.errors import ForbiddenError

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
)
# An email shown alone in the editor's sandboxed preview frame (loaded there by the editor's script, so that
# its styles need not be known when the page was made): its own styles, no script, framed by the console only.
EMAIL_FRAME_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'none'; base-uri 'none'; "
    "sandbox; frame-ancestors 'self'"
)
_EMAIL_FRAME = "console_email_frame"
# A page showing an email (in a sandboxed srcdoc frame, which keeps the page's policy) allows that
# email's own inline styles by their hashes, and no other; at most this many (the header stays small).
MAX_STYLE_HASHES = 40
_STYLE_HASHES = "console_style_hashes"
PRE_SESSION_COOKIE = "herald_console_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CSRF_REFUSED = "The form has expired or did not come from this console: reload the page and try again"


class SecurityHeadersMiddleware:
    """Adds the console's security headers to every response of the app it wraps."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope["path"].startswith(("/console/static/", "/static/"))

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                state = scope.get("state", {})
                framed = state.get(_EMAIL_FRAME, False)
                headers["Content-Security-Policy"] = (
                    EMAIL_FRAME_POLICY if framed else content_security_policy(state.get(_STYLE_HASHES, ()))
                )
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "same-origin"
                headers["X-Frame-Options"] = "SAMEORIGIN" if framed else "DENY"
                if not static:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, with_headers)


def content_security_policy(style_hashes: Iterable[str] = ()) -> str:
    """The console's policy; with ``style_hashes``, those inline styles (elements and attributes) too."""
    allowed = " ".join(f"'sha256-{digest}'" for digest in style_hashes)
    if not allowed:
        return CONTENT_SECURITY_POLICY
    return CONTENT_SECURITY_POLICY.replace("style-src 'self';", f"style-src 'self' 'unsafe-hashes' {allowed};")


class _InlineStyles(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.styles: dict[str, None] = {}
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        for name, value in attrs:
            if name == "style" and value:
                self.styles[value] = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style and data:
            self.styles[data] = None


def allow_inline_styles(scope: Scope, html: str) -> None:
    """Let this answer's page apply the inline styles of ``html`` (an email shown in a srcdoc frame).

    The frame inherits the page's Content-Security-Policy, whose ``style-src
    'self'`` would drop the email's styles; each of them is allowed by its
    hash ('unsafe-hashes' for style attributes), nothing else is.
    """
    parser = _InlineStyles()
    parser.feed(html)
    parser.close()
    hashes: dict[str, None] = dict.fromkeys(scope.setdefault("state", {}).get(_STYLE_HASHES, ()))
    for style in parser.styles:
        if len(hashes) >= MAX_STYLE_HASHES:
            break
        hashes[b64encode(hashlib.sha256(style.encode()).digest()).decode()] = None
    scope["state"][_STYLE_HASHES] = tuple(hashes)


def frame_as_email(scope: Scope) -> None:
    """Answer with EMAIL_FRAME_POLICY: an email alone, for the console's own sandboxed frame to show."""
    scope.setdefault("state", {})[_EMAIL_FRAME] = True


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def tokens_match(expected: str | None, given: str | None) -> bool:
    if not expected or not given or len(given) > 100:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


async def submitted_token(request: Request) -> str | None:
    """The token the request carries: the header, else the form field."""
    header = request.headers.get(CSRF_HEADER)
    if header:
        return header
    content_type = request.headers.get("content-type", "")
    if content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        value = (await request.form()).get(CSRF_FIELD)
        return value if isinstance(value, str) else None
    return None


def refuse() -> ForbiddenError:
    return ForbiddenError(CSRF_REFUSED)
