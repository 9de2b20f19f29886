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
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/counts", timeout=10) as response:
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
