"""Request rate limits: a token bucket per environment, per category of route.

Triggers (``POST /v1/events/trigger``, ``/bulk``, ``/broadcast``) take tokens
from one bucket an environment has, every other route called with an API key
from another, so no key can take an API process for itself and a flood of
reads does not starve the same environment's triggers. As in Novu, a request
that does the work of many costs more: a bulk trigger or a broadcast costs
:data:`BULK_COST` trigger tokens, ``POST /v1/subscribers/bulk`` as many of
the other bucket's (a bucket smaller than that is emptied by one of them).

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
from herald.kit.auth import ApiKeyResolver, parse_authorization
from herald.kit.errors import UnauthorizedError

RATE_LIMITED_MESSAGE = "API rate limit exceeded"
# Tokens a request that does the work of many takes (Novu's ApiRateLimitCostEnum.BULK).
BULK_COST = 100
TRIGGER_PATHS = {"/v1/events/trigger", "/v1/events/trigger/bulk", "/v1/events/trigger/broadcast"}
BULK_PATHS = {"/v1/events/trigger/bulk", "/v1/events/trigger/broadcast", "/v1/subscribers/bulk"}
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


class Category:
    """One bucket per environment for a kind of route, with the headers that do not change per request."""

    def __init__(self, name: str, rate: float, clock: Callable[[], float]) -> None:
        self.name = name
        self.buckets = TokenBuckets(rate, clock=clock)
        self.limit = b"%d" % self.buckets.burst
        self.policies = {cost: self._policy(cost) for cost in (1, BULK_COST)}

    def _policy(self, cost: int) -> bytes:
        kind = "bulk" if cost > 1 else "single"
        rate, burst = self.buckets.rate, self.buckets.burst
        return f'{rate:g};w=1;burst={burst:g};comment="token bucket";category="{self.name}";cost="{kind}"'.encode()


class RateLimits:
    """The buckets of one API process: every copy of the middleware (kit.asgi.DirectRoutes builds its own) shares them.

    A rate of 0 makes no bucket: that category is not limited.
    """

    def __init__(self, triggers: float, requests: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.triggers = Category("trigger", triggers, clock) if triggers > 0 else None
        self.requests = Category("global", requests, clock) if requests > 0 else None

    def category_for(self, path: str) -> Category | None:
        return self.triggers if path in TRIGGER_PATHS else self.requests


class RateLimitMiddleware:
    """Charges each request with a valid API key to its environment's bucket; answers 429 when it is empty.

    It runs before the body is read and before the idempotency middleware
    (a refused request claims no idempotency key, so its retry runs). The
    caller it resolves is kept in the request's state for the route's own
    :func:`herald.kit.auth.authenticate`, so the trigger route still
    resolves its key once. A request without a key, or with one the store
    does not know, goes on to be answered 401 as usual.
    """

    def __init__(self, app: ASGIApp, *, api_keys: ApiKeyResolver, limits: RateLimits) -> None:
        self.app = app
        self.api_keys = api_keys
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        category = self.limits.category_for(path)
        authorization = header(scope, b"authorization") if category is not None else None
        if authorization is None:
            await self.app(scope, receive, send)
            return
        try:
            principal = await self.api_keys.resolve(parse_authorization(authorization))
        except UnauthorizedError:
            principal = None
        if principal is None:  # the route answers 401
            await self.app(scope, receive, send)
            return
        # herald.kit.auth.authenticate reads it from request.state.
        scope.setdefault("state", {})["principal"] = principal
        assert category is not None
        buckets = category.buckets
        cost = BULK_COST if path in BULK_PATHS else 1
        taken, tokens = buckets.take(principal.environment_id, cost)
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
