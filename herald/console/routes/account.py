"""Signing in and out, the first owner's set-up link, joining through an invite, and one's own password."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from herald.console.deps import ConsoleDep, PublicDep, PublicPage, set_cookie, signed_in
from herald.console.rendering import safe_next
from herald.kit.errors import HeraldError, NotFoundError, ValidationFailed
from herald.members import service, sessions

router = APIRouter()


def client_address(page: PublicPage) -> str:
    """The address the request came from (sign-in throttling and the audit log count by it)."""
    # uvicorn's proxy_headers (herald serve) has already taken X-Forwarded-For from trusted proxies.
    client = page.request.client
    return client.host if client is not None else ""


def signed_in_response(page: PublicPage, token: str, target: str) -> Response:
    """Go to ``target`` with the new session's cookie (a sign-in by password, a link or SSO)."""
    response = page.redirect(target)
    set_cookie(response, page.request, sessions.COOKIE, token, max_age=int(sessions.ABSOLUTE.total_seconds()))
    return response


def render_sign_in(page: PublicPage, *, status_code: int = 200, email: str = "", next: str = "/console") -> Response:
    """The sign-in page; with "Sign in with SSO" when single sign-on is set up (HERALD_OIDC_ISSUER)."""
    return page.render("sign_in.html", title="Sign in", status_code=status_code, email=email, next=next, sso=page.settings.sso)


@router.get("/sign-in")
async def sign_in_page(page: PublicDep) -> Response:
    if await signed_in(page.request, page.db) is not None:
        return page.redirect(safe_next(page.request.query_params.get("next")))
    return render_sign_in(page, next=safe_next(page.request.query_params.get("next")))


@router.post("/sign-in")
async def sign_in(page: PublicDep) -> Response:
    form = await page.form()
    email = page.field(form, "email", service.MAX_EMAIL_LENGTH)
    password = form.get("password")
    password = password if isinstance(password, str) else ""
    target = safe_next(page.field(form, "next", 500))
    if not email:
        page.fail("email", "Enter your email address")
    if not password:
        page.fail("password", "Enter your password")
    if page.errors:
        return render_sign_in(page, status_code=422, email=email, next=target)
    result = await service.sign_in(
        page.db,
        email,
        password,
        client_address=client_address(page),
        user_agent=page.request.headers.get("user-agent", ""),
        replacing=page.request.cookies.get(sessions.COOKIE),
    )
    if result.throttled:
        page.fail("email", service.TOO_MANY_ATTEMPTS)
        response = render_sign_in(page, status_code=429, email=email, next=target)
        response.headers["Retry-After"] = str(result.retry_after)
        return response
    if result.token is None:
        page.fail("email", service.INVALID_CREDENTIALS)
        return render_sign_in(page, status_code=401, email=email, next=target)
    return signed_in_response(page, result.token, target)


@router.post("/sign-out")
async def sign_out(page: PublicDep) -> Response:
    await sessions.end_session(page.db, page.request.cookies.get(sessions.COOKIE))
    response = page.redirect("/console/sign-in", flash="You are signed out")
    response.delete_cookie(sessions.COOKIE, path="/console")
    return response


async def _link_page(page: PublicPage, token: str, kind: str) -> Response:
    try:
        link = await service.find_link(page.db, token, kind)
    except NotFoundError as exc:
        return page.render("link_used.html", title="This link is not valid", status_code=404, message=exc.message)
    template, title = ("setup.html", "Create the first owner") if kind == "setup" else ("join.html", "Join Herald")
    return page.render(template, title=title, token=token, email=link.email or "", role=link.role, name="")


async def _accept(page: PublicPage, token: str, kind: str) -> Response:
    form = await page.form()
    password = form.get("password")
    password = password if isinstance(password, str) else ""
    email = page.field(form, "email", service.MAX_EMAIL_LENGTH)
    name = page.field(form, "name", service.MAX_NAME_LENGTH)
    try:
        member = await service.accept_link(page.db, token, kind, password=password, email=email or None, name=name)
    except NotFoundError as exc:
        return page.render("link_used.html", title="This link is not valid", status_code=404, message=exc.message)
    except (ValidationFailed, HeraldError) as exc:
        if exc.status_code >= 500:
            raise
        page.errors_from(exc, "password")
        link = await service.find_link(page.db, token, kind)
        template, title = ("setup.html", "Create the first owner") if kind == "setup" else ("join.html", "Join Herald")
        return page.render(template, title=title, status_code=exc.status_code, token=token, email=email or link.email or "", role=link.role, name=name)
    result = await service.sign_in_member(
        page.db, member, client_address=client_address(page), user_agent=page.request.headers.get("user-agent", "")
    )
    return signed_in_response(page, result, "/console")


@router.get("/setup/{token}")
async def setup_page(token: str, page: PublicDep) -> Response:
    return await _link_page(page, token, "setup")


@router.post("/setup/{token}")
async def setup(token: str, page: PublicDep) -> Response:
    return await _accept(page, token, "setup")


@router.get("/invite/{token}")
async def invite_page(token: str, page: PublicDep) -> Response:
    return await _link_page(page, token, "invite")


@router.post("/invite/{token}")
async def join(token: str, page: PublicDep) -> Response:
    return await _accept(page, token, "invite")


@router.get("/account")
async def account(console: ConsoleDep) -> Response:
    return console.render("account.html", title="Your account")


@router.post("/account/password")
async def change_password(console: ConsoleDep) -> Response:
    """A new password ends every session of the member, this one too: they sign in again with it."""
    form = await console.form()
    current = form.get("currentPassword")
    new = form.get("newPassword")
    try:
        await service.change_password(
            console.db, console.member, current if isinstance(current, str) else "", new if isinstance(new, str) else ""
        )
    except ValidationFailed as exc:
        console.errors_from(exc, "newPassword")
        return console.render("account.html", title="Your account", status_code=422)
    response = console.redirect("/console/sign-in", flash="Your password is changed: sign in with it")
    response.delete_cookie(sessions.COOKIE, path="/console")
    return response
