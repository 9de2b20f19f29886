"""With OTEL_EXPORTER_OTLP_ENDPOINT set, a gateway process exports its Django request spans over OTLP/HTTP
to a real local HTTP server."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import django, os
django.setup()
from django.test import Client
from observability import tracing
assert tracing.enabled()
response = Client(HTTP_HOST="127.0.0.1").get("/healthz", HTTP_X_REQUEST_ID="otlp-1")
assert response.status_code == 200
from opentelemetry import trace
trace.get_tracer_provider().force_flush(10_000)
print("flushed")
"""


def test_spans_are_exported_over_otlp_http(tmp_path):
    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server API
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append((self.path, body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="gateway_site.settings.test",
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}",
            OTEL_SERVICE_NAME="gateway-test",
            DJANGO_LOG_LEVEL="WARNING",
        )
        done = subprocess.run(
            [sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "flushed" in done.stdout
    finally:
        server.shutdown()
    paths = {path for path, _ in received}
    assert paths == {"/v1/traces"}
    payload = b"".join(body for _, body in received)
    assert b"gateway-test" in payload  # the resource's service.name
    assert b"/healthz" in payload  # the Django request span
