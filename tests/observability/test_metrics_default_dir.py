"""Plain commands on one host share metrics: a `celery -A gateway_site worker` (default prefork pool, two
children) started WITHOUT PROMETHEUS_MULTIPROC_DIR derives the same per-host default directory as this
pytest process (the web side: its /metrics is the Django test client's), and /metrics counts what the
simulator saw. When collection is off the gap is loud: gateway_worker_metrics_collected 0, a /readyz
detail and a start-up warning — never a silent 0."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from batches.models import BatchItem, ItemStatus
from observability import health, metrics_dir
from tests import workers
from tests.factories import make_batch
from tests.factories import work_item as q

from .helpers import PoolWatch, children_of, samples, value

ROOT = Path(__file__).resolve().parents[2]

SIM = {
    "providers": {
        "alpha": {"median_ms": 10, "status_script": [429, 429, 500], "completion_tokens": 5},
        "beta": {"median_ms": 30, "completion_tokens": 7},
        "gamma": {"median_ms": 5, "fixed_status": 400},  # never retried
    }
}


def scrape(client) -> dict:
    response = client.get("/metrics")
    assert response.status_code == 200
    return samples(response.content.decode())


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(part.split("=", 1) for part in raw.decode(errors="replace").split("\0") if "=" in part)


def file_pids(directory: Path, pattern: str) -> set[int]:
    return {int(p.stem.rsplit("_", 1)[-1]) for p in directory.glob(pattern)}


@pytest.fixture
def plain_worker_env(monkeypatch):
    """Workers started by this test get this run's database, Redis and prefix, and no metrics directory
    variable at all (as with `celery -A gateway_site worker` typed in a shell)."""
    real = workers.subprocess_env

    def without_metrics_dir(**extra: str) -> dict[str, str]:
        env = real(**extra)
        for name in (metrics_dir.ENV, metrics_dir.LEGACY_ENV, metrics_dir.SWITCH):
            env.pop(name, None)
        return env

    monkeypatch.setattr(workers, "subprocess_env", without_metrics_dir)
    return without_metrics_dir


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "pool",
    [("-c", "2"), ("-c", "2", "--max-tasks-per-child", "1")],
    ids=["prefork", "prefork-children-replaced"],
)
def test_plain_prefork_worker_without_multiproc_dir_is_counted_by_the_web(
    pool, sim_server, team, make_provider, redis_sync, tmp_path, client, plain_worker_env
):
    # this process (the web side) derived the default directory of this run's Redis and prefix
    assert settings.GATEWAY_METRICS_DIR_SOURCE == "default"
    directory = Path(settings.GATEWAY_METRICS_DIR)
    assert directory.is_dir() and stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert os.environ[metrics_dir.ENV] == str(directory)
    queue = workers.test_queue("mdir")
    worker_env = workers.worker_env(queue)
    assert metrics_dir.ENV not in worker_env
    assert metrics_dir.default_path(worker_env) == str(directory)  # the worker derives the same

    sim = sim_server(SIM)
    for name, concurrency in (("alpha", 3), ("beta", 3), ("gamma", 2)):
        make_provider(name, base_url=sim.provider_url(name), rpm=60_000, tpm=10**8, burst_seconds=1,
                      max_concurrency=concurrency, timeout_seconds=5, max_retries=5)  # fmt: skip
    items = [q(f"a{i:03d}", provider="alpha", max_tokens=5) for i in range(40)]
    items += [q(f"b{i:03d}", provider="beta", max_tokens=7) for i in range(30)]
    items += [q(f"g{i}", provider="gamma", max_tokens=5) for i in range(3)]
    batch = make_batch(team, items)

    # earlier tests of this run (this process's eager batches, their workers) count in the same sums
    before = scrape(client)
    files_before = file_pids(directory, "counter_*.db")

    replaced = "--max-tasks-per-child" in pool
    worker = workers.start_worker("mdir", queue, tmp_path / "worker.log", loglevel="INFO", pool=pool,
                                  GATEWAY_CHUNK_SIZE="20", GATEWAY_DISPATCHERS="2",
                                  GATEWAY_DISPATCH_SLICE_SECONDS="2")  # fmt: skip
    watch = PoolWatch([worker]).__enter__()  # every pool child, also one that lives for a single task
    try:
        assert metrics_dir.ENV not in environ_of(worker.pid)  # really started without the variable
        workers.send_start_batch(batch.id, queue)
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            batch.refresh_from_db()
            if batch.completed_at is not None:
                break
            time.sleep(0.05)
        assert batch.completed_at is not None, (tmp_path / "worker.log").read_text()[-3000:]
        if replaced:  # until a child that sent requests has exited (after its task) and been replaced
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                exited = (file_pids(directory, "counter_*.db") - files_before) - children_of(worker.pid)
                if exited and len(watch.children) > 2:  # ... and the pool has started its replacement
                    break
                time.sleep(0.05)
            assert exited, (watch.children, children_of(worker.pid))
        # the worker's heartbeat names the directory it derived: the same; /readyz says so
        beats = {
            k.decode().rsplit(":", 1)[-1]: json.loads(v)
            for k in redis_sync.scan_iter(match=health.heartbeat_pattern())
            if (v := redis_sync.get(k)) is not None
        }
        assert beats[str(worker.pid)]["metrics_dir"] == str(directory), beats
        readyz = client.get("/readyz").json()["checks"]["worker_metrics"]
        assert readyz == {"status": "ok", "detail": f"collected from {directory}"}
        during_run = set(watch.children)  # stopping the group may make the pool start another child
    finally:
        workers.stop_worker(worker)
        watch.__exit__(None, None, None)
        workers.delete_queue(queue)
    children = watch.children

    counted = sim.counters()["providers"]
    after = scrape(client)

    def grew(name: str, **labels) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # what the provider saw is what /metrics reports: the prefork children wrote to this directory
    for name in ("alpha", "beta", "gamma"):
        assert counted[name]["requests"] > 0, name
        assert grew("gateway_provider_requests_total", provider=name) == counted[name]["requests"], name
        assert (
            grew("gateway_provider_request_duration_seconds_count", provider=name)
            == counted[name]["requests"]
        )
        assert (
            grew("gateway_provider_tokens_total", provider=name, kind="completion")
            == counted[name]["billed_completion_tokens"]
        )
    assert grew("gateway_provider_requests_total", provider="alpha", outcome="429") == 2
    assert grew("gateway_provider_requests_total", provider="alpha", outcome="5xx") == 1
    assert grew("gateway_provider_requests_total", provider="gamma", outcome="4xx") == 3
    assert grew("gateway_items_total", status="succeeded") == 70
    assert grew("gateway_items_total", status="failed") == 3
    assert BatchItem.objects.filter(batch=batch, status=ItemStatus.SUCCEEDED).count() == 70
    assert value(after, "gateway_worker_metrics_collected") == 1

    # the counts come from the worker's pool children (prefork: its main process runs no task), whose
    # files stay after they exited (totals stay monotonic) while their live gauges were marked dead
    new_files = file_pids(directory, "counter_*.db") - files_before
    assert new_files and new_files <= children, (new_files, children, worker.pid)
    assert os.getpid() not in new_files
    assert not (file_pids(directory, "gauge_live*.db") & (children | {worker.pid}))
    assert value(after, "gateway_engine_runs") == 0
    if replaced:  # every task in a new child: the exited ones' requests are in the sums above
        assert len(during_run) > 2, during_run
    else:
        # -c 2: two children; a third pid was seen in some full-suite runs since the warm-shutdown change
        # (no child exit logged, the counts above still exact; see the #19/#28 closing note)
        assert 2 <= len(during_run) <= 3, during_run


# ---- the gap is loud -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_no_directory_in_multi_process_mode_is_a_0_gauge_and_a_readyz_warning(client):
    with override_settings(GATEWAY_METRICS_DIR="", GATEWAY_METRICS_DIR_SOURCE="off"):
        m = scrape(client)
        response = client.get("/readyz")
    assert value(m, "gateway_worker_metrics_collected") == 0
    assert ("gateway_worker_metrics_collected", frozenset()) in m  # present, not merely absent
    check = response.json()["checks"]["worker_metrics"]
    assert check["status"] == "warn" and check["detail"].startswith("NOT collected: ")
    assert "GATEWAY_METRICS_DIR=off" in check["detail"]
    # a metrics gap does not take the gateway out of rotation
    assert health.Check("worker_metrics", True, warn=True).ok

    with override_settings(GATEWAY_METRICS_DIR=str(settings.GATEWAY_METRICS_DIR)):
        assert value(scrape(client), "gateway_worker_metrics_collected") == 1


@pytest.mark.django_db
def test_single_process_mode_needs_no_directory(client):
    with override_settings(GATEWAY_QUOTA_BACKEND="local", GATEWAY_METRICS_DIR=""):
        m = scrape(client)
        check = client.get("/readyz").json()["checks"]["worker_metrics"]
    assert value(m, "gateway_worker_metrics_collected") == 1  # the engine runs in this process
    assert check["status"] == "skipped"


@pytest.mark.django_db
def test_a_worker_of_this_host_writing_elsewhere_is_named(client, redis_sync, tmp_path):
    """A worker whose heartbeat names another directory (another temp dir, a systemd PrivateTmp, another
    PROMETHEUS_MULTIPROC_DIR) is missing from this /metrics: 0 and named, until it is gone."""
    name = f"{socket.gethostname()}:999999"
    key = health.heartbeat_key(name)
    redis_sync.set(key, json.dumps({"time": time.time(), "metrics_dir": str(tmp_path)}), ex=30)
    try:
        m = scrape(client)
        check = client.get("/readyz").json()["checks"]["worker_metrics"]
        assert value(m, "gateway_worker_metrics_collected") == 0
        assert check["status"] == "warn"
        assert f"{name} writes {tmp_path}" in check["detail"]
        assert f"this process reads {settings.GATEWAY_METRICS_DIR}" in check["detail"]
        # another host's worker writes its own host's directory: not a gap here
        redis_sync.set(key, b"", ex=1)
        redis_sync.delete(key)
        other = health.heartbeat_key("elsewhere.example:4242")
        redis_sync.set(other, json.dumps({"time": time.time(), "metrics_dir": "/x"}), ex=30)
        assert value(scrape(client), "gateway_worker_metrics_collected") == 1
    finally:
        redis_sync.delete(key, health.heartbeat_key("elsewhere.example:4242"))


def run_python(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """A fresh process on this run's settings (database, Redis, prefix) with ``env`` on top."""
    base = workers.subprocess_env(DJANGO_LOG_LEVEL="INFO", GATEWAY_LOG_FORMAT="json", PYTHONPATH=str(ROOT))
    for name in (metrics_dir.ENV, metrics_dir.LEGACY_ENV, metrics_dir.SWITCH):
        base.pop(name, None)
    base.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=base, capture_output=True, text=True, timeout=60
    )


