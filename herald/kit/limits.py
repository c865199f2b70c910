"""Request rate limits: a token bucket per environment, per category of route.

Triggers (``POST /v1/events/trigger``, ``/bulk``, ``/broadcast``) take tokens
from one bucket an environment has, every other route called with an API key
from another, so no key can take an API process for itself and a flood of
reads does not starve the same environment's triggers. As in Novu, a request
that does the work of many costs more: a bulk trigger or a broadcast costs
:data:`BULK_COST` trigger tokens, ``POST /v1/subscribers/bulk`` as many of
the other bucket's (a bucket smaller than that is emptied by one of them),
and a preview (``POST .../preview``: a render of up to 250 ms of CPU,
herald/previews) :data:`PREVIEW_COST` of them.

The inbox routes (a subscriber's token, ``/v1/inbox/...``) and the
providers' delivery webhooks (``/webhooks/...``, ``/v2/inbound-webhooks/...``,
named by their environment in the path) take tokens at the rate of the other
routes, from buckets of their own per environment: they cannot take an
environment's API calls' share. Inbox sessions (``POST /v1/inbox/session``,
which may create a subscriber, with no key) are counted per environment and
client address, ``HERALD_RATE_LIMIT_SESSIONS`` a minute, by the session's
use case once it knows the environment (:meth:`RateLimits.admit_session`).

Each bucket holds ``burst`` tokens (one second of its rate unless set) and
refills continuously at ``rate`` a second. Buckets live in the process's
memory: with N API processes behind a balancer an environment gets up to N
times the rate. A request over the limit is answered 429 with Novu's error
body, ``Retry-After`` and the ``RateLimit-*`` headers Novu sends, which are
also on every answer the limit let through.

The bucket is written here rather than taken from a library: ``limits`` has
no token bucket (fixed and sliding windows, behind a storage layer and key
formatting on every hit), ``aiolimiter`` makes callers wait instead of
refusing them and keeps one object with its own waiters per key, and
``token-bucket`` tells whether a request fits but not the tokens left or
when it will fit, which the headers need. On the trigger route, the hot path,
the check must be one dict look-up and some arithmetic.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.kit.asgi import header, send_error
from herald.kit.auth import ApiKeyResolver, parse_authorization, verify_subscriber_token
from herald.kit.errors import TooManyRequestsError, UnauthorizedError

RATE_LIMITED_MESSAGE = "API rate limit exceeded"
# Tokens a request that does the work of many takes (Novu's ApiRateLimitCostEnum.BULK).
BULK_COST = 100
TRIGGER_PATHS = {"/v1/events/trigger", "/v1/events/trigger/bulk", "/v1/events/trigger/broadcast"}
BULK_PATHS = {"/v1/events/trigger/bulk", "/v1/events/trigger/broadcast", "/v1/subscribers/bulk"}
# Tokens a preview takes: it renders off the loop, and may take a step's whole render time.
PREVIEW_COST = 10
PREVIEW_SUFFIX = "/preview"
INBOX_PREFIX = "/v1/inbox/"
SESSION_PATH = "/v1/inbox/session"
# The providers' webhooks, and which part of the path after the prefix names the environment.
PROVIDER_WEBHOOK_PREFIXES = {
    "/webhooks/organizations/": 2,  # {org}/environments/{env}/{channel}/{integration}
    "/v2/inbound-webhooks/delivery-providers/": 0,  # {env}/{integration}
}
# Buckets kept per category; past it they all start again full (keys are
# environments that exist, so this is a bound that is never expected to be met).
MAX_BUCKETS = 100_000


class TokenBuckets:
    """Token buckets by key (an environment id), each refilled at ``rate`` a second up to ``burst``."""

    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError("a token bucket needs a rate above 0 (0 means no limit: make no bucket)")
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else rate)
        self.clock = clock
        # key -> [tokens, when they were counted]
        self._buckets: dict[str, list[float]] = {}

    def take(self, key: str, cost: float = 1.0) -> tuple[bool, float]:
        """Take ``cost`` tokens from ``key``'s bucket if it has them: (taken, tokens left)."""
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._buckets.clear()
            bucket = self._buckets[key] = [self.burst, now]
            tokens = self.burst
        else:
            tokens = bucket[0] + (now - bucket[1]) * self.rate
            if tokens > self.burst:
                tokens = self.burst
            bucket[1] = now
        if cost > self.burst:
            cost = self.burst
        if tokens >= cost:
            bucket[0] = tokens - cost
            return True, tokens - cost
        bucket[0] = tokens
        return False, tokens

    def seconds_until(self, tokens: float, wanted: float) -> float:
        """How long a bucket holding ``tokens`` takes to hold ``wanted`` (at most ``burst``)."""
        return max(0.0, min(wanted, self.burst) - tokens) / self.rate


_COST_NAMES = {1: "single", PREVIEW_COST: "preview", BULK_COST: "bulk"}


def cost_of(method: str, path: str) -> int:
    """The tokens a request takes from its bucket."""
    if path in BULK_PATHS:
        return BULK_COST
    if method == "POST" and path.endswith(PREVIEW_SUFFIX):
        return PREVIEW_COST
    return 1


