"""/healthz and /readyz: readiness follows a real Redis going away and coming back."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest
from django.test import override_settings

from observability import health

pytestmark = pytest.mark.django_db


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(port: int, tmp_path) -> subprocess.Popen:
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start")


def stop_redis(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(10)


def shared(url: str):
    return override_settings(REDIS_URL=url, GATEWAY_QUOTA_BACKEND="redis", CELERY_TASK_ALWAYS_EAGER=False)


def test_readyz_follows_redis_outage_and_healthz_stays_up(client, tmp_path):
    if not __import__("shutil").which("redis-server"):
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = start_redis(port, tmp_path)
    beat = None
    try:
        with shared(f"redis://127.0.0.1:{port}/0"):
            beat = health.Heartbeat(interval=0.1)  # a worker's heartbeat thread
            beat.start()
            deadline = time.monotonic() + 10
            while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            ok = client.get("/readyz")
            assert ok.status_code == 200, ok.json()
            assert ok.json()["checks"] == {
                "database": {"status": "ok", "detail": ""},
                "migrations": {"status": "ok", "detail": ""},
                "redis": {"status": "ok", "detail": ""},
                "celery_workers": {"status": "ok", "detail": "1 alive"},
            }

            stop_redis(proc)
            down = client.get("/readyz")
            assert down.status_code == 503
            body = down.json()
            assert body["ready"] is False
            assert body["checks"]["redis"]["status"] == "fail"
            assert body["checks"]["database"]["status"] == "ok"
            assert client.get("/healthz").status_code == 200

            proc = start_redis(port, tmp_path)  # back; its memory is empty until the next heartbeat
            deadline = time.monotonic() + 10
            while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert client.get("/readyz").status_code == 200
            assert client.get("/healthz").status_code == 200
    finally:
        if beat is not None:
            beat.stopped.set()
            beat.join(5)
        if proc.poll() is None:
            stop_redis(proc)


def test_readyz_503_without_a_worker_heartbeat(client, redis_sync, settings):
    prefix = settings.GATEWAY_REDIS_PREFIX + "ready:"  # no other test's worker can have beaten here
    with shared(settings.REDIS_URL), override_settings(GATEWAY_REDIS_PREFIX=prefix):
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"]["celery_workers"]["status"] == "fail"
        health.beat_once("test-worker")
        response = client.get("/readyz")
        assert response.status_code == 200, response.json()
        health.forget("test-worker")
        assert client.get("/readyz").status_code == 503


def test_readyz_single_process_mode_skips_redis_and_workers(client):
    with override_settings(GATEWAY_QUOTA_BACKEND="local"):
        response = client.get("/readyz")
    assert response.status_code == 200
    checks = response.json()["checks"]
    assert checks["redis"]["status"] == "skipped" and checks["celery_workers"]["status"] == "skipped"


def test_readyz_reports_unapplied_migrations(monkeypatch):
    from django.db.migrations.executor import MigrationExecutor

    monkeypatch.setattr(health, "_migrations_ok", False)
    monkeypatch.setattr(
        MigrationExecutor,
        "migration_plan",
        lambda self, targets: [(type("M", (), {"app_label": "x", "name": "0009_new"})(), False)],
    )
    check = health.check_migrations()
    assert not check.ok and "x.0009_new" in check.detail
