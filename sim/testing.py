"""Helpers to run the simulator inside tests and benchmarks.

    from sim.testing import run_simulator_in_thread

    with run_simulator_in_thread({"providers": {"alpha": {"rpm": 60}}}) as sim:
        sim.provider_url("alpha")        # "http://127.0.0.1:PORT/alpha/v1" -> Provider.base_url
        sim.counters()["providers"]["alpha"]["ok"]
        sim.request_counts()["alpha"]    # {X-Request-ID: requests}, every answer included

The pytest fixture ``sim_server`` (import it into a conftest: ``from sim.testing import sim_server``)
is a factory: ``sim = sim_server(config_dict)``; every simulator it started is stopped at teardown.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from sim.config import SimConfig, load_config

REPO_ROOT = Path(__file__).resolve().parent.parent
# what follows "{base}/{name}" in the gateway's base_url for a provider of each kind
KIND_TAILS = {"openai": "/v1", "anthropic": "/v1", "gemini": "/v1beta", "azure_openai": "", "bedrock": ""}


@dataclass
class SimHandle:
    """A running simulator. ``base_url`` is "http://host:port" (no trailing slash)."""

    base_url: str
    port: int

    def provider_url(self, name: str) -> str:
        """The OpenAI base_url of a provider: "{base_url}/{name}/v1"."""
        return f"{self.base_url}/{name}/v1"

    def kind_url(self, name: str, kind: str) -> str:
        """The gateway's base_url for a provider of ``kind``: openai and anthropic "{base}/{name}/v1",
        gemini "{base}/{name}/v1beta", azure_openai "{base}/{name}"."""
        return f"{self.base_url}/{name}{KIND_TAILS[kind]}"

    def base_url_for(self, name: str) -> str:
        """The base_url for provider ``name`` of whatever kind the running config gives it."""
        kinds = httpx.get(f"{self.base_url}/_sim/health", timeout=10).json()["kinds"]
        return self.kind_url(name, kinds[name])

    def shape_rejections(self) -> dict[str, int]:
        """{provider: requests its kind's API would have refused as malformed} (0 everywhere = the
        gateway spoke every provider's API correctly)."""
        return {name: c["shape_rejections"] for name, c in self.counters()["providers"].items()}

    def counters(self) -> dict:
        """GET /_sim/counters: {"providers": {name: {...}}, "totals": {...}, "time_scale", "minute_s"}."""
        return httpx.get(f"{self.base_url}/_sim/counters", timeout=10).json()

    def provider_counters(self, name: str) -> dict:
        return self.counters()["providers"][name]

    def request_counts(self) -> dict[str, dict[str, int]]:
        """GET /_sim/requests: {provider: {request_id: requests}} for every request that reached a
        provider's chat route, whatever the answer ("" = no X-Request-ID). Zeroed by reset/set_config.
        The shape ``tests.exactly_once.assert_exactly_once`` reads."""
        return httpx.get(f"{self.base_url}/_sim/requests", timeout=30).json()["providers"]

    def batch_lines(self) -> dict[str, dict[str, int]]:
        """GET /_sim/batch_lines: {provider: {custom_id: lines}} over every provider batch created (the
        batch APIs' counterpart of request_counts; zeroed by reset/set_config)."""
        return httpx.get(f"{self.base_url}/_sim/batch_lines", timeout=30).json()["providers"]

    def trace(self) -> list[dict]:
        """GET /_sim/trace as dicts {provider, tag, status, arrival_s, done_s, tokens} (needs
        trace_tag_regex; tokens: what the provider's TPM limiter counted, prompt + max_tokens; 0 when
        the request was turned away before it)."""
        data = httpx.get(f"{self.base_url}/_sim/trace", timeout=30).json()
        return [dict(zip(data["fields"], row, strict=True)) for row in data["rows"]]

    def reset(self) -> None:
        """Zero the counters and request counts, refill the buckets, restart outage clocks and scripts."""
        httpx.post(f"{self.base_url}/_sim/reset", timeout=10).raise_for_status()

    def set_config(self, config: dict | SimConfig | str) -> None:
        """Replace the whole configuration (and reset)."""
        raw = config if isinstance(config, dict) else json.loads(Path(config).read_text())
        r = httpx.post(f"{self.base_url}/_sim/config", json=raw, timeout=10)
        if r.status_code != 200:
            raise ValueError(r.json().get("error", r.text))

    def __str__(self) -> str:
        return self.base_url


@contextmanager
def run_simulator_in_thread(
    config: dict | str | SimConfig, host: str = "127.0.0.1", port: int = 0, handler_cancellation: bool = True
):
    """Serve ``config`` from a daemon thread with its own event loop; yields a SimHandle.

    ``port=0`` binds a free port. The config is validated before the thread starts (ConfigError).
    ``handler_cancellation``: see ``sim.server.start``.
    """
    cfg = load_config(config)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict = {}

    def target():
        asyncio.set_event_loop(loop)
        from sim.server import start

        async def boot():
            box["runner"], box["port"] = await start(
                cfg, host, port, handler_cancellation=handler_cancellation
            )

        try:
            loop.run_until_complete(boot())
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            box["error"] = exc
            ready.set()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(box["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=target, name="sim-server", daemon=True)
    thread.start()
    if not ready.wait(15):
        raise RuntimeError("simulator did not start within 15 s")
    if "error" in box:
        raise box["error"]
    try:
        yield SimHandle(base_url=f"http://{host}:{box['port']}", port=box["port"])
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@contextmanager
def run_simulator_subprocess(
    config: dict | str | SimConfig,
    host: str = "127.0.0.1",
    port: int = 0,
    log_path: str | Path | None = None,
    python: str = sys.executable,
):
    """Serve ``config`` from a separate ``python -m sim`` process (own CPU, no GIL sharing).

    ``config`` is a dict or a path to a JSON file. Yields a SimHandle; the process is terminated on exit.
    """
    tmp = None
    if isinstance(config, dict):
        load_config(config)  # validate here for a clear error
        tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(config, tmp)
        tmp.close()
        path = tmp.name
    else:
        path = str(config)
        load_config(path)
    err = open(log_path, "ab") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(
        [python, "-m", "sim", "--config", path, "--host", host, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=err,
        cwd=str(REPO_ROOT),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 20
        line = b""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith(b"sim listening on ") or not line:
                break
        if not line.startswith(b"sim listening on "):
            raise RuntimeError(f"simulator did not start (exit code {proc.poll()})")
        url = line.decode().split("sim listening on ", 1)[1].strip()
        yield SimHandle(base_url=url, port=int(url.rsplit(":", 1)[1]))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout:
            proc.stdout.close()
        if log_path:
            err.close()
        if tmp is not None:
            os.unlink(tmp.name)


try:
    import pytest
except ImportError:  # pragma: no cover - pytest is a dev dependency
    pytest = None

if pytest is not None:

    @pytest.fixture
    def sim_server():
        """Factory fixture: ``sim = sim_server(config_dict)`` starts a simulator (thread, free port)."""
        stack = []

        def start(config, **kw) -> SimHandle:
            cm = run_simulator_in_thread(config, **kw)
            handle = cm.__enter__()
            stack.append(cm)
            return handle

        yield start
        while stack:
            stack.pop().__exit__(None, None, None)