class Category:
    """One bucket per environment for a kind of route, with the headers that do not change per request."""

    def __init__(self, name: str, rate: float, clock: Callable[[], float]) -> None:
        self.name = name
        self.buckets = TokenBuckets(rate, clock=clock)
        self.limit = b"%d" % self.buckets.burst
        self.policies = {cost: self._policy(cost) for cost in _COST_NAMES}

    def _policy(self, cost: int) -> bytes:
        kind = _COST_NAMES[cost]
        rate, burst = self.buckets.rate, self.buckets.burst
        return f'{rate:g};w=1;burst={burst:g};comment="token bucket";category="{self.name}";cost="{kind}"'.encode()


class RateLimits:
    """The buckets of one API process: every copy of the middleware (kit.asgi.DirectRoutes builds its own) shares them.

    A rate of 0 makes no bucket: that category is not limited.
    """

    def __init__(
        self, triggers: float, requests: float, sessions: float = 0.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.triggers = Category("trigger", triggers, clock) if triggers > 0 else None
        self.requests = Category("global", requests, clock) if requests > 0 else None
        # ``sessions`` a minute, the whole minute's worth at once.
        self.sessions = TokenBuckets(sessions / 60, burst=sessions, clock=clock) if sessions > 0 else None

    def category_for(self, path: str) -> Category | None:
        return self.triggers if path in TRIGGER_PATHS else self.requests

    def admit_session(self, application_identifier: str, client: str) -> None:
        """Take an inbox session from the environment's and client address's bucket, or raise 429.

        The environment is named by its application identifier, as the session's body names it: the
        bucket is taken before any query (an identifier that names no environment has a bucket too,
        within :data:`MAX_BUCKETS`, and is answered 400 when it is admitted).
        """
        buckets = self.sessions
        if buckets is None:
            return
        taken, tokens = buckets.take(f"{application_identifier[:200]} {client}")
        if not taken:
            retry_after = max(1, math.ceil(buckets.seconds_until(tokens, 1)))
            raise TooManyRequestsError(RATE_LIMITED_MESSAGE, headers={"Retry-After": str(retry_after)})


def webhook_environment(path: str) -> str | None:
    """The environment a provider webhook's path names, or None for any other path."""
    for prefix, index in PROVIDER_WEBHOOK_PREFIXES.items():
        if path.startswith(prefix):
            parts = path[len(prefix) :].split("/")
            return parts[index] or None if len(parts) > index else None
    return None


class RateLimitMiddleware:
    """Charges each request to its environment's bucket; answers 429 when it is empty.

    The environment is the API key's, the inbox token's (under another key of
    the same category: inbox calls do not take the API's share) or the one a
    provider webhook's path names (likewise). It runs before the body is read
    and before the idempotency middleware (a refused request claims no
    idempotency key, so its retry runs). The caller it resolves is kept in
    the request's state for the route's own :func:`herald.kit.auth.authenticate`
    (and ``authenticate_subscriber``), so the trigger route still resolves its
    key once. A request without a key or token, or with one that does not
    verify, goes on to be answered 401 as usual.
    """

    def __init__(self, app: ASGIApp, *, api_keys: ApiKeyResolver, limits: RateLimits, secret_key: str) -> None:
        self.app = app
        self.api_keys = api_keys
        self.limits = limits
        self.secret_key = secret_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        category = self.limits.category_for(path)
        if category is None:
            await self.app(scope, receive, send)
            return
        if path.startswith(INBOX_PREFIX):
            environment_id = None if path == SESSION_PATH else self._inbox_environment(scope)
            key = None if environment_id is None else f"inbox {environment_id}"
        elif (environment_id := webhook_environment(path)) is not None:
            key = f"webhooks {environment_id}"
        else:
            key = await self._api_key_environment(scope)
        if key is None:  # the route answers (401 when it needs a caller)
            await self.app(scope, receive, send)
            return
        buckets = category.buckets
        cost = cost_of(scope["method"], path)
        taken, tokens = buckets.take(key, cost)
        headers = [
            (b"ratelimit-limit", category.limit),
            (b"ratelimit-remaining", b"%d" % tokens),
            (b"ratelimit-reset", b"%d" % math.ceil(buckets.seconds_until(tokens, buckets.burst))),
            (b"ratelimit-policy", category.policies[cost]),
        ]
        if not taken:
            retry_after = max(1, math.ceil(buckets.seconds_until(tokens, cost)))
            headers.append((b"retry-after", b"%d" % retry_after))
            await send_error(scope, send, 429, RATE_LIMITED_MESSAGE, headers)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *headers]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _api_key_environment(self, scope: Scope) -> str | None:
        authorization = header(scope, b"authorization")
        if authorization is None:
            return None
        try:
            principal = await self.api_keys.resolve(parse_authorization(authorization))
        except UnauthorizedError:
            return None
        if principal is None:
            return None
        # herald.kit.auth.authenticate reads it from request.state.
        scope.setdefault("state", {})["principal"] = principal
        return principal.environment_id

    def _inbox_environment(self, scope: Scope) -> str | None:
        scheme, _, token = (header(scope, b"authorization") or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        try:
            principal = verify_subscriber_token(token.strip(), self.secret_key)
        except UnauthorizedError:
            return None
        # herald.kit.auth.authenticate_subscriber reads it from request.state.
        scope.setdefault("state", {})["subscriber"] = principal
        return principal.environment_id
