"""A real local webhook receiver for tests and bench/: an HTTP server on a free port (thread) that
records every request (path, headers, body, the answer it gave, when it arrived) and counts accepted
connections.

Paths script the answer per ``webhook-id``: ``/fail/N/…`` answers 500 to the first N requests of an id,
then 200; ``/hang/…`` holds the first request of an id until ``release()`` (then closes without an
answer); anything else answers 200.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int | None  # None: held and closed without an answer
    at: float  # time.time() when the request had been read

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.connections = 0
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.seen: Counter[str] = Counter()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                receiver.answer(self, body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self):
                conn = super().get_request()
                with receiver.lock:
                    receiver.connections += 1
                return conn

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="webhook-receiver", daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def answer(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        headers = {k.lower(): v for k, v in handler.headers.items()}
        msg_id = headers.get("webhook-id", "")
        with self.lock:
            self.seen[msg_id] += 1
            nth = self.seen[msg_id]
        parts = handler.path.strip("/").split("/")
        status: int | None = 200
        if parts[0] == "fail" and nth <= int(parts[1]):
            status = 500
        elif parts[0] == "hang" and nth == 1:
            self._record(handler.path, headers, body, None)
            self.released.wait(60)
            handler.close_connection = True
            return
        self._record(handler.path, headers, body, status)
        try:
            handler.send_response(status)
            handler.send_header("Content-Length", "2")
            handler.end_headers()
            handler.wfile.write(b"ok")
        except OSError:
            pass

    def _record(self, path, headers, body, status) -> None:
        with self.lock:
            self.requests.append(Received(path, headers, body, status, time.time()))

    def for_batch(self, batch_id) -> list[Received]:
        import json

        with self.lock:
            rows = list(self.requests)
        return [r for r in rows if json.loads(r.body or b"{}").get("data", {}).get("id") == str(batch_id)]

    def acked(self, batch_id) -> list[Received]:
        return [r for r in self.for_batch(batch_id) if r.status is not None and 200 <= r.status < 300]

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
