"""The request context every console handler takes: who is signed in, which environment, CSRF, rendering.

A page handler is a few lines::

    router = APIRouter()

    @router.get("/topics")
    async def topics(console: ConsoleDep) -> Response:
        console.authorize("subscribers.read")
        rows = await topics_service.list_topics(console.db, console.principal, ...)
        return console.render("topics.html", title="Topics", topics=rows)

    @router.post("/topics")
    async def create_topic(console: ConsoleDep) -> Response:
        console.authorize("topics.write")
        form = await console.form()
        topic = await topics_service.create(console.db, console.principal, ...)
        console.record("topic.created", "topic", topic.id, changes={"key": ...})
        return console.redirect("/console/topics", flash="Topic created")

- :data:`ConsoleDep` (:class:`Console`): a signed-in member. A request without
  a live session is sent to the sign-in page (a GET) or refused (403).
- :data:`PublicDep` (:class:`Page`): the pages before sign-in (sign-in,
  set-up, invite), with the pre-session CSRF token.
- ``console.db`` is the request's session (herald.kit.db): it commits when
  the handler returns, so ``console.record(...)`` (the audit log) lands with
  the change or not at all.
- ``console.principal`` is the chosen environment as the feature services
  take it (herald.kit.auth.Principal): the console calls the same services
  as the API routes.
- ``console.allows(action)`` decides whether to show a control;
  ``console.authorize(action)`` refuses with 403 (herald/members/policy.py).

The CSRF check (herald.console.security) is not here: it is a dependency of
the whole console app (:func:`csrf_guard`), so no route can skip it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Request
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.datastructures import FormData
from starlette.responses import HTMLResponse, Response

from herald.audit.service import record
from herald.config import Settings
from herald.console import security
from herald.console.rendering import FLASH_COOKIE, read_flash, redirect, render_html
from herald.kit.auth import Principal
from herald.kit.db import SessionDep
from herald.kit.errors import ForbiddenError, HeraldError
from herald.members import sessions
from herald.members.policy import MemberActor, allows, authorize
from herald.members.repository import MemberRepository
from herald.members.service import actor_of
from herald.members.sessions import SignedIn
from herald.models import Environment, Member

# The nav every signed-in page shows, in order: (label, path). Pages not built yet answer 404.
NAV = (
    ("Activity", "/console/activity"),
    ("Workflows", "/console/workflows"),
    ("Subscribers", "/console/subscribers"),
    ("Topics", "/console/topics"),
    ("Integrations", "/console/integrations"),
    ("API keys", "/console/api-keys"),
    ("Environments", "/console/environments"),
    ("Webhooks", "/console/webhooks"),
    ("Analytics", "/console/analytics"),
    ("Audit log", "/console/audit"),
    ("Members", "/console/members"),
)
# A service's refusals that are a form's to show beside its fields (a page of their own otherwise).
FORM_ERRORS = frozenset({400, 409, 422})
# A form is a page's few fields: bounded (the request guard bounds the body too).
MAX_FIELDS = 200
_SIGNED_IN = "console_signed_in"


class SignInRequired(HeraldError):
    """No live session: a page sends the browser to sign in (herald.console.app handles it)."""

    status_code = 401


def settings_of(request: Request) -> Settings:
    return request.app.state.settings


def secure_cookies(request: Request) -> bool:
    """Cookies are Secure when the console is served over https (HERALD_PUBLIC_URL)."""
    return settings_of(request).public_url.lower().startswith("https://")


def set_cookie(response: Response, request: Request, name: str, value: str, *, max_age: int, path: str = "/console") -> None:
    """A cookie of the console: HttpOnly, SameSite=Lax, on ``path``, Secure behind https."""
    response.set_cookie(
        name, value, max_age=max_age, path=path, httponly=True, samesite="lax", secure=secure_cookies(request)
    )


async def signed_in(request: Request, db: AsyncSession) -> SignedIn | None:
    """The request's live session, looked up once per request."""
    cached = request.scope.get("state", {}).get(_SIGNED_IN, False)
    if cached is not False:
        return cached
    found = await sessions.find_session(db, request.cookies.get(sessions.COOKIE))
    request.scope.setdefault("state", {})[_SIGNED_IN] = found
    return found


