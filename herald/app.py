"""The ASGI application."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.types import Receive, Scope, Send

from herald import __version__
from herald.audit.middleware import AuditMiddleware
from herald.config import Settings, load_settings
from herald.engine.queue import JobSignal, ring_on_commit
from herald.inbox.cors import InboxCORSMiddleware
from herald.kit import tracing
from herald.kit.asgi import CountRequestsMiddleware, DirectRoutes, LastResortMiddleware, RequestsInFlight
from herald.kit.auth import ApiKeyResolver
from herald.kit.crypto import SecretBox
from herald.kit.db import create_engine, create_read_engine, create_sessionmaker
from herald.kit.docs import install_docs, install_front_page
from herald.kit.errors import install_error_handlers
from herald.kit.groupcommit import GroupCommit
from herald.kit.idempotency import IdempotencyMiddleware
from herald.kit.limits import RateLimitMiddleware, RateLimits
from herald.kit.logs import quiet_http_client_logs
from herald.kit.metrics import PATH as METRICS_PATH
from herald.kit.metrics import HttpMetrics, NamedRoute, StoreReads, store_gauges
from herald.kit.metrics import serve_asgi as serve_metrics
from herald.kit.request_guard import RequestGuardMiddleware
from herald.kit.responses import JSONResponse
from herald.kit.schemas import RequestRoute
from herald.realtime.activity import ActivityHub
from herald.realtime.server import PATH as SOCKET_PATH
from herald.realtime.server import Realtime
from herald.realtime.signals import deliver_activity_on_commit, deliver_on_commit, forget_on_rollback

if TYPE_CHECKING:
    from herald.engine.worker import Worker

logger = logging.getLogger("herald")
# The Inbox socket's HTTP requests (long-polling), by one template in the metrics.
SOCKET_ROUTE = NamedRoute(SOCKET_PATH)

DESCRIPTION = """Herald speaks Novu's v1 REST API: trigger workflows, manage integrations,
subscribers, topics and tenants, and read in-app messages.

Every route but the health check needs `Authorization: ApiKey <key>`."""


def _routers() -> list[APIRouter]:
    from herald.audit.routes import router as audit_logs
    from herald.bridge.routes import router as bridge
    from herald.contexts.routes import router as contexts
    from herald.deliveries.routes import details_router as execution_details
    from herald.deliveries.routes import inbound_router as inbound_webhooks
    from herald.deliveries.routes import provider_webhooks_router as provider_webhooks
    from herald.environment_variables.routes import router as environment_variables
    from herald.environments.routes import router as environments
    from herald.events.routes import router as events
    from herald.health.routes import router as health
    from herald.inbox.routes import router as inbox
    from herald.inbox.v2_routes import router as subscriber_notifications
    from herald.integrations.routes import router as integrations
    from herald.layouts.routes import router as layouts
    from herald.messages.routes import router as messages
    from herald.notifications.routes import activity_router as activity
    from herald.notifications.routes import router as notifications
    from herald.preferences.routes import router as preferences
    from herald.subscribers.routes import router as subscribers
    from herald.tenants.routes import router as tenants
    from herald.topics.routes import router as topics
    from herald.translations.routes import router as translations
    from herald.webhooks.routes import router as webhooks
    from herald.workflows.routes import router as workflows

    # Routes are matched in order, every route of every router before the right one
    # is tried: the trigger routes, the hot path, come first.
    return [events, health, integrations, workflows, subscribers, preferences, topics, tenants, messages, notifications, activity, inbox, subscriber_notifications, translations, environments, environment_variables, layouts, inbound_webhooks, execution_details, webhooks, contexts, provider_webhooks, audit_logs, bridge]


class HeraldApp(FastAPI):
    """FastAPI, with the routes declared as :class:`RequestRoute` answered directly (kit.asgi.DirectRoutes).

    The trigger route is the hot path; its request skips FastAPI's own layers
    and routing and runs inside Herald's middlewares. It stays on its router,
    so the OpenAPI document and a request the direct path does not take (a
    trailing slash, a root path) are as before.
    """

    direct: DirectRoutes | None = None
    # The Inbox's socket (herald/realtime), served at /socket.io/ before any other route or middleware.
    realtime: Realtime | None = None
    # The audit log's recorder of API changes (herald.audit.middleware), around the framework's stack:
    # the direct routes (triggers) are answered before it.
    audited: Any = None
    # Counts and times every HTTP request (herald/kit/metrics.py); GET /metrics answers before it.
    http_metrics: HttpMetrics | None = None
    metrics_token: str = ""
    metrics_reads: StoreReads | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.http_metrics is not None:
            if scope["path"] == METRICS_PATH and scope["method"] == "GET":
                await serve_metrics(scope, receive, send, self.metrics_token, self.metrics_reads)
                return
            await self.http_metrics(scope, receive, send)
            return
        await self.dispatch(scope, receive, send)

    async def dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        realtime = self.realtime
        if realtime is not None and scope["type"] != "lifespan" and scope["path"].startswith(SOCKET_PATH):
            scope["route"] = SOCKET_ROUTE
            await realtime.handle_request(scope, receive, send)
            return
        direct = self.direct
        if direct is not None and direct.endpoint_for(scope) is not None:
            # Its path is its template: no parameters (direct_routes).
            scope["route"] = direct.routes[(scope["method"], scope["path"])]
            await direct(scope, receive, send)
            return
        if self.audited is not None and scope["type"] == "http":
            await self.audited(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def direct_routes(app: FastAPI, routers: list[APIRouter]) -> DirectRoutes:
    """The routers' RequestRoutes without path parameters, by method and path (routers included without a prefix)."""
    endpoints = {}
    for router in routers:
        for route in router.routes:
            if isinstance(route, RequestRoute) and not route.param_convertors:
                for method in route.methods or ():
                    endpoints[(method, route.path)] = route.endpoint
    return DirectRoutes(app, endpoints)