COUNT_ONE = """
import django, os
django.setup()
from django.conf import settings
from observability import metrics
metrics.retries.labels(provider="test-metrics-dir", reason="none").inc()
import prometheus_client.values as v
print(repr(settings.GATEWAY_METRICS_DIR), settings.GATEWAY_METRICS_DIR_SOURCE, v.ValueClass._multiprocess,
      os.environ.get("PROMETHEUS_MULTIPROC_DIR"), os.environ.get("GATEWAY_METRICS_DIR"))
"""


@pytest.mark.django_db
@pytest.mark.parametrize("opt_out", [{"GATEWAY_METRICS_DIR": "off"}, {"PROMETHEUS_MULTIPROC_DIR": ""}])
def test_explicit_opt_out_writes_no_files_and_warns_at_start_up(opt_out, tmp_path):
    done = run_python(COUNT_ONE, tmp_path, **opt_out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["''", "off", "False", "None", "off"]  # children inherit "off"
    assert list(tmp_path.iterdir()) == []  # an empty PROMETHEUS_MULTIPROC_DIR never means the cwd
    warnings = [
        json.loads(line) for line in done.stderr.splitlines() if '"worker_metrics_not_collected"' in line
    ]
    assert len(warnings) == 1 and warnings[0]["level"] == "WARNING", done.stderr
    assert "gateway_worker_metrics_collected 0" in warnings[0]["message"]


@pytest.mark.django_db
def test_a_fresh_process_writes_to_the_runs_default_directory(tmp_path):
    done = run_python(COUNT_ONE, tmp_path)
    assert done.returncode == 0, done.stderr
    directory = settings.GATEWAY_METRICS_DIR
    assert done.stdout.split() == [repr(directory), "default", "True", directory, "None"]
    assert "worker_metrics_not_collected" not in done.stderr
    # another prefix (another deployment, another test run) on the same Redis: another directory
    other = run_python(COUNT_ONE, tmp_path, GATEWAY_REDIS_PREFIX=settings.GATEWAY_REDIS_PREFIX + "other:")
    assert other.returncode == 0, other.stderr
    other_dir = other.stdout.split()[3]
    try:
        assert other_dir != directory and metrics_dir.is_derived(other_dir)
        assert list(Path(other_dir).glob("counter_*.db"))
    finally:
        for f in Path(other_dir).iterdir():
            f.unlink()
        Path(other_dir).rmdir()
    assert list(tmp_path.iterdir()) == []


# ---- the derivation rule (pure) ------------------------------------------------------------------------


def test_default_directory_names_the_deployment_not_its_secrets():
    base = {"REDIS_URL": "redis://:s3cret@10.0.0.5:6379/0", "GATEWAY_REDIS_PREFIX": "bgw:"}
    path = metrics_dir.default_path(base)
    assert path is not None and metrics_dir.is_derived(path)
    assert os.path.basename(path).startswith(f"batch-gateway-metrics-{os.getuid()}-")
    assert "s3cret" not in path
    # the password is not part of the identity (nor leaked through the hash); everything else is
    assert metrics_dir.default_path({**base, "REDIS_URL": "redis://:other@10.0.0.5:6379/0"}) == path
    for change in (
        {"REDIS_URL": "redis://:s3cret@10.0.0.5:6379/1"},
        {"REDIS_URL": "redis://:s3cret@10.0.0.6:6379/0"},
        {"GATEWAY_REDIS_PREFIX": "bgwtest:1234:"},
    ):
        assert metrics_dir.default_path({**base, **change}) != path, change
    assert metrics_dir.default_path({"REDIS_URL": "  "}) is None  # single-process mode


def test_resolve_rules():
    redis = {"REDIS_URL": "redis://127.0.0.1:6379/0"}
    assert metrics_dir.resolve({}) == metrics_dir.MetricsDir("", "single-process")
    assert metrics_dir.resolve(redis).source == "default"
    assert metrics_dir.resolve({**redis, "PROMETHEUS_MULTIPROC_DIR": "/srv/m"}).path == "/srv/m"
    assert metrics_dir.resolve({**redis, "PROMETHEUS_MULTIPROC_DIR": " "}).source == "off"
    assert metrics_dir.resolve({**redis, "GATEWAY_METRICS_DIR": "OFF"}).source == "off"
    assert metrics_dir.resolve({"PROMETHEUS_MULTIPROC_DIR": "/srv/m"}).path == "/srv/m"  # explicit wins
    # a derived name inherited from a parent of another deployment is derived again here
    inherited = metrics_dir.default_path({**redis, "GATEWAY_REDIS_PREFIX": "parent:"})
    mine = metrics_dir.resolve({**redis, "PROMETHEUS_MULTIPROC_DIR": inherited})
    assert mine == metrics_dir.MetricsDir(metrics_dir.default_path(redis), "default")
    assert metrics_dir.resolve({"PROMETHEUS_MULTIPROC_DIR": inherited}).source == "single-process"
    with pytest.raises(ValueError, match="GATEWAY_METRICS_DIR"):
        metrics_dir.resolve({"GATEWAY_METRICS_DIR": "/tmp/x"})


def test_configure_refuses_a_directory_it_does_not_own_privately(tmp_path, monkeypatch):
    monkeypatch.setattr(metrics_dir.tempfile, "gettempdir", lambda: str(tmp_path))
    env = {"REDIS_URL": "redis://127.0.0.1:6379/0", "GATEWAY_REDIS_PREFIX": "p:"}
    path = Path(metrics_dir.default_path(env))
    path.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    got = metrics_dir.configure(env)
    assert got.source == "unavailable" and "not a directory" in got.problem
    assert metrics_dir.ENV not in env
    path.unlink()
    path.mkdir(mode=0o755)
    os.chmod(path, 0o777)
    got = metrics_dir.configure(env)  # ours: tightened to 0700 and used
    assert got == metrics_dir.MetricsDir(str(path), "default") and env[metrics_dir.ENV] == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_live_gauges_of_dead_processes_are_dropped_counters_stay(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = int(done.stdout)  # a process that has exited (its pid is free unless reused right away)
    for name in (f"gauge_livesum_{dead}.db", f"counter_{dead}.db", f"gauge_livesum_{os.getpid()}.db"):
        (tmp_path / name).write_bytes(b"\0" * 8)
    assert metrics_dir.sweep_dead_live_gauges(str(tmp_path)) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"counter_{dead}.db",
        f"gauge_livesum_{os.getpid()}.db",
    ]
