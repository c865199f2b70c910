"""Single sign-on: "Sign in with SSO" sends the browser to the identity provider, which sends it back here.

The state travels in a cookie of its own (``herald_console_sso``: HttpOnly,
SameSite=Lax so that the provider's redirect brings it, Path=/console/sso),
and must come back in the provider's answer: a sign-in finishes only in the
browser that started it. herald/members/sso.py does the rest.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from herald.console.deps import PublicDep, PublicPage, set_cookie
from herald.console.rendering import safe_next
from herald.console.routes.account import client_address, render_sign_in, signed_in_response
from herald.kit.errors import NotFoundError
from herald.kit.outbound import OutboundPolicy
from herald.members import sessions, sso
from herald.members.oidc import OidcClient, SsoError

router = APIRouter()

STATE_COOKIE = "herald_console_sso"
CALLBACK = "/console/sso/callback"


def oidc_client(page: PublicPage) -> OidcClient:
    """The API process's client of the identity provider (it caches the discovery document and keys); 404 without SSO."""
    settings = page.settings
    if not settings.sso:
        raise NotFoundError("Single sign-on is not set up")
    state = page.request.app.state
    client = getattr(state, "oidc_client", None)
    if client is None:
        client = OidcClient(
            settings.oidc_issuer,
            settings.oidc_client_id,
            settings.oidc_client_secret,
            OutboundPolicy.allowing(settings.outbound_allow),
        )
        state.oidc_client = client
    return client


def _failed(page: PublicPage, message: str, status_code: int) -> Response:
    page.fail("sso", message)
    response = render_sign_in(page, status_code=status_code)
    response.delete_cookie(STATE_COOKIE, path="/console/sso")
    return response


@router.get("/sso")
async def start(page: PublicDep) -> Response:
    client = oidc_client(page)
    try:
        started = await sso.begin(
            page.db,
            client,
            redirect_uri=page.absolute_url(CALLBACK),
            next_path=safe_next(page.request.query_params.get("next")),
        )
    except SsoError as exc:
        return _failed(page, f"Single sign-on is not available: {exc}", 502)
    response = page.redirect(started.url)
    set_cookie(response, page.request, STATE_COOKIE, started.state, max_age=int(sso.LIFETIME.total_seconds()), path="/console/sso")
    return response


@router.get("/sso/callback")
async def callback(page: PublicDep) -> Response:
    client = oidc_client(page)
    query = page.request.query_params
    settings = page.settings
    address = client_address(page)
    try:
        finished = await sso.finish(
            page.db,
            client,
            state=query.get("state", ""),
            browser_state=page.request.cookies.get(STATE_COOKIE, ""),
            code=query.get("code", ""),
            error=query.get("error", ""),
            redirect_uri=page.absolute_url(CALLBACK),
            role_claim=settings.oidc_role_claim,
            default_role=settings.oidc_default_role,
            client_address=address,
            user_agent=page.request.headers.get("user-agent", ""),
            replacing=page.request.cookies.get(sessions.COOKIE),
        )
    except SsoError as exc:
        await sso.record_failure(page.db, str(exc), client_address=address)
        status = 400 if str(exc) == sso.STATE_TOO_OLD else 401
        return _failed(page, f"Single sign-on did not sign you in. {exc}", status)
    response = signed_in_response(page, finished.token, finished.next_path)
    response.delete_cookie(STATE_COOKIE, path="/console/sso")
    return response
