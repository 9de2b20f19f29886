"""A worker host's /metrics (issue "Several hosts"): on one host the web process's /metrics reads the
multiprocess directory the workers write too; a host with only Celery workers has no web process, so
its provider requests, tokens and retries would be scraped by nobody. With
``GATEWAY_WORKER_METRICS_BIND=HOST:PORT`` the worker's main process serves ``GET /metrics`` there — the
same registry as the web's (observability/views.py ``metrics_registry``: this host's directory, the
live state) behind the same ``GATEWAY_METRICS_TOKEN`` — from a daemon thread started on worker_ready."""

from __future__ import annotations

import hmac
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.conf import settings

log = logging.getLogger("observability")
_server: ThreadingHTTPServer | None = None


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        from .views import metrics_registry

        if self.path.split("?", 1)[0] != "/metrics":
            return self._answer(404, b"not found: this listener serves /metrics only\n", "text/plain")
        token = settings.GATEWAY_METRICS_TOKEN
        given = self.headers.get("Authorization", "")
        if token and not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return self._answer(403, b"metrics token required\n", "text/plain")
        self._answer(200, generate_latest(metrics_registry()), CONTENT_TYPE_LATEST)

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        return  # scrapes are not worth a log line each


def start() -> ThreadingHTTPServer | None:
    """Serve this host's metrics at GATEWAY_WORKER_METRICS_BIND (once per process); None when unset. A
    port that cannot be bound is an error at start, never a worker without its metrics."""
    global _server
    bind = settings.GATEWAY_WORKER_METRICS_BIND
    if not bind or _server is not None:
        return _server
    host, port = bind.rsplit(":", 1)
    _server = ThreadingHTTPServer((host.strip("[]"), int(port)), _Handler)
    threading.Thread(target=_server.serve_forever, name="worker-metrics", daemon=True).start()
    log.info("worker metrics served at http://%s/metrics", bind, extra={"event": "worker_metrics"})
    return _server


def stop() -> None:
    global _server
    if _server is not None:
        _server.shutdown()
        _server.server_close()
        _server = None
