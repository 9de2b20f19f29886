"""Probes answer behind any Host; an unexpected Host under /api/ and /v1/ is a JSON 400 in that surface's
error shape; every other path keeps Django's own answer (ALLOWED_HOSTS is not weakened for pages)."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

# what Prometheus in compose (web:8000) and a Kubernetes probe (the pod IP) send
PROBE_HOSTS = ["web:8000", "10.1.2.3:8000", "[fd00::1]:8000", "evil.example"]


@pytest.fixture
def anon():
    return APIClient()


@pytest.mark.parametrize("host", PROBE_HOSTS)
def test_healthz_and_readyz_answer_behind_any_host(anon, host):
    health = anon.get("/healthz", HTTP_HOST=host)
    assert health.status_code == 200 and health.json() == {"ok": True}
    ready = anon.get("/readyz", HTTP_HOST=host)
    assert ready.status_code in (200, 503) and ready["Content-Type"].startswith("application/json")
    assert {"ready", "checks"} <= set(ready.json())  # the readiness body, never Django's 400 page


@pytest.mark.parametrize("host", PROBE_HOSTS)
def test_metrics_answer_behind_any_host_and_keep_their_token(anon, host):
    with override_settings(GATEWAY_METRICS_TOKEN="probe-token-123"):
        refused = anon.get("/metrics", HTTP_HOST=host)
        assert refused.status_code == 403
        scraped = anon.get("/metrics", HTTP_HOST=host, HTTP_AUTHORIZATION="Bearer probe-token-123")
    assert scraped.status_code == 200 and scraped["Content-Type"].startswith("text/plain")
    assert b"# TYPE" in scraped.content


@pytest.mark.parametrize("path", ["/api/v1/batches", "/api/v1/usage", "/api/schema/", "/api/nope", "/api"])
def test_bad_host_under_api_is_a_native_json_400(anon, path, api_key):
    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    for method in ("get", "post"):
        response = getattr(anon, method)(path, HTTP_HOST="evil.example")
        assert response.status_code == 400, (method, path)
        assert response["Content-Type"].startswith("application/json"), response.content[:200]
        body = json.loads(response.content)
        assert set(body) == {"detail"} and "evil.example" in body["detail"] and "Host" in body["detail"]


@pytest.mark.parametrize("path", ["/v1/files", "/v1/batches", "/v1/nope", "/v1"])
def test_bad_host_under_v1_is_an_openai_json_400(anon, path):
    response = anon.get(path, HTTP_HOST="web:8000")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = json.loads(response.content)
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["code"] == "invalid_host"
    assert "web:8000" in body["error"]["message"]


@pytest.mark.parametrize("path", ["/dashboard/", "/admin/login/", "/", "/no-such-page", "/healthz/"])
def test_other_paths_keep_djangos_host_check(anon, path):
    response = anon.get(path, HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert not response["Content-Type"].startswith("application/json")


def test_an_allowed_host_is_served_as_before(anon, api_key):
    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    with override_settings(ALLOWED_HOSTS=["gateway.example"]):
        assert anon.get("/api/v1/usage", HTTP_HOST="gateway.example").status_code == 200
        assert anon.get("/v1/files", HTTP_HOST="gateway.example").status_code == 200
        assert anon.get("/api/v1/usage", HTTP_HOST="other.example").status_code == 400


def test_bad_host_is_logged_like_django_does(anon, caplog):
    with caplog.at_level("ERROR", logger="django.security.DisallowedHost"):
        anon.get("/api/v1/batches", HTTP_HOST="evil.example")
    assert any("evil.example" in r.getMessage() for r in caplog.records)


def test_probes_are_not_redirected_to_https(anon):
    """Behind a TLS proxy (DJANGO_SECURE_SSL_REDIRECT on) a probe still reaches the process over plain HTTP."""
    with override_settings(SECURE_SSL_REDIRECT=True):
        assert anon.get("/healthz", HTTP_HOST="10.1.2.3:8000").status_code == 200
        assert anon.get("/dashboard/").status_code == 301  # pages keep the redirect
