"""Servers that tests start for themselves: free ports and private redis-server instances.

Tests never bind fixed ports and never run SCRIPT FLUSH / CLIENT KILL / shutdown on the Redis that
REDIS_URL names (it is shared with other runs on the machine): a test that needs one of those uses
the session's private redis-server (the `private_redis` fixture in tests/conftest.py) or starts its
own with `start_redis()` when it must stop it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


def free_port() -> int:
    """A port that was free a moment ago (bind port 0, read it, close). Prefer binding port 0 directly."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def stop_process_group(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """SIGTERM the process group of a child started with start_new_session=True; SIGKILL it if the
    child is still there after `timeout` s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@dataclass
class RedisServer:
    proc: subprocess.Popen
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def start_redis(directory: Path, port: int | None = None) -> RedisServer:
    """A throwaway redis-server on a free port: no persistence, data only in memory. Skips without it.

    `port`: start it on that port (a restart of a server this test stopped: clients keep their URL)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    for _ in range(5 if port is None else 1):  # a probed port can be taken before the bind: try another
        port_now = free_port() if port is None else port
        # repl-diskless-sync-delay 0: a replica of this server (the failover tests') gets its first sync at
        # once, not after Redis's default 5 s wait for more replicas to share the transfer
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port_now), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(directory), "--repl-diskless-sync-delay", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        if wait_for_port(port_now) and proc.poll() is None:
            return RedisServer(proc, port_now)
        proc.kill()
        proc.wait(10)
    raise RuntimeError(f"redis-server did not start (port {port or 'free'})")
