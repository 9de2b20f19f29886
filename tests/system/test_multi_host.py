"""The gateway on several hosts (issue "Several hosts"): one network namespace per host on this machine
(tests/netns.py) — PostgreSQL and Redis on ``db``, the simulator on ``sim``, two web hosts and two Celery
worker hosts, each with its own working directory (its own temp dir, files root and Prometheus
directory) and reaching the others only over the network. Every process is started as users start it:
``gunicorn gateway_site.asgi:application --bind …`` (README), ``celery -A gateway_site worker``
(Celery's default pool), ``python manage.py …``.

One run, in order: the seed workload (300 items on three routes) through web host A, watched through B;
a /v1 batch whose file is uploaded through A, created through B, run by the workers and its output
downloaded through A; an interactive call on each web host against one provider quota (the second host
finds the bucket the first one emptied); each web host's /metrics. Every item once, asserted on what
the simulator saw. Skips, loudly, where namespaces cannot be made (not root, no iproute2)."""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from bench.common import bench_sim_config, gateway_providers, seed_items
from tests.netns import Network

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
HOSTS = ["db", "sim", "web-a", "web-b", "worker-a", "worker-b"]
PG_BIN = (
    next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), None)
    if Path("/usr/lib/postgresql").exists()
    else None
)
USERS = 50  # the seed workload: 3 items per user


def _why_not() -> str:
    if PG_BIN is None or not (PG_BIN / "postgres").exists():
        return "PostgreSQL's server binaries (/usr/lib/postgresql/*/bin) are not installed"
    if shutil.which("redis-server") is None:
        return "redis-server is not installed"
    return Network.available()


def wait_http(
    url: str, timeout: float, what: str, ok=lambda r: r.status_code == 200, logs=lambda: ""
) -> httpx.Response:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            r = httpx.get(url, timeout=5, trust_env=False)
            if ok(r):
                return r
            last = f"HTTP {r.status_code}: {r.text[:300]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} ({url}): {last}\n{logs()}")


class Cluster:
    """The hosts' processes and their environments."""

    def __init__(self, net: Network, base: Path) -> None:
        self.net = net
        self.base = base
        self.prefix = f"gwmh:{secrets.token_hex(3)}:"
        self.db_url = f"postgres://postgres@{net.ip('db')}:5432/gateway"
        self.redis_url = f"redis://{net.ip('db')}:6379/0"

    def log(self, name: str) -> Path:
        return self.base / f"{name}.log"

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}" for p in sorted(self.base.glob("*.log"))
        )

    def env(self, host: str) -> dict[str, str]:
        home = self.base / host  # the host's own disk: temp dir, files root, Prometheus directory
        for sub in ("tmp", "files", "metrics"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DJANGO_", "GATEWAY_", "CELERY_", "PROMETHEUS"))
        }
        env.update(
            DJANGO_SETTINGS_MODULE="gateway_site.settings.local", DJANGO_DEBUG="0", DJANGO_ALLOWED_HOSTS="*",
            DJANGO_SECRET_KEY="multi-host-" + "k" * 40, DATABASE_URL=self.db_url, REDIS_URL=self.redis_url,
            GATEWAY_REDIS_PREFIX=self.prefix, TMPDIR=str(home / "tmp"), GATEWAY_FILES_ROOT=str(home / "files"),
            PROMETHEUS_MULTIPROC_DIR=str(home / "metrics"), GATEWAY_METRICS_PUBLIC="1", PYTHONUNBUFFERED="1",
            DJANGO_LOG_LEVEL="WARNING",
        )  # fmt: skip
        return env

    def start_db(self) -> None:
        net, ip = self.net, self.net.ip("db")
        data = Path(tempfile.mkdtemp(prefix="gwmh-pg-"))  # postgres must own it; pytest's tmp is root-only
        shutil.chown(data, "postgres", "postgres")
        net.run(
            "db",
            [str(PG_BIN / "initdb"), "-D", str(data / "d"), "-U", "postgres", "--auth=trust", "--no-sync"],
            user="postgres",
        )
        (data / "d" / "pg_hba.conf").write_text("local all all trust\nhost all all 0.0.0.0/0 trust\n")
        net.popen("db", [str(PG_BIN / "postgres"), "-D", str(data / "d"), "-c", f"listen_addresses={ip}", "-c",
                         f"unix_socket_directories={data}", "-c", "fsync=off", "-c", "max_connections=200"],
                  self.log("postgres"), user="postgres")  # fmt: skip
        net.popen("db", ["redis-server", "--bind", ip, "--port", "6379", "--save", "", "--appendonly", "no",
                         "--protected-mode", "no"], self.log("redis"))  # fmt: skip
        deadline = time.monotonic() + 30
        while subprocess.run([str(PG_BIN / "pg_isready"), "-h", ip, "-q"]).returncode != 0:
            assert time.monotonic() < deadline, self.logs()
            time.sleep(0.2)
        subprocess.run([str(PG_BIN / "createdb"), "-h", ip, "-U", "postgres", "gateway"], check=True)
        self.pgdata = data

    def manage(self, host: str, *args: str) -> str:
        return self.net.run(host, [PY, "manage.py", *args], env=self.env(host), cwd=ROOT)

    def start_web(self, host: str) -> str:
        ip = self.net.ip(host)
        self.net.popen(host, [PY, "-m", "gunicorn", "gateway_site.asgi:application", "--bind", f"{ip}:8000",
                              "--workers", "2"], self.log(host), env=self.env(host), cwd=ROOT)  # fmt: skip
        return f"http://{ip}:8000"

    def start_worker(self, host: str) -> None:
        env = {**self.env(host), "GATEWAY_WORKER_METRICS_BIND": f"{self.net.ip(host)}:9108"}
        self.net.popen(host, [PY, "-m", "celery", "-A", "gateway_site", "worker", "-l", "warning", "-n", f"{host}@%h"],
                       self.log(host), env=env, cwd=ROOT)  # fmt: skip