def build_worker(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    signal: JobSignal | None = None,
    pressure: Callable[[], int] | None = None,
) -> Worker:
    """A worker for this process, configured from settings."""
    from herald.engine.breaker import BreakerSettings
    from herald.engine.retention import Retention
    from herald.engine.steps.base import EngineSettings
    from herald.engine.worker import Worker
    from herald.kit.outbound import OutboundPolicy

    return Worker(
        sessionmaker=sessionmaker,
        box=SecretBox(settings.secret_key),
        settings=EngineSettings(
            retry_base_seconds=settings.retry_base_seconds,
            lease_seconds=settings.job_lease_seconds,
            breaker=BreakerSettings(settings.breaker_failures, settings.breaker_window_seconds, settings.breaker_cooldown_seconds),
        ),
        concurrency=settings.worker_concurrency,
        batch_size=settings.worker_batch_size,
        poll_interval=settings.worker_poll_seconds,
        signal=signal or JobSignal(),
        database_url=settings.database_url,
        pressure=pressure or (lambda: 0),
        retention=Retention(settings.notification_retention_days, settings.message_retention_days),
        outbound=OutboundPolicy.allowing(settings.outbound_allow),
        webhook_concurrency=settings.webhook_concurrency,
        webhook_endpoint_concurrency=settings.webhook_endpoint_concurrency,
    )


