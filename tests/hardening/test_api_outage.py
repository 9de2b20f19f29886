"""Redis down → the API answers JSON 503 with Retry-After, never an HTML 500, and stores nothing.

Uses its own redis-server on a free port (the shared one is never touched), stops it mid-test.
Pre-fix: the DRF throttle's Redis call raised and Django answered an HTML 500."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest
from django.test import override_settings

from batches.models import Batch, BatchItem

pytestmark = pytest.mark.django_db


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def own_redis(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
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
            break
        except OSError:
            time.sleep(0.05)
    yield proc, f"redis://127.0.0.1:{port}/0"
    if proc.poll() is None:
        proc.terminate()
        proc.wait(10)


BODY = '{"items": [{"custom_id": "a", "route": "intent", "query": "hi"}]}'


def test_redis_outage_gives_json_503_with_retry_after_and_stores_nothing(client, route, own_redis):
    proc, url = own_redis
    with override_settings(REDIS_URL=url, CELERY_BROKER_URL=url):
        assert client.get("/api/v1/batches").status_code == 200  # Redis up: the throttle works
        proc.terminate()
        proc.wait(10)
        before = (Batch.objects.count(), BatchItem.objects.count())
        for method, path in (
            ("get", "/api/v1/batches"),
            ("post", "/api/v1/batches"),
            ("get", "/api/v1/usage"),
        ):
            if method == "post":
                response = client.generic("POST", path, BODY, content_type="application/json")
            else:
                response = client.get(path)
            assert response.status_code == 503, (path, response.content[:200])
            assert response["Content-Type"].startswith("application/json")
            assert response["Retry-After"] == "5"
            assert response.json() == {
                "detail": "rate limiter unavailable (Redis); retry later",
                "dependency": "redis",
            }
        assert (Batch.objects.count(), BatchItem.objects.count()) == before


def test_other_redis_failures_in_a_view_are_json_503(client, route, monkeypatch):
    """A Redis failure past the throttle (e.g. the broker on enqueue) is a JSON 503 too."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    def boom(*args, **kwargs):
        raise RedisConnectionError("Error 111 connecting to 10.0.0.9:6379. Connection refused.")

    monkeypatch.setattr("batches.api.views.selectors.batches_for_team", boom)
    response = client.get("/api/v1/batches")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert response.json() == {"detail": "redis is unavailable; retry in 5 s", "dependency": "redis"}
    assert "10.0.0.9" not in response.content.decode()
