"""Redis down → the API answers JSON 503 with Retry-After, never an HTML 500, and stores nothing.

Uses its own redis-server on a free port (the shared one is never touched), stops it mid-test.
Pre-fix: the DRF throttle's Redis call raised and Django answered an HTML 500."""

from __future__ import annotations

import pytest
from django.test import override_settings

from batches.models import Batch, BatchItem
from tests.servers import start_redis

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_redis(tmp_path):
    server = start_redis(tmp_path)
    yield server
    server.stop()


BODY = '{"items": [{"custom_id": "a", "route": "intent", "query": "hi"}]}'


def test_redis_outage_gives_json_503_with_retry_after_and_stores_nothing(client, route, own_redis):
    url = own_redis.url
    with override_settings(REDIS_URL=url, CELERY_BROKER_URL=url):
        assert client.get("/api/v1/batches").status_code == 200  # Redis up: the throttle works
        own_redis.stop()
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
