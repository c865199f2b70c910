"""A collector stand-in for benchmarks with traces on: answers every OTLP/HTTP export with 200 and counts spans' bytes.

    python -m bench.otlp_sink [--port 4318]

Run it as a process of its own (its CPU is not the measured process's), then
set ``OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318`` for the run measured.
"""

from __future__ import annotations

import argparse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink(BaseHTTPRequestHandler):
    received = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers.get("content-length") or 0)
        Sink.received += len(self.rfile.read(length))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=4318)
    args = parser.parse_args()
    ThreadingHTTPServer(("127.0.0.1", args.port), Sink).serve_forever()


if __name__ == "__main__":
    main()