def metric(text: str, name: str, **labels: str) -> dict[str, float]:
    """The samples of ``name`` in a Prometheus text page whose labels include ``labels``: {labels: value}."""
    out = {}
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        head, value = line.rsplit(" ", 1)
        have = dict(part.split("=", 1) for part in head[len(name) + 1 : -1].split(",") if "=" in part)
        if all(have.get(k, "").strip('"') == v for k, v in labels.items()):
            out[head] = float(value)
    return out


def sim_and_providers(sim_url: str) -> tuple[dict, dict]:
    sim_cfg = bench_sim_config(time_scale=40, errors=False, trace=False)
    sim_cfg["providers"]["tight"] = {"model": "tight-chat", "rpm": 6000, "tpm": 10**7, "median_ms": 5, "sigma": 0,
                                     "max_concurrency": 10, "completion_tokens": 4}  # fmt: skip
    providers = gateway_providers(sim_cfg, sim_url)
    for p in providers["providers"]:
        if p["name"] == "tight":  # 12 RPM, 5 s of burst: the bucket holds one call
            p.update(rpm=12, burst_seconds=5, max_retries=0)
    providers["routes"].append({"route": "tight", "provider": "tight", "priority": 0, "weight": 1})
    return sim_cfg, providers


@pytest.mark.timeout(420)
def test_web_workers_postgres_redis_and_the_provider_on_separate_hosts(tmp_path):
    why = _why_not()
    if why:
        pytest.skip(f"MULTI-HOST TEST NOT RUN: {why}")
    t0 = time.monotonic()

    def phase(what: str) -> None:
        print(f"multi-host: {what} at {time.monotonic() - t0:.1f} s", flush=True)

    with Network(HOSTS) as net:
        c = Cluster(net, tmp_path)
        c.start_db()
        phase("PostgreSQL and Redis up")
        sim_url = f"http://{net.ip('sim')}:8900"
        sim_cfg, providers = sim_and_providers(sim_url)
        (tmp_path / "sim.json").write_text(json.dumps(sim_cfg))
        (tmp_path / "providers.json").write_text(json.dumps(providers))
        net.popen("sim", [PY, "-m", "sim", "--config", str(tmp_path / "sim.json"), "--host", net.ip("sim"),
                          "--port", "8900"], c.log("sim"), cwd=ROOT)  # fmt: skip
        c.manage("web-a", "migrate", "--noinput")
        phase("migrated")
        a, b = c.start_web("web-a"), c.start_web("web-b")  # they start while the data is loaded
        c.start_worker("worker-a")
        c.start_worker("worker-b")
        c.manage("web-a", "load_providers", str(tmp_path / "providers.json"))
        c.manage("web-b", "create_team", "acme")
        key = c.manage("web-b", "create_api_key", "--team", "acme", "--name", "mh").strip().splitlines()[-1]
        wait_http(f"{sim_url}/_sim/health", 30, "the simulator", logs=c.logs)
        for web in (a, b):  # ready: database, migrations, Redis and both workers' heartbeats
            wait_http(f"{web}/readyz", 90, "the web host to be ready", logs=c.logs)
        phase("every host ready")
        auth = {"Authorization": f"Bearer {key}"}
        http = httpx.Client(timeout=60, trust_env=False, headers=auth)

        # 1. the seed workload through A, watched through B
        items = seed_items(USERS)
        r = http.post(f"{a}/api/v1/batches", json={"items": items})
        assert r.status_code == 201, r.text
        seed_id = r.json()["id"]
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            state = http.get(f"{b}/api/v1/batches/{seed_id}").json()
            if state.get("status") in ("completed", "failed", "cancelled"):
                break
            time.sleep(0.5)
        assert state.get("status") == "completed", (state, c.logs())
        assert state["request_counts"]["completed"] == len(items), state

        phase("seed batch done")
        # 2. /v1: uploaded through A, created through B, output downloaded through A
        lines = [{"custom_id": f"v{i}", "method": "POST", "url": "/v1/chat/completions",
                  "body": {"model": "intent", "messages": [{"role": "user", "content": f"question {i}"}],
                           "max_tokens": 8}} for i in range(40)]  # fmt: skip
        blob = "".join(json.dumps(line) + "\n" for line in lines).encode()
        up = http.post(
            f"{a}/v1/files", files={"file": ("in.jsonl", io.BytesIO(blob))}, data={"purpose": "batch"}
        )
        assert up.status_code == 200, up.text
        made = http.post(f"{b}/v1/batches", json={"input_file_id": up.json()["id"], "endpoint": "/v1/chat/completions",
                                                  "completion_window": "24h"})  # fmt: skip
        assert made.status_code == 200, made.text
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            v1 = http.get(f"{b}/v1/batches/{made.json()['id']}").json()
            if v1["status"] in ("completed", "failed", "expired", "cancelled"):
                break
            time.sleep(0.5)
        assert v1["status"] == "completed" and v1["output_file_id"], (v1, c.logs())
        out = http.get(f"{a}/v1/files/{v1['output_file_id']}/content")
        assert out.status_code == 200, out.text
        answered = [json.loads(line) for line in out.text.splitlines() if line.strip()]
        assert Counter(x["custom_id"] for x in answered) == Counter(line["custom_id"] for line in lines)
        assert all(x["response"]["status_code"] == 200 for x in answered)

        phase("/v1 batch done")
        # 3. interactive calls on both web hosts against one provider quota (its bucket holds one call)
        body = {"model": "tight", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}
        now = {"X-Gateway-Max-Wait": "0"}
        first = http.post(f"{a}/v1/chat/completions", json=body, headers=now)
        second = http.post(f"{b}/v1/chat/completions", json=body, headers=now)
        assert first.status_code == 200, first.text
        assert second.status_code == 429 and second.json()["error"]["code"] == "gateway_queue_timeout", (
            second.text
        )
        third = http.post(f"{b}/v1/chat/completions", json=body, headers={"X-Gateway-Max-Wait": "30"})
        assert third.status_code == 200, third.text  # B waits for the shared bucket's next token

        # 4. every host's /metrics: each web host its own interactive call, the worker hosts (their own
        # listener, GATEWAY_WORKER_METRICS_BIND) every batch request between them
        def requests_seen(url: str, lane: str) -> float:
            text = httpx.get(f"{url}/metrics", timeout=10, trust_env=False).text
            return sum(metric(text, "gateway_provider_requests_total", lane=lane, outcome="ok").values())

        assert [requests_seen(web, "interactive") for web in (a, b)] == [1.0, 1.0]
        assert [requests_seen(web, "batch") for web in (a, b)] == [0.0, 0.0]  # not these hosts' work
        per_worker = [requests_seen(f"http://{net.ip(h)}:9108", "batch") for h in ("worker-a", "worker-b")]
        assert sum(per_worker) == len(items) + len(lines), per_worker

        # what the simulator saw: every batch item and /v1 line once, two interactive calls
        seen = httpx.get(f"{sim_url}/_sim/requests", timeout=10, trust_env=False).json()["providers"]
        counts = Counter()
        for per in seen.values():
            counts.update(per)
        expected = {it["custom_id"] for it in items} | {line["custom_id"] for line in lines}
        twice = {cid: n for cid, n in counts.items() if cid in expected and n != 1}
        assert not twice, twice
        assert expected <= set(counts), sorted(expected - set(counts))[:10]
        assert sum(seen.get("tight", {}).values()) == 2
        http.close()
