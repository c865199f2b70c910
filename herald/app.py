"""The ASGI application."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from herald import __version__
from herald.config import Settings, load_settings
from herald.kit.auth import ApiKeyResolver
from herald.kit.body_limit import BodyLimitMiddleware
from herald.kit.crypto import SecretBox
from herald.kit.db import create_engine, create_sessionmaker
from herald.kit.errors import install_error_handlers
from herald.kit.idempotency import IdempotencyMiddleware
from herald.kit.responses import JSONResponse

logger = logging.getLogger("herald")

DESCRIPTION = """Herald speaks Novu's v1 REST API: trigger workflows, manage integrations,
subscribers, topics and tenants, and read in-app messages.

Every route but the health check needs `Authorization: ApiKey <key>`."""


def _routers() -> list:
    from herald.events.routes import router as events
    from herald.health.routes import router as health
    from herald.integrations.routes import router as integrations
    from herald.messages.routes import router as messages
    from herald.subscribers.routes import router as subscribers
    from herald.tenants.routes import router as tenants
    from herald.topics.routes import router as topics
    from herald.workflows.routes import router as workflows

    return [health, integrations, workflows, subscribers, topics, tenants, events, messages]


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()
    engine = create_engine(settings.database_url, pool_size=settings.database_pool_size)
    sessionmaker = create_sessionmaker(engine)
    api_keys = ApiKeyResolver(sessionmaker, settings.api_key_cache_seconds)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await engine.dispose()

    app = FastAPI(
        title="Herald",
        version=__version__,
        description=DESCRIPTION,
        default_response_class=JSONResponse,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = sessionmaker
    app.state.api_keys = api_keys
    app.state.secret_box = SecretBox(settings.secret_key)

    install_error_handlers(app)
    for router in _routers():
        app.include_router(router)

    # Outermost first: the size limit runs before anything reads the body.
    app.add_middleware(
        IdempotencyMiddleware,
        sessionmaker=sessionmaker,
        api_keys=api_keys,
        ttl_seconds=settings.idempotency_ttl_seconds,
        lock_seconds=settings.idempotency_lock_seconds,
    )
    app.add_middleware(
        BodyLimitMiddleware, max_bytes=settings.max_body_bytes, max_event_bytes=settings.max_event_body_bytes
    )
    return app
