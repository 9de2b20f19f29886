"""A worker host's own /metrics listener (observability/worker_metrics.py, GATEWAY_WORKER_METRICS_BIND):
the web's registry, the same token rule, nothing but /metrics. (Its use across hosts:
tests/system/test_multi_host.py.)"""

from __future__ import annotations

import httpx
import pytest

from observability import worker_metrics
from tests.servers import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def listener(settings):
    port = free_port()
    settings.GATEWAY_WORKER_METRICS_BIND = f"127.0.0.1:{port}"
    worker_metrics.start()
    yield f"http://127.0.0.1:{port}"
    worker_metrics.stop()


def test_it_serves_the_hosts_metrics_behind_the_token(listener, settings):
    settings.GATEWAY_METRICS_TOKEN = "s3cret"
    assert httpx.get(f"{listener}/metrics", trust_env=False).status_code == 403
    assert (
        httpx.get(
            f"{listener}/metrics", headers={"Authorization": "Bearer nope"}, trust_env=False
        ).status_code
        == 403
    )
    ok = httpx.get(f"{listener}/metrics", headers={"Authorization": "Bearer s3cret"}, trust_env=False)
    assert ok.status_code == 200 and "gateway_worker_metrics_collected" in ok.text
    assert ok.headers["content-type"].startswith("text/plain")
    assert httpx.get(f"{listener}/admin/", trust_env=False).status_code == 404


def test_unset_starts_nothing(settings):
    settings.GATEWAY_WORKER_METRICS_BIND = ""
    assert worker_metrics.start() is None
