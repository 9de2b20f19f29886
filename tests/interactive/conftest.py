"""The interactive lane under test the way it is deployed: the ASGI app in a real uvicorn process
(``uvicorn gateway_site.asgi:application``, the documented command) on this run's database and Redis,
against the simulator; the unmodified openai SDK as the client."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from interactive.models import InteractiveCall
from sim.testing import sim_server  # noqa: F401  (fixture)
from tests.scheduling.conftest import workers  # noqa: F401  (fixture)
from tests.servers import free_port
from tests.waiting import wait_until
from tests.workers import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
CONFIG_REFRESH_SECONDS = 0.2  # the server's GATEWAY_CONFIG_REFRESH_SECONDS


def start_uvicorn(log_path: Path, *, processes: int = 1, **env: str) -> tuple[subprocess.Popen, str]:
    """uvicorn serving gateway_site.asgi:application (``processes`` > 1: uvicorn --workers, one port)."""
    port = free_port()
    log = open(log_path, "ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "gateway_site.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *(["--workers", str(processes)] if processes > 1 else []),
            "--log-level",
            "warning",
        ],  # fmt: skip
        cwd=ROOT,
        env=subprocess_env(GATEWAY_CONFIG_REFRESH_SECONDS=str(CONFIG_REFRESH_SECONDS), **env),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"uvicorn exited: {log_path.read_text()[-3000:]}")
        try:
            return httpx.get(url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, 30, what="the ASGI server to answer /healthz")
    return proc, url


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@pytest.fixture(scope="session")
def gateway(django_db_setup, django_db_blocker, tmp_path_factory):
    """The base URL of a uvicorn process serving gateway_site.asgi:application (one per test session;
    each test's rows are its own: the server reads keys and routes as they are stored)."""
    log_path = tmp_path_factory.mktemp("asgi") / "uvicorn.log"
    proc, url = start_uvicorn(log_path)
    yield url
    stop(proc)


def settled() -> None:
    """Let the server see rows changed just now: it re-checks the config version (and then re-reads
    routes, provider and team limits) at most every CONFIG_REFRESH_SECONDS. Call it after creating or
    changing providers, routes or teams, before the call that needs them."""
    time.sleep(CONFIG_REFRESH_SECONDS + 0.15)


@pytest.fixture
def sdk(gateway):
    """sdk(raw_key, **kw) → an unmodified openai.OpenAI client on the gateway's /v1 (no SDK retries),
    once the server sees the rows the test made before asking for it (``settled``)."""

    def make(raw_key: str, **kw) -> openai.OpenAI:
        settled()
        return openai.OpenAI(base_url=gateway + "/v1", api_key=raw_key, max_retries=0, timeout=60, **kw)

    return make


def logged_calls(n: int, timeout: float = 10.0) -> list[InteractiveCall]:
    """The request log once it holds ``n`` rows (written in bulk, at most half a second later)."""
    return wait_until(
        lambda: (rows := list(InteractiveCall.objects.order_by("created_at"))) and len(rows) >= n and rows,
        timeout,
        what=f"{n} interactive call row(s)",
    )