async def csrf_guard(request: Request, db: SessionDep) -> None:
    """403 for a state-changing request without its browser's token (herald.console.security)."""
    if request.method not in security.UNSAFE_METHODS:
        return
    found = await signed_in(request, db)
    expected = found.session.csrf_token if found is not None else request.cookies.get(security.PRE_SESSION_COOKIE)
    if not security.tokens_match(expected, await security.submitted_token(request)):
        raise security.refuse()


@dataclass
class Page:
    """A console request and what it needs to answer: the store, the settings, rendering, redirects."""

    request: Request
    db: AsyncSession
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def settings(self) -> Settings:
        return settings_of(self.request)

    @property
    def csrf_token(self) -> str:
        raise NotImplementedError

    async def form(self, max_fields: int = MAX_FIELDS) -> FormData:
        """The submitted form (read once; the CSRF check may have read it already).

        ``max_fields``: a page whose form grows with what it edits (the workflow editor's steps) says how far.
        """
        form = await self.request.form(max_fields=max_fields)
        return form

    def field(self, form: FormData, name: str, max_length: int = 1000) -> str:
        """A text field of the form, stripped and cut to ``max_length``; "" when missing."""
        value = form.get(name)
        return value.strip()[:max_length] if isinstance(value, str) else ""

    def context(self, **values: Any) -> dict[str, Any]:
        flash = read_flash(self.request.cookies.get(FLASH_COOKIE), self.settings.secret_key)
        return {
            "request": self.request,
            "path": self.request.url.path,
            "csrf_token": self.csrf_token,
            "flash": flash,
            "errors": self.errors,
            **values,
        }

    def render(self, template: str, *, title: str, status_code: int = 200, **values: Any) -> HTMLResponse:
        """The page ``template`` with ``title`` ("<title> - Herald") and ``values``; a flash message is shown once."""
        response = render_html(template, self.context(title=title, **values), status_code=status_code)
        if FLASH_COOKIE in self.request.cookies:
            response.delete_cookie(FLASH_COOKIE, path="/console")
        return response

    def redirect(self, path: str, *, flash: str | None = None) -> Response:
        return redirect(path, flash=flash, secret_key=self.settings.secret_key, secure=secure_cookies(self.request))

    def absolute_url(self, path: str) -> str:
        """``path`` as a link to send someone: on HERALD_PUBLIC_URL when set, else the address this request came to."""
        base = self.settings.public_url.rstrip("/") or f"{self.request.url.scheme}://{self.request.url.netloc}"
        return base + path

    def fail(self, field_name: str, message: str) -> None:
        """Note an error of a field: the page shows it beside the field and in the summary at the top."""
        self.errors.setdefault(field_name, message)

    def form_refusal(self, exc: Exception, default_field: str, messages: dict[str, str] | None = None) -> None:
        """A form refused by its schema (pydantic) or by a service (400, 409, 422) as the page's field errors.

        ``messages`` says, by field, what to tell instead of the schema's own
        words. Anything else (403, 404, a fault) is raised again: it is no
        field's problem, and the console's error page answers it.
        """
        if isinstance(exc, ValidationError):
            for error in exc.errors():
                name = ".".join(str(part) for part in error["loc"]) or default_field
                self.fail(name, (messages or {}).get(name, error["msg"]))
        elif isinstance(exc, HeraldError) and exc.status_code in FORM_ERRORS:
            self.errors_from(exc, default_field)
        else:
            raise exc

    def errors_from(self, exc: HeraldError, default_field: str) -> None:
        """A service's validation failure as the page's field errors."""
        details = exc.extra.get("errors")
        if isinstance(details, dict) and details:
            for name, entry in details.items():
                messages = entry.get("messages") if isinstance(entry, dict) else None
                self.fail(default_field if name == "general" else name, str(messages[0]) if messages else exc.message)
        else:
            self.fail(default_field, exc.message)


