"""The console's templates (Jinja2, autoescaped) and the answers built from them.

Templates live in ``herald/console/templates``; each page extends
``base.html`` (the nav, the Environment select, Sign out, flash messages)
or, before sign-in, ``public.html``. ``macros/forms.html`` has the form
pieces every page uses: the error summary, inputs, selects, the CSRF field.
"""

from __future__ import annotations

import hashlib
import hmac
from base64 import urlsafe_b64decode, urlsafe_b64encode
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.responses import HTMLResponse, RedirectResponse, Response

from herald.kit.time import isoformat

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
FLASH_COOKIE = "herald_console_flash"
# A flash message is one sentence; longer is cut (it travels in a cookie).
MAX_FLASH = 300


@cache
def templates() -> Environment:
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(("html", "svg")),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["datetime"] = lambda value: (isoformat(value) or "").replace("T", " ")[:19] if value else ""
    environment.filters["iso"] = lambda value: isoformat(value) or ""
    return environment


def render_html(template: str, context: dict[str, Any], *, status_code: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(templates().get_template(template).render(**context), status_code=status_code, headers=headers)


def _flash_key(secret_key: str) -> bytes:
    return hmac.new(secret_key.encode(), b"herald console flash v1", hashlib.sha256).digest()


def sign_flash(message: str, secret_key: str) -> str:
    """A flash message for the cookie, signed so that only this server's messages are shown."""
    raw = message[:MAX_FLASH].encode()
    mac = hmac.new(_flash_key(secret_key), raw, hashlib.sha256).hexdigest()[:32]
    return f"{urlsafe_b64encode(raw).decode().rstrip('=')}.{mac}"


def read_flash(cookie: str | None, secret_key: str) -> str | None:
    if not cookie or len(cookie) > 1000 or "." not in cookie:
        return None
    encoded, _, mac = cookie.rpartition(".")
    try:
        raw = urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except ValueError:
        return None
    expected = hmac.new(_flash_key(secret_key), raw, hashlib.sha256).hexdigest()[:32]
    if not hmac.compare_digest(expected, mac):
        return None
    return raw.decode("utf-8", "replace")


def redirect(path: str, *, flash: str | None = None, secret_key: str = "", secure: bool = False) -> Response:
    """303 to ``path`` (POST/redirect/GET), with a flash message the next page shows once."""
    response = RedirectResponse(path, status_code=303)
    if flash:
        response.set_cookie(
            FLASH_COOKIE, sign_flash(flash, secret_key), path="/console", httponly=True, samesite="lax", secure=secure
        )
    return response


def safe_next(value: str | None, default: str = "/console") -> str:
    """A path under /console to go back to; anything else (another site, a scheme) is the default."""
    if not value or not value.startswith("/console") or value.startswith("//") or "\\" in value or len(value) > 500:
        return default
    return value
