"""/healthz and /readyz: readiness follows a real Redis going away and coming back."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from observability import health
from tests.servers import start_redis
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db


def shared(url: str):
    return override_settings(REDIS_URL=url, GATEWAY_QUOTA_BACKEND="redis", CELERY_TASK_ALWAYS_EAGER=False)


def test_readyz_follows_redis_outage_and_healthz_stays_up(client, tmp_path):
    server = start_redis(tmp_path)
    beat = None
    try:
        with shared(server.url):
            beat = health.Heartbeat(interval=0.1)  # a worker's heartbeat thread
            beat.start()
            wait_until(lambda: client.get("/readyz").status_code == 200, 30, what="/readyz to answer 200")
            ok = client.get("/readyz")
            assert ok.status_code == 200, ok.json()
            assert ok.json()["checks"] == {
                "database": {"status": "ok", "detail": ""},
                "migrations": {"status": "ok", "detail": ""},
                "redis": {"status": "ok", "detail": ""},
                "celery_workers": {"status": "ok", "detail": "1 alive"},
                # the heartbeat names this process's directory: this /metrics sees what it writes
                "worker_metrics": {
                    "status": "ok",
                    "detail": f"collected from {settings.GATEWAY_METRICS_DIR}",
                },
            }

            server.stop()
            down = client.get("/readyz")
            assert down.status_code == 503
            body = down.json()
            assert body["ready"] is False
            assert body["checks"]["redis"]["status"] == "fail"
            assert body["checks"]["database"]["status"] == "ok"
            assert client.get("/healthz").status_code == 200

            server = start_redis(tmp_path, port=server.port)  # back; empty until the next heartbeat
            wait_until(
                lambda: client.get("/readyz").status_code == 200, 30, what="/readyz to answer 200 again"
            )
            assert client.get("/healthz").status_code == 200
    finally:
        if beat is not None:
            beat.stopped.set()
            beat.join(5)
        server.stop()


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
