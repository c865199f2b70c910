"""OpenTelemetry traces: a trigger's request, each step's run and each provider call, as one trace.

Off unless the standard variables ask for it: ``OTEL_EXPORTER_OTLP_ENDPOINT``
(or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set, or ``OTEL_TRACES_EXPORTER``
naming ``otlp``; ``OTEL_SDK_DISABLED=true`` keeps it off whatever else is set.
The rest is OpenTelemetry's own configuration, read by its SDK:
``OTEL_SERVICE_NAME`` (default ``herald``), ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf``, the default, or ``grpc``),
``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``.

The trace crosses processes through the store: the trigger's request span is
written as a W3C ``traceparent`` on the job that expands the event (in the same
insert as the job), copied onto the step jobs the expansion makes, and each
worker that runs one of them continues the trace from it. Nothing is imported,
computed or written for traces while they are off: every entry point here
answers at once when :data:`tracer` is None.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("herald.tracing")

# Set by configure() when traces are on: the process's tracer, and its provider (flushed at exit).
tracer: Any = None
_provider: Any = None
_propagator: Any = None
_SERVER = _CLIENT = _INTERNAL = None
_ERROR: Any = None

PROTOCOLS = ("http/protobuf", "grpc")


def wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether the ``OTEL_*`` variables ask for traces (see the module's docstring)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = {name.strip().lower() for name in env.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip()}
    if "none" in exporters:
        return False
    if "otlp" in exporters:
        return True
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def protocol(env: Mapping[str, str] | None = None) -> str:
    """The OTLP protocol the variables name (traces' own first), ``http/protobuf`` by default."""
    env = os.environ if env is None else env
    chosen = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
    if chosen not in PROTOCOLS:
        raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL must be one of {', '.join(PROTOCOLS)} (got {chosen!r})")
    return chosen


def configure(env: Mapping[str, str] | None = None) -> bool:
    """Turn traces on for this process when the variables ask for it; returns whether they are on.

    Called once by each ``herald`` process before it serves or works. The
    spans are sent in batches by the SDK's exporter thread, off the event loop.
    """
    global tracer, _provider, _propagator, _SERVER, _CLIENT, _INTERNAL, _ERROR
    env = os.environ if env is None else env
    if tracer is not None or not wanted(env):
        return tracer is not None
    from opentelemetry import trace
    from opentelemetry.sdk.resources import OTEL_SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import SpanKind, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from herald import __version__

    if protocol(env) == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore[assignment]

    attributes = {"service.version": __version__}
    if not env.get(OTEL_SERVICE_NAME):
        attributes["service.name"] = "herald"
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider = provider
    _propagator = TraceContextTextMapPropagator()
    _SERVER, _CLIENT, _INTERNAL, _ERROR = SpanKind.SERVER, SpanKind.CLIENT, SpanKind.INTERNAL, StatusCode.ERROR
    tracer = provider.get_tracer("herald", __version__)
    logger.info("traces on: OTLP over %s", protocol(env))
    return True


def shutdown() -> None:
    """Send the spans still waiting in the batch (at exit)."""
    global tracer, _provider
    if _provider is not None:
        try:
            _provider.shutdown()
        except Exception:  # an unreachable collector must not hold up the exit
            logger.warning("could not send the last spans", exc_info=True)
    tracer = _provider = None


def current_traceparent() -> str | None:
    """The current span as a W3C ``traceparent``, to write on a job; None while traces are off."""
    if tracer is None:
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent")


def _parent(traceparent: str | None) -> Any:
    return None if not traceparent else _propagator.extract({"traceparent": traceparent})


@contextmanager
def _job_span(name: str, traceparent: str | None, attributes: dict[str, Any]) -> Iterator[Any]:
    with tracer.start_as_current_span(name, context=_parent(traceparent), kind=_INTERNAL, attributes=attributes) as span:
        yield span


def job_span(name: str, traceparent: str | None, **attributes: Any) -> Any:
    """A span continuing the trace a job carries (its ``trace_context``), current while the job runs."""
    if tracer is None:
        return nullcontext()
    return _job_span(name, traceparent, {key: value for key, value in attributes.items() if value is not None})


def start_job_span(name: str, traceparent: str | None, **attributes: Any) -> Any:
    """A span of a job run among others of a batch (not made current): end it with ``.end()``. None while off."""
    if tracer is None:
        return None
    return tracer.start_span(
        name, context=_parent(traceparent), kind=_INTERNAL, attributes={k: v for k, v in attributes.items() if v is not None}
    )


def client_span(name: str, **attributes: Any) -> Any:
    """A span of a call to another system (a provider's API), child of the current one."""
    if tracer is None:
        return nullcontext()
    return tracer.start_as_current_span(name, kind=_CLIENT, attributes=attributes)


def mark_failed(span: Any, reason: str) -> None:
    """Set a span's status to error with ``reason`` (no-op for the null span of traces off)."""
    if span is not None and tracer is not None:
        span.set_status(_ERROR, reason)


class TracedRequests:
    """An ASGI wrapper that makes a server span of each HTTP request, continuing an incoming ``traceparent``.

    Named by the route's template once routed (``POST /v1/events/trigger``),
    never the raw path, as the metrics are. Only installed while traces are on.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or tracer is None:
            await self.app(scope, receive, send)
            return
        from herald.kit.metrics import route_template

        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope.get("headers", ()) if key in (b"traceparent", b"tracestate")}
        method = scope["method"]
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with tracer.start_as_current_span(
            method, context=_propagator.extract(headers), kind=_SERVER, attributes={"http.request.method": method}
        ) as span:
            try:
                await self.app(scope, receive, send_status)
            finally:
                route = route_template(scope)
                span.update_name(f"{method} {route}")
                span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(_ERROR)
