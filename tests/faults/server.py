"""Start and stop tests/faults/broken_provider.py as its own process (a free port, chosen by the OS)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.servers import stop_process_group

ROOT = Path(__file__).resolve().parents[2]


class BrokenProvider:
    def __init__(self, proc: subprocess.Popen, port: int):
        self.proc, self.port = proc, port

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    def counts(self) -> dict:
        """GET /counts: {"by_mode": {mode: n}, "by_request": {request_id: n}}."""
        return self._get("/counts")

    def request_counts(self) -> dict[str, dict[str, int]]:
        """GET /_sim/requests: {mode: {request_id: n}} (a mode is the provider's name in the tests), the
        simulator's shape, for ``tests.exactly_once.assert_exactly_once``."""
        return self._get("/_sim/requests")["providers"]

    def reset(self) -> None:
        """POST /_sim/reset: zero every count (the server is shared by a test module)."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/_sim/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def _get(self, path: str) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as response:
            return json.loads(response.read())


@contextmanager
def broken_provider() -> Iterator[BrokenProvider]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.broken_provider", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline().decode()
        if not line.startswith("PORT "):
            raise RuntimeError(f"broken provider did not start: {line!r}")
        yield BrokenProvider(proc, int(line.split()[1]))
    finally:
        stop_process_group(proc, 10)
        proc.stdout.close()