@dataclass
class PublicPage(Page):
    """A page before sign-in; its CSRF token is the pre-session cookie's (set when the page is shown)."""

    token: str = ""
    # Signed in already (an invite opened in a signed-in browser): the session's token is the one to use.
    has_session: bool = False

    @property
    def csrf_token(self) -> str:
        return self.token

    def render(self, template: str, *, title: str, status_code: int = 200, **values: Any) -> HTMLResponse:
        response = super().render(template, title=title, status_code=status_code, **values)
        if not self.has_session and self.request.cookies.get(security.PRE_SESSION_COOKIE) != self.token:
            response.set_cookie(
                security.PRE_SESSION_COOKIE,
                self.token,
                path="/console",
                httponly=True,
                samesite="lax",
                secure=secure_cookies(self.request),
            )
        return response


async def public_page(request: Request, db: SessionDep) -> PublicPage:
    found = await signed_in(request, db)
    if found is not None:
        return PublicPage(request=request, db=db, token=found.session.csrf_token, has_session=True)
    token = request.cookies.get(security.PRE_SESSION_COOKIE)
    if not token or len(token) > 100:
        token = security.new_csrf_token()
    return PublicPage(request=request, db=db, token=token)


@dataclass
class Console(Page):
    """A signed-in member's request, in the environment they chose."""

    signed_in: SignedIn | None = None
    environments: list[Environment] = field(default_factory=list)
    environment: Environment | None = None

    @property
    def member(self) -> Member:
        assert self.signed_in is not None
        return self.signed_in.member

    @property
    def actor(self) -> MemberActor:
        return actor_of(self.member)

    @property
    def csrf_token(self) -> str:
        assert self.signed_in is not None
        return self.signed_in.session.csrf_token

    @property
    def organization_id(self) -> str:
        return self.member.organization_id

    @property
    def principal(self) -> Principal:
        """The chosen environment as the feature services take it (the member acts there, no key involved)."""
        assert self.environment is not None
        return Principal(self.environment.id, self.organization_id, api_key_id="")

    def allows(self, action: str, environment: Environment | None = None) -> bool:
        """Whether to show the control for ``action``: the member's role allows it (in ``environment``, the chosen one by default)."""
        return allows(self.actor, action, environment if environment is not None else self.environment)

    def authorize(self, action: str, environment: Environment | None = None) -> None:
        """403 unless the member's role allows ``action`` (in ``environment``, the chosen one by default)."""
        authorize(self.actor, action, environment if environment is not None else self.environment)

    def record(
        self,
        action: str,
        resource_type: str,
        resource_id: str | None = None,
        *,
        changes: Any = None,
        organization_wide: bool = False,
    ) -> None:
        """Add the change to the audit log, in this request's transaction (it lands with the change)."""
        record(
            self.db,
            self.actor,
            action,
            resource_type,
            resource_id,
            environment_id=None if organization_wide or self.environment is None else self.environment.id,
            changes=changes,
        )

    def context(self, **values: Any) -> dict[str, Any]:
        return super().context(
            member=self.member,
            environments=self.environments,
            environment=self.environment,
            nav=NAV,
            allows=self.allows,
            **values,
        )


async def console(request: Request, db: SessionDep) -> Console:
    """The signed-in member's context; without a live session, :class:`SignInRequired`."""
    found = await signed_in(request, db)
    if found is None:
        raise SignInRequired("Sign in to use the console")
    environments = await MemberRepository(db).environments(found.member.organization_id)
    chosen = next((env for env in environments if env.id == found.session.environment_id), None)
    if chosen is None and environments:
        chosen = environments[0]
    return Console(request=request, db=db, signed_in=found, environments=environments, environment=chosen)


def sign_in_location(request: Request) -> str:
    path = request.url.path
    if request.url.query:
        path += "?" + request.url.query
    return "/console/sign-in?next=" + quote(path, safe="/")


ConsoleDep = Annotated[Console, Depends(console)]
PublicDep = Annotated[PublicPage, Depends(public_page)]


def forbidden_unless(condition: bool, message: str) -> None:
    if not condition:
        raise ForbiddenError(message)