def create_app(settings: Settings | None = None) -> HeraldApp:
    settings = settings or load_settings()
    # Whoever configured logging (the herald command, or an embedding server), webhook URLs stay out of it.
    quiet_http_client_logs()
    engine = create_engine(settings.database_url, pool_size=settings.database_pool_size)
    # Every commit that wrote jobs wakes this process's worker without waiting for its poll.
    job_signal = JobSignal()
    ring = ring_on_commit(job_signal)
    # The sockets this process holds (herald/realtime). On SQLite a commit that
    # changed an inbox hands the change to them itself; on PostgreSQL every
    # change comes back through LISTEN, whichever process made it.
    realtime_holder: list[Realtime] = []
    hand_over = deliver_on_commit(lambda changes: realtime_holder[0].deliver(changes))
    # The console's live pages (herald/console/sse.py): on SQLite this process's commits tell them
    # of new activity; on PostgreSQL LISTEN does, whichever process committed.
    activity = ActivityHub(settings.database_url)
    hand_over_activity = deliver_activity_on_commit(activity.deliver)

    def after_commit(session: Any) -> None:
        ring(session)
        hand_over(session)
        hand_over_activity(session)

    sessionmaker = create_sessionmaker(engine, after_commit=after_commit, after_rollback=forget_on_rollback)
    # SQLite's long reads, off the event loop and off the one connection (kit.db.create_read_engine).
    read_engine = create_read_engine(settings.database_url)
    read_sessionmaker = sessionmaker if read_engine is None else create_sessionmaker(read_engine)
    realtime = Realtime(
        sessionmaker,
        settings.secret_key,
        settings.database_url,
        settings.realtime_heartbeat_seconds,
        cors_origins=settings.cors_origins,
        namespace_seconds=settings.realtime_namespace_seconds,
    )
    realtime_holder.append(realtime)
    api_keys = ApiKeyResolver(sessionmaker, settings.api_key_cache_seconds)

    in_flight = RequestsInFlight()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = asyncio.Event()
        # A key revoked by any process stops working here within about a second.
        revocations = asyncio.create_task(
            api_keys.watch_revocations(stop, settings.api_key_revocation_poll_seconds)
        )
        worker_task = None
        worker_engine = None
        # On PostgreSQL every process's inbox changes reach this process's sockets through LISTEN.
        listener = None if settings.is_sqlite else asyncio.create_task(realtime.listen(stop))
        activity_listener = (
            None if settings.is_sqlite or not settings.console else asyncio.create_task(activity.listen(stop))
        )
        # This process's row among the socket holders, its heartbeat and sweep of dead ones.
        await realtime.start()
        if settings.run_worker:
            worker_sessions = sessionmaker
            if not settings.is_sqlite:
                # Connections of its own that read by index (kit.db.create_engine);
                # SQLite keeps its one connection per process.
                worker_engine = create_engine(
                    settings.database_url, pool_size=settings.worker_pool_size, index_reads=True
                )
                worker_sessions = create_sessionmaker(
                    worker_engine, after_commit=ring_on_commit(job_signal), after_rollback=forget_on_rollback
                )
            # It gives way to this process's API when requests are waiting (engine/worker.py):
            # the most at once during its round, as a group commit answers a whole
            # batch at once and the count right after says little.
            worker = build_worker(settings, worker_sessions, signal=job_signal, pressure=in_flight.take_peak)
            # On SQLite this process is the file's only writer (docs/deployment.md): every job written rings
            # job_signal, and an idle worker sleeps until then or until the next job is due.
            worker.sole_writer = settings.is_sqlite
            worker.idle_poll_seconds = settings.worker_idle_poll_seconds
            worker_task = asyncio.create_task(worker.run_until_stopped(stop, settings.shutdown_grace_seconds))
        try:
            yield
        finally:
            stop.set()
            job_signal.ring()
            await realtime.close()
            if listener is not None:
                await listener
            if activity_listener is not None:
                await activity_listener
            if worker_task is not None:
                await worker_task
            if worker_engine is not None:
                await worker_engine.dispose()
            await revocations
            if read_engine is not None:
                await read_engine.dispose()
            await engine.dispose()

    app = HeraldApp(
        title="Herald",
        version=__version__,
        description=DESCRIPTION,
        default_response_class=JSONResponse,
        lifespan=lifespan,
        # Served by install_docs below, without a CDN.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.engine = engine
    # Set by the health check once it finds the schema at the code's revision (health/routes.py).
    app.state.schema_at_head = False
    app.state.sessionmaker = sessionmaker
    app.state.read_engine = read_engine
    app.state.read_sessionmaker = read_sessionmaker
    # Rung by every commit of app.state.sessionmaker that wrote jobs (queue.ring_on_commit).
    app.state.job_signal = job_signal
    app.state.api_keys = api_keys
    app.state.rate_limits = RateLimits(
        settings.rate_limit_triggers, settings.rate_limit_requests, settings.rate_limit_sessions
    )
    app.state.secret_box = SecretBox(settings.secret_key)
    from herald.events.service import record_trigger_batch
    from herald.events.targets import TriggerTargets

    # On PostgreSQL a batch naming known workflows skips their read; its write
    # checks them (events/targets.py). SQLite's read is on the event loop's
    # thread and costs no round trip worth saving.
    targets = None if settings.is_sqlite else TriggerTargets()
    app.state.trigger_recorder = GroupCommit(sessionmaker, partial(record_trigger_batch, targets=targets))

    app.state.activity = activity
    install_error_handlers(app)
    routers = _routers()
    for router in routers:
        app.include_router(router)
    # After the API's routes, which are matched first.
    install_docs(app)
    install_front_page(app, "/console/" if settings.console else "/docs")
    if settings.console:
        from herald.console.app import create_console

        # Its own app (its pages, errors and headers), sharing this one's state: herald/console/app.py.
        app.mount("/console", create_console(app.state))

    # Each add wraps the ones before: the last resort runs outermost, the size
    # limit before anything reads the body.
    app.add_middleware(
        IdempotencyMiddleware,
        sessionmaker=sessionmaker,
        api_keys=api_keys,
        box=app.state.secret_box,
        ttl_seconds=settings.idempotency_ttl_seconds,
        lock_seconds=settings.idempotency_lock_seconds,
    )
    app.add_middleware(
        RequestGuardMiddleware, max_bytes=settings.max_body_bytes, max_event_bytes=settings.max_event_body_bytes
    )
    # Charged before the body is read or an idempotency key claimed.
    app.add_middleware(
        RateLimitMiddleware,
        api_keys=api_keys,
        limits=app.state.rate_limits,
        secret_key=settings.secret_key,
    )
    app.add_middleware(LastResortMiddleware)
    app.add_middleware(CountRequestsMiddleware, counter=in_flight)
    app.add_middleware(InboxCORSMiddleware, origins=settings.cors_origins)
    app.direct = direct_routes(app, routers)
    app.audited = AuditMiddleware(partial(FastAPI.__call__, app), sessionmaker)
    app.realtime = realtime
    app.state.realtime = realtime
    # A server span per request while traces are on (herald/kit/tracing.py); nothing in the way otherwise.
    traced = app.dispatch if tracing.tracer is None else tracing.TracedRequests(app.dispatch)
    app.http_metrics = HttpMetrics(traced, access_log=settings.access_log)
    app.metrics_token = settings.metrics_token
    app.metrics_reads = store_gauges(sessionmaker)
    return app
