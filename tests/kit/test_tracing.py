"""Which ``OTEL_*`` settings turn traces on, and a wrong protocol refused in one line (herald/kit/tracing.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from herald.kit import tracing
from tests.fixtures.processes import REPO_ROOT


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "herald"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console,otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
    ],
)
def test_traces_are_on_only_when_the_standard_variables_ask(env: dict[str, str], on: bool) -> None:
    assert tracing.wanted(env) is on


def test_the_protocol_is_http_protobuf_unless_grpc_is_named() -> None:
    assert tracing.protocol({}) == "http/protobuf"
    assert tracing.protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == "grpc"
    assert tracing.protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}) == "http/protobuf"
    with pytest.raises(ValueError, match="http/json"):
        tracing.protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_a_worker_with_a_protocol_herald_cannot_send_says_so_in_one_line_and_exits_1(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO_ROOT),
        "HERALD_DATA_DIR": str(tmp_path),
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
    }
    done = subprocess.run([sys.executable, "-m", "herald.cli", "migrate"], env=env, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "herald.cli", "worker"], env=env, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "herald worker: OTEL_EXPORTER_OTLP_PROTOCOL must be one of http/protobuf, grpc (got 'http/json')"
    )


def test_spans_reach_a_collector_over_grpc_when_the_protocol_says_so() -> None:
    """OTEL_EXPORTER_OTLP_PROTOCOL=grpc: a process's spans arrive at an OTLP/gRPC collector (opentelemetry-proto's service)."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    received: list[tuple[str, str]] = []

    class Collector(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (the service's name)
            for resource_spans in request.resource_spans:
                service = next(a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name")
                received.extend((service, span.name) for scope in resource_spans.scope_spans for span in scope.spans)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Collector(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        code = (
            "from herald.kit import tracing\n"
            "assert tracing.configure()\n"
            "with tracing.job_span('step email', None):\n"
            "    with tracing.client_span('provider sendgrid'):\n"
            "        pass\n"
            "tracing.shutdown()\n"
        )
        env = {
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO_ROOT),
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_SERVICE_NAME": "herald-worker",
        }
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
        assert done.returncode == 0, done.stderr
    finally:
        server.stop(0)
    assert sorted(received) == [("herald-worker", "provider sendgrid"), ("herald-worker", "step email")]
